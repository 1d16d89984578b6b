// BERT family encoders (BERT, RoBERTa, XLM-R, MiniLM, BGE, E5 ...), in llama.cpp's "bert"
// GGUF layout: learned absolute positions (position_embd) and token types (token_types), the
// embedding LayerNorm (token_embd_norm), per layer biased Q/K/V/output projections, post-
// LayerNorms (attn_output_norm, layer_output_norm) and an erf-GELU FFN (ffn_up, ffn_down with
// biases); no RoPE, bidirectional attention. Optional classification head (cls = pooler
// dense + tanh, cls.output = classifier) for cross-encoders. Keys: bert.pooling_type (default
// mean), bert.attention.layer_norm_epsilon.
#include <algorithm>

#include "model/arch.h"

namespace tachyon::model {

namespace bert {

std::string Name(int64_t il, const char* tensor, const char* kind) {
  return "blk." + std::to_string(il) + "." + tensor + "." + kind;
}

Status Configure(const ArchKeys& keys, ModelConfig* c) {
  c->encoder = true;
  c->rot_dim = 0;  // no RoPE
  ASSIGN_OR_RETURN(c->rms_eps, keys.OptionalFloat("attention.layer_norm_epsilon", 1e-12f));
  if (!(c->rms_eps > 0)) {
    return InvalidArgument(keys.file().path() + ": " + keys.Key("attention.layer_norm_epsilon") +
                           " must be positive");
  }
  if (!keys.Has("pooling_type")) c->pooling = PoolingType::kMean;
  if (c->pooling == PoolingType::kNone) {
    return Unimplemented(keys.file().path() + ": " + keys.Key("pooling_type") +
                         " 0 (no pooling) is not supported for an encoder");
  }
  if (c->n_kv_heads != c->n_heads) {
    return InvalidArgument(keys.file().path() + ": an encoder needs head_count_kv == head_count");
  }
  return OkStatus();
}

Status LoadGlobals(TensorSource& src, ModelConfig* c, ModelWeights* w) {
  ASSIGN_OR_RETURN(w->position_embd, src.Table("position_embd.weight", c->n_embd, c->n_ctx_train));
  if (src.Has("token_types.weight")) {
    // The row count is the tensor's (BERT has 2, RoBERTa 1).
    const std::vector<int64_t>& dims = *src.Dims("token_types.weight");
    c->n_token_types = dims.size() == 2 ? dims[1] : 0;
    ASSIGN_OR_RETURN(w->token_types, src.Table("token_types.weight", c->n_embd,
                                               std::max<int64_t>(c->n_token_types, 1)));
  }
  ASSIGN_OR_RETURN(w->embd_norm, src.Vector("token_embd_norm.weight", c->n_embd));
  ASSIGN_OR_RETURN(w->embd_norm_b, src.Vector("token_embd_norm.bias", c->n_embd));
  if (src.Has("cls.output.weight")) {
    ASSIGN_OR_RETURN(w->cls, src.Matrix("cls.weight", c->n_embd, c->n_embd));
    ASSIGN_OR_RETURN(w->cls_b, src.Vector("cls.bias", c->n_embd));
    const std::vector<int64_t>& dims = *src.Dims("cls.output.weight");
    c->n_cls_out = dims.size() == 2 ? std::clamp<int64_t>(dims[1], 1, 1 << 16) : 1;
    ASSIGN_OR_RETURN(w->cls_out, src.Matrix("cls.output.weight", c->n_embd, c->n_cls_out));
    ASSIGN_OR_RETURN(w->cls_out_b, src.Vector("cls.output.bias", c->n_cls_out));
  }
  if (c->pooling == PoolingType::kRank && c->n_cls_out == 0) {
    return InvalidArgument("bert.pooling_type 4 (rank) needs the cls / cls.output head tensors");
  }
  return OkStatus();
}

Status LoadLayer(TensorSource& src, const ModelConfig& c, int64_t il, LayerWeights* w) {
  const int64_t d = c.n_embd;
  if (c.n_ff <= 0) return InvalidArgument("missing metadata key bert.feed_forward_length");
  ASSIGN_OR_RETURN(w->wq, src.Matrix(Name(il, "attn_q", "weight"), d, c.q_dim()));
  ASSIGN_OR_RETURN(w->wk, src.Matrix(Name(il, "attn_k", "weight"), d, c.kv_dim()));
  ASSIGN_OR_RETURN(w->wv, src.Matrix(Name(il, "attn_v", "weight"), d, c.kv_dim()));
  ASSIGN_OR_RETURN(w->wo, src.Matrix(Name(il, "attn_output", "weight"), c.q_dim(), d));
  ASSIGN_OR_RETURN(w->bq, src.Vector(Name(il, "attn_q", "bias"), c.q_dim()));
  ASSIGN_OR_RETURN(w->bk, src.Vector(Name(il, "attn_k", "bias"), c.kv_dim()));
  ASSIGN_OR_RETURN(w->bv, src.Vector(Name(il, "attn_v", "bias"), c.kv_dim()));
  ASSIGN_OR_RETURN(w->bo, src.Vector(Name(il, "attn_output", "bias"), d));
  ASSIGN_OR_RETURN(w->attn_out_norm, src.Vector(Name(il, "attn_output_norm", "weight"), d));
  ASSIGN_OR_RETURN(w->attn_out_norm_b, src.Vector(Name(il, "attn_output_norm", "bias"), d));
  ASSIGN_OR_RETURN(w->w_up, src.Matrix(Name(il, "ffn_up", "weight"), d, c.n_ff));
  ASSIGN_OR_RETURN(w->b_up, src.Vector(Name(il, "ffn_up", "bias"), c.n_ff));
  ASSIGN_OR_RETURN(w->w_down, src.Matrix(Name(il, "ffn_down", "weight"), c.n_ff, d));
  ASSIGN_OR_RETURN(w->b_down, src.Vector(Name(il, "ffn_down", "bias"), d));
  ASSIGN_OR_RETURN(w->out_norm, src.Vector(Name(il, "layer_output_norm", "weight"), d));
  ASSIGN_OR_RETURN(w->out_norm_b, src.Vector(Name(il, "layer_output_norm", "bias"), d));
  return OkStatus();
}

}  // namespace bert

const ArchDef kBertArch = {"bert", bert::Configure, bert::LoadLayer, bert::LoadGlobals};

}  // namespace tachyon::model
