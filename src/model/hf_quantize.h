// Quantization of GGUF files and Hugging Face folders into standard GGUF (what
// `tachyon quantize` runs).
//
// Presets (llama.cpp file types): Q8_0, Q4_0, Q4_K_M, Q5_K_M, Q6_K, F16, BF16.
// Rules per tensor:
// - 1-D tensors (norms, biases, rope_freqs) and the MoE router (ffn_gate_inp) stay F32.
// - Q4_K_M / Q5_K_M: the output matrix (or token_embd when tied), and attn_v / ffn_down
//   (also ffn_down_exps) of the first and last eighth of the layers and every third layer
//   between, become Q6_K; other matrices Q4_K / Q5_K (what llama.cpp picks for these files).
// - The other presets use their type for every matrix.
// - A row length that is not a multiple of the type's block falls back: Q4_K -> Q5_0,
//   Q5_K -> Q5_1, Q6_K -> Q8_0; a 32-block type -> F16.
// Metadata is copied; general.file_type is set and general.quantization_version is 2.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"
#include "tensor/dtype.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace tachyon::model {

struct QuantPreset {
  std::string_view name;   // "Q4_K_M"
  GgmlType base;           // type of most matrices
  uint32_t file_type;      // general.file_type (llama.cpp LLAMA_FTYPE_*)
  bool mixed;              // the _M attn_v / ffn_down rule
};

// The preset named `name` (case-insensitive), or nullopt.
std::optional<QuantPreset> FindQuantPreset(std::string_view name);
std::string QuantPresetNames();  // "Q8_0, Q4_0, ..."

// The storage type of tensor `name` with GGUF dims `dims` under `preset`. `n_layers` is the
// block count, `tied` whether the model has no output.weight.
GgmlType ChooseQuantType(const QuantPreset& preset, const std::string& name,
                         const std::vector<int64_t>& dims, int64_t n_layers, bool tied);

struct QuantizeStats {
  int64_t n_tensors = 0;
  uint64_t bytes_in = 0;   // tensor data
  uint64_t bytes_out = 0;
};

// Quantizes every tensor of `in` and writes `out_path`. `pool` may be null.
// `float_only`: tensors already stored in a quantized type are copied as they are (only
// F32 / F16 / BF16 matrices are converted), as quantize-on-load does.
// Errors name the file and the tensor (unsupported input type, write failure).
Result<QuantizeStats> QuantizeGguf(const gguf::GgufFile& in, const std::string& out_path,
                                   const QuantPreset& preset, ThreadPool* pool,
                                   bool float_only = false);

// `in` is a GGUF file or a Hugging Face folder (converted first; see model/hf_convert.h).
Result<QuantizeStats> QuantizeModelFile(const std::string& in, const std::string& out_path,
                                        const QuantPreset& preset, ThreadPool* pool,
                                        bool float_only = false);

// Quantize-on-load names ("q8_0", "q4_0", "q4_k", case-insensitive) to their preset:
// Q8_0, Q4_0 and Q4_K_M (llama.cpp's usual mix for 4-bit K-quants). nullopt if unknown.
std::optional<QuantPreset> FindLoadQuantization(std::string_view name);
inline constexpr const char* kLoadQuantizationNames = "q8_0, q4_0, q4_k";

}  // namespace tachyon::model
