// Random-weight models of real shapes, written as standard GGUF (benchmarks and tests: speed
// does not depend on weight values). Used by `tachyon synth`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/dtype.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace tachyon::model {

struct SynthShape {
  std::string name;
  int64_t n_embd, n_layers, n_heads, n_kv_heads, n_ff, n_vocab, n_ctx;
  float rope_theta;
};

// Known shapes: "llama-1b" (Llama-3.2-1B), "llama-8b" (Llama-3.1-8B: 131072-token context),
// "qwen-0.5b" (Qwen2.5-0.5B), "tiny" (testdata's
// tiny models: 256 wide, 2 layers, vocab 512). Embeddings are tied in every shape.
Result<SynthShape> FindSynthShape(const std::string& name);
std::string SynthShapeNames();

// gemma3 files get a sliding window of this many positions on every 2nd layer (layer 0
// slides, layer 1 is global, ...) and this final logit soft-cap.
inline constexpr uint32_t kSynthGemmaWindow = 8;
inline constexpr float kSynthGemmaSoftcap = 30.0f;

struct SynthOptions {
  std::string arch = "llama";  // llama | qwen2 | qwen3 | gemma3
  std::string shape = "tiny";
  // A plain type (F32, F16, BF16, Q8_0, Q4_0, ..., Q6_K) or the mix "Q4_K_M". Norms and
  // biases stay F32; the tied embedding/output matrix is Q6_K for 4/5-bit and K-quant
  // types (as llama.cpp's quantizer writes it); K-quants fall back for rows that are not a
  // multiple of 256 (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K/Q3_K -> Q4_0).
  std::string type = "Q4_0";
  uint64_t seed = 1;
};

// The weight type synth gives tensor `name` (2-D), with `cols` elements per row.
// `layer` / `n_layers` drive the Q4_K_M mix; layer < 0 for non-layer tensors.
Result<GgmlType> SynthTensorType(const std::string& type, const std::string& name, int64_t cols,
                                 int64_t layer, int64_t n_layers);

// Writes the model to `path`. Quantization runs on `pool` (may be null).
Status WriteSynthModel(const SynthOptions& options, const std::string& path, ThreadPool* pool);

}  // namespace tachyon::model
