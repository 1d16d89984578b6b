// Qwen2 / Qwen2.5: Llama-style blocks with Q/K/V biases and NEOX RoPE (pairs i, i + d/2).
#include "model/arch.h"
#include "model/layers.h"

namespace tachyon::model {

namespace qwen2 {

Status Configure(const ArchKeys& keys, ModelConfig* c) {
  c->rope_style = kernels::RopeStyle::kNeox;
  c->qkv_bias = true;
  return OkStatus();
}

Status LoadLayer(TensorSource& src, const ModelConfig& c, int64_t il, LayerWeights* w) {
  RETURN_IF_ERROR(LoadAttention(src, c, il, w));
  return LoadDenseFfn(src, c, il, w);
}

}  // namespace qwen2

const ArchDef kQwen2Arch = {"qwen2", qwen2::Configure, qwen2::LoadLayer};

}  // namespace tachyon::model
