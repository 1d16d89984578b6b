// Qwen3 (dense): per-head RMSNorm of q and k (attn_q_norm / attn_k_norm over head_dim,
// before RoPE), no biases, NEOX RoPE.
#include "model/arch.h"
#include "model/layers.h"

namespace tachyon::model {

namespace qwen3 {

Status Configure(const ArchKeys& keys, ModelConfig* c) {
  c->rope_style = kernels::RopeStyle::kNeox;
  c->qk_norm = true;
  return OkStatus();
}

Status LoadLayer(TensorSource& src, const ModelConfig& c, int64_t il, LayerWeights* w) {
  RETURN_IF_ERROR(LoadAttention(src, c, il, w));
  return LoadDenseFfn(src, c, il, w);
}

}  // namespace qwen3

const ArchDef kQwen3Arch = {"qwen3", qwen3::Configure, qwen3::LoadLayer};

}  // namespace tachyon::model
