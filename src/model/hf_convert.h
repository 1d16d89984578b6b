// Hugging Face model folders (config.json + *.safetensors [+ tokenizer files]) converted to
// the GGUF layout the model loader reads: llama.* / qwen2.* / qwen3.* metadata and
// token_embd.weight, blk.N.attn_q.weight, ... tensors.
//
// Encoders (BERT / RoBERTa / XLM-R) map as model/hf_encoder.h says. Decoder tensor mapping
// (HF -> GGUF):
//   model.embed_tokens.weight                  -> token_embd.weight
//   model.layers.N.input_layernorm.weight      -> blk.N.attn_norm.weight
//   model.layers.N.self_attn.{q,k,v,o}_proj.*  -> blk.N.attn_{q,k,v,output}.*
//   model.layers.N.self_attn.{q,k}_norm.weight -> blk.N.attn_{q,k}_norm.weight (qwen3)
//   model.layers.N.post_attention_layernorm.weight -> blk.N.ffn_norm.weight
//   model.layers.N.mlp.{gate,up,down}_proj.weight  -> blk.N.ffn_{gate,up,down}.weight
//   model.norm.weight -> output_norm.weight;  lm_head.weight -> output.weight (unless tied)
// HF stores matrices [out, in] row-major, which is GGUF dims [in, out] with the same bytes.
// For the llama architecture the rows of Q and K (and their biases) are permuted from HF's
// rotate-half order (pairs i, i + d/2) to GGUF's adjacent-pair order (2i, 2i + 1); qwen2 and
// qwen3 use NEOX RoPE in GGUF too, so their rows are kept.
// Matrices keep F32 / F16 / BF16; vectors and other dtypes become F32.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/hf_config.h"
#include "safetensors/safetensors.h"
#include "util/status.h"

namespace tachyon::model {

// True when `path` is a folder holding a config.json.
bool IsHfModelFolder(const std::string& path);

// A converted folder: the GGUF writer's tensors point into the open safetensors files or
// buffers owned here, so keep this alive until the writer has written.
class HfGguf {
 public:
  // Reads config.json, every tensor, and the tokenizer (tokenizer.json +
  // tokenizer_config.json, when present) of `dir`. Errors name the file and field/tensor.
  static Result<std::unique_ptr<HfGguf>> Convert(const std::string& dir);

  const HfConfig& config() const { return config_; }
  gguf::GgufWriter& writer() { return writer_; }

 private:
  HfGguf() = default;
  static Result<std::unique_ptr<HfGguf>> ConvertChecked(const std::string& dir);  // may throw
  Status AddTensors(const std::string& dir);
  // `add` is added to every element (Gemma's (1 + w) norms); vectors only.
  Status AddOne(const std::string& gguf_name, const safetensors::SafetensorsModel::Entry& e,
                int64_t permute_heads, int64_t skip_rows, float add);
  std::vector<uint8_t>& Own(size_t n);

  HfConfig config_;
  std::unique_ptr<safetensors::SafetensorsModel> st_;
  std::deque<std::vector<uint8_t>> owned_;
  gguf::GgufWriter writer_;
  GgmlType file_type_ = GgmlType::kF32;
  int64_t n_vocab_ = 0;  // rows of token_embd.weight
};

// Converts `dir` and writes a GGUF file to `out_path`.
Status ConvertHfFolderToGguf(const std::string& dir, const std::string& out_path);

// Reorders the rows of one HF Q or K projection ([n_heads * head_dim] rows of `row_bytes`)
// from rotate-half to adjacent-pair order (inverse = false), or back (inverse = true).
void PermuteQkRows(const uint8_t* src, uint8_t* dst, int64_t n_heads, int64_t head_dim,
                   size_t row_bytes, bool inverse);

}  // namespace tachyon::model
