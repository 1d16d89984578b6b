// Hugging Face encoders (BERT, RoBERTa, XLM-R; bare models and ...ForSequenceClassification
// cross-encoders) and sentence-transformers pooling configs -> llama.cpp's "bert" GGUF layout
// (see model/bert.cc). Used by model/hf_convert.cc.
//
// Tensor mapping (an optional "bert." / "roberta." prefix is dropped):
//   embeddings.{word,position,token_type}_embeddings.weight
//                                   -> token_embd / position_embd / token_types .weight
//   embeddings.LayerNorm.*          -> token_embd_norm.*
//   encoder.layer.N.attention.self.{query,key,value}.* -> blk.N.attn_{q,k,v}.*
//   encoder.layer.N.attention.output.dense.*     -> blk.N.attn_output.*
//   encoder.layer.N.attention.output.LayerNorm.* -> blk.N.attn_output_norm.*
//   encoder.layer.N.intermediate.dense.*         -> blk.N.ffn_up.*
//   encoder.layer.N.output.dense.*               -> blk.N.ffn_down.*
//   encoder.layer.N.output.LayerNorm.*           -> blk.N.layer_output_norm.*
//   pooler.dense.* or classifier.dense.*         -> cls.*         (classification models)
//   classifier.* or classifier.out_proj.*        -> cls.output.*
// RoBERTa / XLM-R position tables start at padding_idx + 1; those first rows are dropped.
//
// Pooling (bert.pooling_type and the tachyon keys bert.pooling.normalize /
// bert.pooling.max_length): ...ForSequenceClassification -> rank; else modules.json with
// 1_Pooling/config.json (pooling_mode_mean_tokens / cls_token / lasttoken; max and
// mean_sqrt_len are refused) and a Normalize module, sentence_bert_config.json's
// max_seq_length; without them mean pooling, normalised, the full position table. Decoder
// folders with a sentence-transformers Pooling module (e.g. last-token embedding models)
// get <arch>.pooling_type the same way.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "gguf/gguf.h"
#include "model/hf_config.h"
#include "util/status.h"

namespace tachyon::model {

// True for the encoder architectures above ("BertModel", "XLMRobertaForSequenceClassification"...).
bool IsHfEncoderArch(const std::string& hf_arch);

// Reads the encoder fields of config.json (layer_norm_eps, type_vocab_size, model_type,
// pad_token_id, num_labels / id2label) into `c`.
Status ParseHfEncoderFields(const nlohmann::json& j, const std::string& path, HfConfig* c);

// Reads the sentence-transformers files of `dir` (none is required) into c's pooling fields.
Status ReadSentenceTransformersConfig(const std::string& dir, HfConfig* c);

// Writes the encoder / pooling keys for `c` (bert.attention.layer_norm_epsilon,
// bert.pooling_type, bert.pooling.*). REQUIRES: SetGgufHyperparameters ran.
void SetGgufPoolingKeys(const HfConfig& c, gguf::GgufWriter* w);

struct EncoderTensor {
  std::string gguf;
  int64_t order = 0;      // embeddings first, layers in order, head last
  int64_t skip_rows = 0;  // leading rows to drop (RoBERTa position table)
};
// The GGUF name of an HF encoder tensor; nullopt for buffers the model does not need
// (position_ids, a bare model's pooler, an MLM head); an error for unknown names.
Result<std::optional<EncoderTensor>> MapEncoderName(const std::string& name, const HfConfig& c);

}  // namespace tachyon::model
