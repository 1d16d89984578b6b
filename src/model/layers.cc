#include "model/layers.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>

#include "kernels/fused_rows.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace tachyon::model {

namespace {

std::string Blk(int64_t il, const char* name) {
  return "blk." + std::to_string(il) + "." + name + ".weight";
}
std::string BlkBias(int64_t il, const char* name) {
  return "blk." + std::to_string(il) + "." + name + ".bias";
}

template <typename T>
void Grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

void AddBiasRows(float* x, const float* bias, int64_t n, int64_t dim) {
  for (int64_t i = 0; i < n; ++i) kernels::AddInPlace(x + i * dim, bias, dim);
}

// Runs fn(begin, end) over rows [0, n), split over the pool when there are enough rows.
template <typename Fn>
void ForRows(ThreadPool* pool, int64_t n, const Fn& fn) {
  if (pool != nullptr && pool->num_threads() > 1 && n >= 8) {
    pool->ParallelFor(n, fn, 4);
  } else {
    fn(0, n);
  }
}

// xn = RmsNorm(x) * weight, first adding a pending block output (s.tmp) to x in the same
// pass.
void NormInput(StepContext& ctx, const float* weight) {
  OpTimer t(ctx.prof, OpKind::kRmsNorm);
  const ModelConfig& c = *ctx.config;
  Scratch& s = *ctx.s;
  const int64_t d = c.n_embd;
  const bool add = ctx.pending_residual;
  ForRows(ctx.pool, ctx.n_tokens, [&](int64_t b, int64_t e) {
    if (add) {
      kernels::AddRmsNorm(s.x.data() + b * d, s.tmp.data() + b * d, weight, s.xn.data() + b * d,
                          e - b, d, c.rms_eps);
    } else {
      kernels::RmsNorm(s.x.data() + b * d, weight, s.xn.data() + b * d, e - b, d, c.rms_eps);
    }
  });
  ctx.pending_residual = false;
}

// ys[i] = NormInput(weight) · ws[i]ᵀ: with ctx.fuse_inputs the norm (and the pending
// residual add) runs row by row inside the matmul's activation conversion (xn is not
// written), else as NormInput then MatMulMulti. Timed as `op`.
void NormedMatMul(StepContext& ctx, const float* weight, std::span<const kernels::Weight* const> ws,
                  std::span<float* const> ys, OpKind op) {
  if (!ctx.fuse_inputs) {
    NormInput(ctx, weight);
    OpTimer t(ctx.prof, op);
    kernels::MatMulMulti(ws, ctx.s->xn.data(), ctx.n_tokens, ys, ctx.pool, ctx.n_decode_rows);
    return;
  }
  OpTimer t(ctx.prof, op);
  Scratch& s = *ctx.s;
  const ModelConfig& c = *ctx.config;
  const kernels::RmsNormRows rows(s.x.data(), ctx.pending_residual ? s.tmp.data() : nullptr, weight,
                                  c.n_embd, c.rms_eps);
  kernels::MatMulMultiRows(ws, rows, ctx.n_tokens, ys, ctx.pool, ctx.n_decode_rows);
  ctx.pending_residual = false;
}

// tmp = RmsNorm(tmp) * weight (a block's post-norm), when weight is set.
void PostNorm(StepContext& ctx, const float* weight) {
  if (weight == nullptr) return;
  OpTimer t(ctx.prof, OpKind::kRmsNorm);
  const int64_t d = ctx.config->n_embd;
  float* tmp = ctx.s->tmp.data();
  ForRows(ctx.pool, ctx.n_tokens, [&](int64_t b, int64_t e) {
    kernels::RmsNorm(tmp + b * d, weight, tmp + b * d, e - b, d, ctx.config->rms_eps);
  });
}

}  // namespace

bool FuseInputsByDefault() {
  static const bool on = [] {
    const char* v = std::getenv("TACHYON_FUSE");
    return v == nullptr || std::string(v) != "0";
  }();
  return on;
}

Status LoadAttention(TensorSource& src, const ModelConfig& c, int64_t il, LayerWeights* w) {
  ASSIGN_OR_RETURN(w->attn_norm, src.Vector(Blk(il, "attn_norm"), c.n_embd));
  ASSIGN_OR_RETURN(w->wq, src.Matrix(Blk(il, "attn_q"), c.n_embd, c.q_dim()));
  ASSIGN_OR_RETURN(w->wk, src.Matrix(Blk(il, "attn_k"), c.n_embd, c.kv_dim()));
  ASSIGN_OR_RETURN(w->wv, src.Matrix(Blk(il, "attn_v"), c.n_embd, c.kv_dim()));
  ASSIGN_OR_RETURN(w->wo, src.Matrix(Blk(il, "attn_output"), c.q_dim(), c.n_embd));
  if (c.qkv_bias) {
    ASSIGN_OR_RETURN(w->bq, src.Vector(BlkBias(il, "attn_q"), c.q_dim()));
    ASSIGN_OR_RETURN(w->bk, src.Vector(BlkBias(il, "attn_k"), c.kv_dim()));
    ASSIGN_OR_RETURN(w->bv, src.Vector(BlkBias(il, "attn_v"), c.kv_dim()));
  } else {
    // Some llama-family conversions carry biases anyway; use them when present.
    ASSIGN_OR_RETURN(w->bq, src.OptionalVector(BlkBias(il, "attn_q"), c.q_dim()));
    ASSIGN_OR_RETURN(w->bk, src.OptionalVector(BlkBias(il, "attn_k"), c.kv_dim()));
    ASSIGN_OR_RETURN(w->bv, src.OptionalVector(BlkBias(il, "attn_v"), c.kv_dim()));
  }
  if (c.qk_norm) {
    ASSIGN_OR_RETURN(w->q_norm, src.Vector(Blk(il, "attn_q_norm"), c.head_dim));
    ASSIGN_OR_RETURN(w->k_norm, src.Vector(Blk(il, "attn_k_norm"), c.head_dim));
  }
  if (c.post_norms) {
    ASSIGN_OR_RETURN(w->post_attn_norm, src.Vector(Blk(il, "post_attention_norm"), c.n_embd));
  }
  return OkStatus();
}

Status LoadDenseFfn(TensorSource& src, const ModelConfig& c, int64_t il, LayerWeights* w) {
  if (c.n_ff <= 0) {
    return InvalidArgument("missing metadata key " + c.arch + ".feed_forward_length");
  }
  ASSIGN_OR_RETURN(w->ffn_norm, src.Vector(Blk(il, "ffn_norm"), c.n_embd));
  ASSIGN_OR_RETURN(w->w_gate, src.Matrix(Blk(il, "ffn_gate"), c.n_embd, c.n_ff));
  ASSIGN_OR_RETURN(w->w_up, src.Matrix(Blk(il, "ffn_up"), c.n_embd, c.n_ff));
  ASSIGN_OR_RETURN(w->w_down, src.Matrix(Blk(il, "ffn_down"), c.n_ff, c.n_embd));
  if (c.post_norms) {
    ASSIGN_OR_RETURN(w->post_ffn_norm, src.Vector(Blk(il, "post_ffw_norm"), c.n_embd));
  }
  return OkStatus();
}

Status LoadMoeFfn(TensorSource& src, const ModelConfig& c, int64_t il, LayerWeights* w) {
  ASSIGN_OR_RETURN(w->ffn_norm, src.Vector(Blk(il, "ffn_norm"), c.n_embd));
  ASSIGN_OR_RETURN(w->router, src.Matrix(Blk(il, "ffn_gate_inp"), c.n_embd, c.n_experts));
  ASSIGN_OR_RETURN(w->experts_gate,
                   src.Experts(Blk(il, "ffn_gate_exps"), c.n_embd, c.n_ff_expert, c.n_experts));
  ASSIGN_OR_RETURN(w->experts_up,
                   src.Experts(Blk(il, "ffn_up_exps"), c.n_embd, c.n_ff_expert, c.n_experts));
  ASSIGN_OR_RETURN(w->experts_down,
                   src.Experts(Blk(il, "ffn_down_exps"), c.n_ff_expert, c.n_embd, c.n_experts));
  return OkStatus();
}

void Scratch::Reserve(const ModelConfig& c, int64_t n) {
  const size_t nn = static_cast<size_t>(n);
  Grow(x, nn * c.n_embd);
  Grow(xn, nn * c.n_embd);
  Grow(q, nn * c.q_dim());
  Grow(k, nn * c.kv_dim());
  Grow(v, nn * c.kv_dim());
  Grow(attn, nn * c.q_dim());
  Grow(tmp, nn * c.n_embd);
  const size_t ff = static_cast<size_t>(std::max(c.n_ff, c.n_ff_expert));
  Grow(gate, nn * ff);
  Grow(up, nn * ff);
  if (c.n_experts > 0) {
    Grow(router, nn * c.n_experts);
    Grow(expert_ids, nn * c.n_experts_used);
    Grow(expert_wts, nn * c.n_experts_used);
    Grow(rows, nn);
    Grow(rows_w, nn);
    Grow(ex_in, nn * c.n_embd);
    Grow(ex_out, nn * c.n_embd);
  }
}

void AttentionBlock(StepContext& ctx, const LayerWeights& w, int64_t il) {
  const ModelConfig& c = *ctx.config;
  Scratch& s = *ctx.s;
  const int64_t n = ctx.n_tokens, hd = c.head_dim;
  {  // one activation pass and one parallel pass for the three projections
    const kernels::Weight* ws[] = {&w.wq, &w.wk, &w.wv};
    float* ys[] = {s.q.data(), s.k.data(), s.v.data()};
    NormedMatMul(ctx, w.attn_norm, ws, ys, OpKind::kMatMulQkv);
  }
  {
    OpTimer t(ctx.prof, OpKind::kMatMulQkv);
    if (w.bq) AddBiasRows(s.q.data(), w.bq, n, c.q_dim());
    if (w.bk) AddBiasRows(s.k.data(), w.bk, n, c.kv_dim());
    if (w.bv) AddBiasRows(s.v.data(), w.bv, n, c.kv_dim());
    if (w.q_norm) kernels::RmsNorm(s.q.data(), w.q_norm, s.q.data(), n * c.n_heads, hd, c.rms_eps);
    if (w.k_norm) {
      kernels::RmsNorm(s.k.data(), w.k_norm, s.k.data(), n * c.n_kv_heads, hd, c.rms_eps);
    }
  }
  const int64_t kv_dim = c.kv_dim();
  {
    OpTimer t(ctx.prof, OpKind::kRope);
    const int64_t rd = c.rot_dim;
    const bool swa_rope = !c.rope_inv_freq_swa.empty();
    if (il == 0) {  // the cos/sin pairs of every token, shared by all layers of the step
      Grow(ctx.rope_cs, static_cast<size_t>(n * rd));
      if (swa_rope) Grow(ctx.rope_cs_swa, static_cast<size_t>(n * rd));
      ForRows(ctx.pool, n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          kernels::RopeCosSin(ctx.positions[i], rd, c.rope_inv_freq.data(),
                              ctx.rope_cs.data() + i * rd);
          if (swa_rope) {
            kernels::RopeCosSin(ctx.positions[i], rd, c.rope_inv_freq_swa.data(),
                                ctx.rope_cs_swa.data() + i * rd);
          }
        }
      });
    }
    const float* cs =
        swa_rope && c.IsSlidingLayer(il) ? ctx.rope_cs_swa.data() : ctx.rope_cs.data();
    ForRows(ctx.pool, n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        kernels::RopeQkCached(s.q.data() + i * c.q_dim(), c.n_heads, s.k.data() + i * kv_dim,
                              c.n_kv_heads, hd, rd, cs + i * rd, c.rope_style);
      }
    });
  }
  {
    OpTimer t(ctx.prof, OpKind::kAttention);
    const int64_t group = ctx.kv->layout().layer_group[il];
    const int64_t* slot = ctx.kv_slot.data() + group * n;
    ForRows(ctx.pool, n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {  // distinct slots: safe to store concurrently
        ctx.kv->Store(il, slot[i], s.k.data() + i * kv_dim, s.v.data() + i * kv_dim);
      }
    });
    for (const StepContext::SlotCopy& cp : ctx.copies) ctx.kv->CopySlots(il, cp.src, cp.dst, cp.n);
    kernels::AttentionParams params;
    params.n_heads = c.n_heads;
    params.scale = c.attn_scale > 0 ? c.attn_scale : 1.0f / std::sqrt(static_cast<float>(hd));
    params.sliding_window = c.IsSlidingLayer(il) ? c.sliding_window : 0;
    kernels::PagedAttention(ctx.kv->View(il), params, ctx.seqs.data() + group * ctx.n_seqs,
                            ctx.n_seqs, ctx.pool, ctx.attn_scratch);
  }
  {
    OpTimer t(ctx.prof, OpKind::kMatMulO);
    kernels::MatMul(w.wo, s.attn.data(), n, s.tmp.data(), ctx.pool, ctx.n_decode_rows);
  }
  PostNorm(ctx, w.post_attn_norm);
  ctx.pending_residual = true;  // x += tmp happens inside the FFN norm
}

void FinishLayers(StepContext& ctx) {
  if (!ctx.pending_residual) return;
  OpTimer t(ctx.prof, OpKind::kOther);
  kernels::AddInPlace(ctx.s->x.data(), ctx.s->tmp.data(), ctx.n_tokens * ctx.config->n_embd);
  ctx.pending_residual = false;
}

namespace {

void DenseFfn(StepContext& ctx, const LayerWeights& w) {
  const ModelConfig& c = *ctx.config;
  Scratch& s = *ctx.s;
  const int64_t n = ctx.n_tokens;
  {
    const kernels::Weight* ws[] = {&w.w_gate, &w.w_up};
    float* ys[] = {s.gate.data(), s.up.data()};
    NormedMatMul(ctx, w.ffn_norm, ws, ys, OpKind::kFfnMatMul);
  }
  const int64_t ff = c.n_ff;
  if (ctx.fuse_inputs) {  // act(gate) * up computed row by row inside the down matmul
    OpTimer t(ctx.prof, OpKind::kFfnMatMul);
    const kernels::Weight* ws[] = {&w.w_down};
    float* ys[] = {s.tmp.data()};
    kernels::MatMulMultiRows(ws, kernels::GatedMulRows(s.gate.data(), s.up.data(), ff, c.ffn_act),
                             n, ys, ctx.pool, ctx.n_decode_rows);
  } else {
    {
      OpTimer t(ctx.prof, OpKind::kActivation);
      ForRows(ctx.pool, n, [&](int64_t b, int64_t e) {
        kernels::GatedMul(c.ffn_act, s.gate.data() + b * ff, s.up.data() + b * ff,
                          s.gate.data() + b * ff, (e - b) * ff);
      });
    }
    OpTimer t(ctx.prof, OpKind::kFfnMatMul);
    kernels::MatMul(w.w_down, s.gate.data(), n, s.tmp.data(), ctx.pool, ctx.n_decode_rows);
  }
  PostNorm(ctx, w.post_ffn_norm);
  ctx.pending_residual = true;  // x += tmp happens inside the next norm
}

// Softmax over all experts, top-k (ties to the lower id), optional renormalisation.
void Route(const ModelConfig& c, float* logits, int32_t* ids, float* wts) {
  kernels::Softmax(logits, c.n_experts);
  for (int64_t j = 0; j < c.n_experts_used; ++j) {
    int32_t best = -1;
    for (int32_t e = 0; e < c.n_experts; ++e) {
      if (std::find(ids, ids + j, e) != ids + j) continue;
      if (best < 0 || logits[e] > logits[best]) best = e;
    }
    ids[j] = best;
    wts[j] = logits[best];
  }
  if (c.moe_norm_topk) {
    float sum = 0;
    for (int64_t j = 0; j < c.n_experts_used; ++j) sum += wts[j];
    sum = std::max(sum, 6.103515625e-5f);
    for (int64_t j = 0; j < c.n_experts_used; ++j) wts[j] /= sum;
  }
}

void MoeFfn(StepContext& ctx, const LayerWeights& w) {
  const ModelConfig& c = *ctx.config;
  Scratch& s = *ctx.s;
  const int64_t n = ctx.n_tokens, k = c.n_experts_used, d = c.n_embd;
  OpTimer t(ctx.prof, OpKind::kFfnMatMul);  // the whole MoE FFN (router, experts, mixing)
  kernels::MatMul(w.router, s.xn.data(), n, s.router.data(), ctx.pool, ctx.n_decode_rows);
  for (int64_t i = 0; i < n; ++i) {
    Route(c, s.router.data() + i * c.n_experts, s.expert_ids.data() + i * k,
          s.expert_wts.data() + i * k);
  }
  for (int32_t e = 0; e < c.n_experts; ++e) {
    int64_t cnt = 0, cnt_decode = 0;  // rows gathered in step order: decode rows first
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < k; ++j) {
        if (s.expert_ids[i * k + j] != e) continue;
        s.rows[cnt] = static_cast<int32_t>(i);
        cnt_decode += i < ctx.n_decode_rows;
        s.rows_w[cnt] = s.expert_wts[i * k + j];
        std::memcpy(s.ex_in.data() + cnt * d, s.xn.data() + i * d, d * sizeof(float));
        ++cnt;
      }
    }
    if (cnt == 0) continue;
    kernels::MatMul(ExpertSlice(w.experts_gate, e), s.ex_in.data(), cnt, s.gate.data(), ctx.pool,
                    cnt_decode);
    kernels::MatMul(ExpertSlice(w.experts_up, e), s.ex_in.data(), cnt, s.up.data(), ctx.pool,
                    cnt_decode);
    kernels::SiluMul(s.gate.data(), s.up.data(), s.gate.data(), cnt * c.n_ff_expert);
    kernels::MatMul(ExpertSlice(w.experts_down, e), s.gate.data(), cnt, s.ex_out.data(), ctx.pool,
                    cnt_decode);
    for (int64_t r = 0; r < cnt; ++r) {
      float* dst = s.x.data() + s.rows[r] * d;
      const float* src = s.ex_out.data() + r * d;
      const float wt = s.rows_w[r];
      for (int64_t j = 0; j < d; ++j) dst[j] += wt * src[j];
    }
  }
}

}  // namespace

void FfnBlock(StepContext& ctx, const LayerWeights& w) {
  if (w.is_moe()) {
    NormInput(ctx, w.ffn_norm);  // the experts gather rows of xn
    MoeFfn(ctx, w);
  } else {
    DenseFfn(ctx, w);
  }
}

}  // namespace tachyon::model
