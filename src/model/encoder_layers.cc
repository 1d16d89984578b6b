#include "model/encoder_layers.h"

#include <cmath>

#include "kernels/encoder_ops.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace tachyon::model {

namespace {

template <typename Fn>
void Rows(ThreadPool* pool, int64_t n, const Fn& fn) {
  if (pool != nullptr && pool->num_threads() > 1 && n >= 8) {
    pool->ParallelFor(n, fn, 4);
  } else {
    fn(0, n);
  }
}

void AddBias(ThreadPool* pool, float* x, const float* bias, int64_t n, int64_t dim) {
  if (bias == nullptr) return;
  Rows(pool, n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) kernels::AddInPlace(x + i * dim, bias, dim);
  });
}

// x = LayerNorm(x + y) row by row.
void AddNorm(ThreadPool* pool, float* x, const float* y, const float* weight, const float* bias,
             int64_t n, int64_t d, float eps) {
  Rows(pool, n, [&](int64_t b, int64_t e) {
    kernels::AddInPlace(x + b * d, y + b * d, (e - b) * d);
    kernels::LayerNorm(x + b * d, weight, bias, x + b * d, e - b, d, eps);
  });
}

}  // namespace

void EncoderEmbed(StepContext& ctx, const ModelWeights& w, const Batch& batch,
                  const std::vector<int32_t>& types) {
  const ModelConfig& c = *ctx.config;
  const int64_t d = c.n_embd;
  float* x = ctx.s->x.data();
  float* tmp = ctx.s->tmp.data();
  Rows(ctx.pool, ctx.n_tokens, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      auto row = [&](const kernels::Weight& t, int64_t r, float* out) {
        kernels::DequantizeRow(t.type, static_cast<const uint8_t*>(t.data) + r * t.row_bytes, out,
                               d);
      };
      row(w.token_embd, batch.tokens[i], x + i * d);
      row(w.position_embd, ctx.positions[i], tmp + i * d);
      kernels::AddInPlace(x + i * d, tmp + i * d, d);
      if (w.token_types.data != nullptr) {
        row(w.token_types, types.empty() ? 0 : types[i], tmp + i * d);
        kernels::AddInPlace(x + i * d, tmp + i * d, d);
      }
      kernels::LayerNorm(x + i * d, w.embd_norm, w.embd_norm_b, x + i * d, 1, d, c.rms_eps);
    }
  });
}

std::vector<kernels::AttentionSeq> BidirectionalSeqs(const StepContext& ctx) {
  const int64_t qd = ctx.config->q_dim();
  std::vector<kernels::AttentionSeq> out;
  out.reserve(static_cast<size_t>(ctx.n_tokens));
  for (const kernels::AttentionSeq& sq : ctx.seqs) {
    const int64_t first = (sq.q - ctx.s->q.data()) / qd;
    for (int64_t j = 0; j < sq.n_tokens; ++j) {
      kernels::AttentionSeq one;
      one.block_table = sq.block_table;
      one.pos_start = sq.pos_start + sq.n_tokens - 1;
      one.n_tokens = 1;
      one.q = ctx.s->q.data() + (first + j) * qd;
      one.out = ctx.s->attn.data() + (first + j) * qd;
      out.push_back(one);
    }
  }
  return out;
}

void EncoderLayer(StepContext& ctx, const LayerWeights& w, int64_t il,
                  const std::vector<kernels::AttentionSeq>& bidir) {
  const ModelConfig& c = *ctx.config;
  Scratch& s = *ctx.s;
  const int64_t n = ctx.n_tokens, d = c.n_embd, kv_dim = c.kv_dim();
  {
    OpTimer t(ctx.prof, OpKind::kMatMulQkv);
    const kernels::Weight* ws[] = {&w.wq, &w.wk, &w.wv};
    float* ys[] = {s.q.data(), s.k.data(), s.v.data()};
    kernels::MatMulMulti(ws, s.x.data(), n, ys, ctx.pool);
    AddBias(ctx.pool, s.q.data(), w.bq, n, c.q_dim());
    AddBias(ctx.pool, s.k.data(), w.bk, n, kv_dim);
    AddBias(ctx.pool, s.v.data(), w.bv, n, kv_dim);
  }
  {
    OpTimer t(ctx.prof, OpKind::kAttention);
    Rows(ctx.pool, n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        ctx.kv->Store(il, ctx.kv_slot[i], s.k.data() + i * kv_dim, s.v.data() + i * kv_dim);
      }
    });
    kernels::AttentionParams params;
    params.n_heads = c.n_heads;
    params.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    kernels::PagedAttention(ctx.kv->View(il), params, bidir.data(),
                            static_cast<int64_t>(bidir.size()), ctx.pool, ctx.attn_scratch);
  }
  {
    OpTimer t(ctx.prof, OpKind::kMatMulO);
    kernels::MatMul(w.wo, s.attn.data(), n, s.tmp.data(), ctx.pool);
    AddBias(ctx.pool, s.tmp.data(), w.bo, n, d);
    AddNorm(ctx.pool, s.x.data(), s.tmp.data(), w.attn_out_norm, w.attn_out_norm_b, n, d,
            c.rms_eps);
  }
  OpTimer t(ctx.prof, OpKind::kFfnMatMul);
  const int64_t ff = c.n_ff;
  kernels::MatMul(w.w_up, s.x.data(), n, s.gate.data(), ctx.pool);
  Rows(ctx.pool, n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float* g = s.gate.data() + i * ff;
      kernels::AddInPlace(g, w.b_up, ff);
      kernels::GeluErf(g, g, ff);
    }
  });
  kernels::MatMul(w.w_down, s.gate.data(), n, s.tmp.data(), ctx.pool);
  AddBias(ctx.pool, s.tmp.data(), w.b_down, n, d);
  AddNorm(ctx.pool, s.x.data(), s.tmp.data(), w.out_norm, w.out_norm_b, n, d, c.rms_eps);
}

}  // namespace tachyon::model
