// ModelConfig: the hyperparameters of a decoder-only transformer, read from GGUF metadata.
// One config with feature flags covers every supported architecture (see model/arch.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/ops.h"
#include "util/status.h"

namespace tachyon::model {

// How a pooling model turns a sequence's final hidden states into one vector (llama.cpp's
// <arch>.pooling_type numbering). kRank: CLS pooling then the classification head (a
// cross-encoder's relevance score).
enum class PoolingType : int { kNone = 0, kMean = 1, kCls = 2, kLast = 3, kRank = 4 };
// "none", "mean", "cls", "last", "rank".
const char* PoolingTypeName(PoolingType p);

struct ModelConfig {
  std::string arch;          // general.architecture ("llama", "qwen2", ...)
  std::string name;          // general.name, or the file name
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;   // <arch>.context_length
  int64_t n_embd = 0;
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;      // <arch>.attention.key_length, else n_embd / n_heads
  int64_t n_ff = 0;          // dense FFN width (0 when every layer is MoE)
  float rms_eps = 1e-5f;

  // RoPE: the first rot_dim dims of each head rotate with angle pos * rope_inv_freq[i].
  kernels::RopeStyle rope_style = kernels::RopeStyle::kAdjacent;
  int64_t rot_dim = 0;
  float rope_theta = 10000.0f;
  std::vector<float> rope_inv_freq;  // [rot_dim / 2], scaling already applied

  int64_t sliding_window = 0;  // > 0: sliding layers see only the last sliding_window positions
  // Which layers slide (Gemma 3 interleaves sliding and global layers): empty = every layer
  // when sliding_window > 0; else [n_layers], 1 = sliding.
  std::vector<uint8_t> sliding_layers;
  // RoPE of the sliding layers when they have their own base (Gemma 3: 10000 locally, no
  // scaling); empty = rope_inv_freq. [rot_dim / 2]
  std::vector<float> rope_inv_freq_swa;

  // Feature flags set by the architecture.
  bool qkv_bias = false;   // attn_q/k/v biases
  bool qk_norm = false;    // per-head RMSNorm of q and k before RoPE
  bool tied_output = false;  // output matrix = token_embd (no output.weight in the file)

  // Gemma: RmsNorm of each block's output before its residual add (post_attention_norm,
  // post_ffw_norm); GeGLU; scaled embeddings (sqrt(n_embd)); the softmax scale of q·k
  // (0 = 1 / sqrt(head_dim)); a final soft-cap (> 0: logits = cap * tanh(logits / cap)).
  bool post_norms = false;
  kernels::GatedAct ffn_act = kernels::GatedAct::kSilu;
  float embd_scale = 1.0f;
  float attn_scale = 0.0f;
  float final_logit_softcap = 0.0f;

  // Mixture of experts (n_experts > 0).
  int64_t n_experts = 0;
  int64_t n_experts_used = 0;
  int64_t n_ff_expert = 0;
  bool moe_norm_topk = true;  // renormalise the chosen experts' weights to sum 1

  // Encoders (BERT family, arch "bert"): bidirectional attention, learned absolute positions
  // (n_ctx_train of them) and token types, post-LayerNorm with biases (eps in rms_eps), an
  // erf-GELU FFN, no output matrix; Model::Pool is their only forward.
  bool encoder = false;
  int64_t n_token_types = 0;  // rows of token_types.weight (0: none)
  // Pooling for Model::Pool (<arch>.pooling_type; kNone for generation models).
  PoolingType pooling = PoolingType::kNone;
  // L2-normalise pooled embeddings (<arch>.pooling.normalize, default true as llama.cpp's
  // server does; false when a sentence-transformers folder has no Normalize module).
  bool normalize_embeddings = true;
  int64_t n_cls_out = 0;  // labels of the classification head (cls.output), 0: none
  // Tokens a pooling request may hold (sentence-transformers max_seq_length or the trained
  // context); longer inputs are truncated to it, keeping the final special token.
  int64_t max_pool_tokens = 0;

  int64_t q_dim() const { return n_heads * head_dim; }
  int64_t kv_dim() const { return n_kv_heads * head_dim; }
  bool IsSlidingLayer(int64_t il) const {
    return sliding_window > 0 && (sliding_layers.empty() || sliding_layers[il] != 0);
  }
};

// Reads "<arch>.<suffix>" keys. Errors name the file and the key.
class ArchKeys {
 public:
  ArchKeys(const gguf::GgufFile& file, std::string arch) : file_(file), arch_(std::move(arch)) {}
  std::string Key(const std::string& suffix) const { return arch_ + "." + suffix; }
  bool Has(const std::string& suffix) const { return file_.Find(Key(suffix)) != nullptr; }
  // A required positive integer no larger than `max`.
  Result<int64_t> RequireInt(const std::string& suffix, int64_t max) const;
  // An optional integer in [0, max]; `def` when absent.
  Result<int64_t> OptionalInt(const std::string& suffix, int64_t def, int64_t max) const;
  Result<float> OptionalFloat(const std::string& suffix, float def) const;
  const gguf::GgufFile& file() const { return file_; }

 private:
  const gguf::GgufFile& file_;
  std::string arch_;
};

// Fills the fields every architecture shares (sizes, norms, RoPE base and rope scaling keys).
// Arch-specific flags are set by the ArchDef afterwards; n_vocab is checked against the
// token embedding at load.
Result<ModelConfig> ReadBaseConfig(const gguf::GgufFile& file, const std::string& arch);

// inv_freq[i] = theta^(-2i / rot_dim) for i < rot_dim / 2 (plain RoPE, no scaling).
std::vector<float> PlainRopeFrequencies(double theta, int64_t rot_dim);

// Computes rope_inv_freq from rope_theta, rot_dim, the rope scaling keys and, when non-null,
// the per-pair divisors of a rope_freqs tensor ([rot_dim / 2]).
Status ComputeRopeFrequencies(const ArchKeys& keys, const float* freq_factors,
                              ModelConfig* config);

}  // namespace tachyon::model
