// Hugging Face config.json -> the GGUF metadata the model loader reads.
//
// Supported "architectures": LlamaForCausalLM and MistralForCausalLM (GGUF "llama"),
// Qwen2ForCausalLM ("qwen2"), Qwen3ForCausalLM ("qwen3"), Gemma3ForCausalLM ("gemma3": also
// sliding_window, layer_types or sliding_window_pattern, rope_local_base_freq,
// query_pre_attn_scalar, final_logit_softcapping; attn_logit_softcapping is refused); the
// encoders of model/hf_encoder.h (Bert*, Roberta*, XLMRoberta* -> "bert", encoder fields read
// there). Fields read: hidden_size,
// num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim, intermediate_size,
// rope_theta, rope_scaling (linear, llama3), rms_norm_eps, tie_word_embeddings,
// max_position_embeddings, vocab_size, sliding_window (Mistral; Qwen only with
// use_sliding_window, which is unsupported).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "util/status.h"

namespace tachyon::model {

struct HfConfig {
  std::string hf_arch;    // "LlamaForCausalLM", ...
  std::string gguf_arch;  // "llama", "qwen2", "qwen3"
  bool permute_qk = false;  // HF rotate-half Q/K rows -> GGUF adjacent-pair order (llama)
  int64_t n_embd = 0;
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t n_ff = 0;
  int64_t n_vocab = 0;  // 0 when absent
  int64_t n_ctx_train = 0;  // 0 when absent
  double rope_theta = 10000.0;
  double rms_eps = 1e-6;
  bool tie_embeddings = false;
  int64_t sliding_window = 0;
  // rope_scaling
  std::string rope_scaling_type = "none";  // none, linear, llama3
  double rope_factor = 1.0;
  double rope_low_freq_factor = 1.0;
  double rope_high_freq_factor = 4.0;
  int64_t rope_original_ctx = 8192;
  // Gemma 3: every swa_pattern-th layer global, the others sliding with their own RoPE base.
  int64_t swa_pattern = 0;
  double rope_local_theta = 10000.0;
  double query_pre_attn_scalar = 0;
  double final_logit_softcap = 0;  // 0: none
  // Encoders (model/hf_encoder.h) and pooling (any architecture).
  bool encoder = false;
  bool classifier = false;     // ...ForSequenceClassification
  int64_t n_labels = 0;        // classifier outputs
  int64_t n_token_types = 0;   // type_vocab_size
  int64_t position_offset = 0;  // RoBERTa: padding_idx + 1 leading position rows
  int pooling_type = 0;        // model::PoolingType numbering; 0: none (generation)
  bool normalize = true;       // L2-normalise pooled embeddings
  int64_t max_seq_len = 0;     // sentence-transformers max_seq_length; 0: unset
};

// Parses config.json text; `path` names it in errors ("config.json: missing hidden_size").
Result<HfConfig> ParseHfConfig(const std::string& json_text, const std::string& path);
Result<HfConfig> ReadHfConfig(const std::string& path);

// Writes general.architecture and the <arch>.* hyperparameter keys.
void SetGgufHyperparameters(const HfConfig& c, gguf::GgufWriter* w);

// Llama 3 rope scaling as GGUF stores it: per-pair frequency divisors [head_dim / 2]
// (rope_freqs.weight). Empty unless rope_scaling_type is "llama3".
std::vector<float> Llama3RopeFreqFactors(const HfConfig& c);

}  // namespace tachyon::model
