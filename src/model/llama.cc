// Llama family (Llama 2 / 3.x, Mistral, TinyLlama, SmolLM): GQA, SwiGLU, RMSNorm, RoPE on
// adjacent pairs (the GGUF "llama" layout), optional Llama 3 rope scaling (rope_freqs tensor
// or rope.scaling keys, handled at load) and optional sliding-window attention.
#include "model/arch.h"
#include "model/layers.h"

namespace tachyon::model {

namespace llama {

Status Configure(const ArchKeys& keys, ModelConfig* c) {
  c->rope_style = kernels::RopeStyle::kAdjacent;
  return OkStatus();
}

Status LoadLayer(TensorSource& src, const ModelConfig& c, int64_t il, LayerWeights* w) {
  RETURN_IF_ERROR(LoadAttention(src, c, il, w));
  return LoadDenseFfn(src, c, il, w);
}

}  // namespace llama

const ArchDef kLlamaArch = {"llama", llama::Configure, llama::LoadLayer};

}  // namespace tachyon::model
