// Qwen3-MoE: Qwen3 attention + a mixture-of-experts FFN in every layer. Router: softmax over
// all experts, keep the top expert_used_count, renormalise their weights to sum 1 (llama.cpp
// always does so for this architecture; an expert_weights_norm key, if present, decides).
#include "model/arch.h"
#include "model/layers.h"

namespace tachyon::model {

namespace qwen3moe {

Status Configure(const ArchKeys& keys, ModelConfig* c) {
  c->rope_style = kernels::RopeStyle::kNeox;
  c->qk_norm = true;
  ASSIGN_OR_RETURN(c->n_experts, keys.RequireInt("expert_count", 1 << 16));
  ASSIGN_OR_RETURN(c->n_experts_used, keys.RequireInt("expert_used_count", c->n_experts));
  ASSIGN_OR_RETURN(c->n_ff_expert, keys.RequireInt("expert_feed_forward_length", 1 << 20));
  c->moe_norm_topk = keys.file().GetBool(keys.Key("expert_weights_norm")).value_or(true);
  return OkStatus();
}

Status LoadLayer(TensorSource& src, const ModelConfig& c, int64_t il, LayerWeights* w) {
  RETURN_IF_ERROR(LoadAttention(src, c, il, w));
  return LoadMoeFfn(src, c, il, w);
}

}  // namespace qwen3moe

const ArchDef kQwen3MoeArch = {"qwen3moe", qwen3moe::Configure, qwen3moe::LoadLayer};

}  // namespace tachyon::model
