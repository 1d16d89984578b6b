// Model::Pool: the forward pass of embedding and reranking models (see model.h).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/encoder_layers.h"
#include "model/model.h"

namespace tachyon::model {

namespace {

void L2Normalize(float* v, int64_t n) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += double(v[i]) * v[i];
  const float inv = static_cast<float>(1.0 / std::max(std::sqrt(ss), 1e-12));
  for (int64_t i = 0; i < n; ++i) v[i] *= inv;
}

}  // namespace

Status Model::Pool(const Batch& batch, PoolingType pooling, KvCache* kv, ThreadPool* pool,
                   PoolOutput* out) {
  const ModelConfig& c = config_;
  if (pooling == PoolingType::kNone) return InvalidArgument("Pool: no pooling type");
  if (pooling == PoolingType::kRank && weights_.cls_out.data == nullptr) {
    return InvalidArgument("Pool: rank pooling needs a classification head, which " + c.name +
                           " does not have");
  }
  for (const SequenceSlice& sq : batch.seqs) {
    if (sq.pos_start != 0) return InvalidArgument("Pool: every sequence must start at position 0");
    if (c.encoder && sq.n_tokens > c.n_ctx_train) {
      return InvalidArgument("Pool: a sequence of " + std::to_string(sq.n_tokens) +
                             " tokens exceeds the model's " + std::to_string(c.n_ctx_train) +
                             " positions");
    }
  }
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  if (!batch.token_types.empty()) {
    if (static_cast<int64_t>(batch.token_types.size()) != n) {
      return InvalidArgument("Pool: token_types must have one entry per token");
    }
    for (int32_t t : batch.token_types) {
      if (t < 0 || t >= std::max<int64_t>(c.n_token_types, 1)) {
        return InvalidArgument("Pool: token type " + std::to_string(t) + " is out of range");
      }
    }
  }
  RETURN_IF_ERROR(PrepareStep(batch, kv, &pool_logits_, /*decode_rows=*/false));
  ctx_.pool = pool;
  ctx_.prof = profiling_ ? &profile_ : nullptr;
  ctx_.pending_residual = false;
  const int64_t d = c.n_embd;
  float* x = scratch_.x.data();
  if (c.encoder) {
    EncoderEmbed(ctx_, weights_, batch, batch.token_types);
    const std::vector<kernels::AttentionSeq> bidir = BidirectionalSeqs(ctx_);
    for (int64_t il = 0; il < c.n_layers; ++il) EncoderLayer(ctx_, weights_.layers[il], il, bidir);
  } else {
    Embed(batch, pool);
    for (int64_t il = 0; il < c.n_layers; ++il) {
      AttentionBlock(ctx_, weights_.layers[il], il);
      FfnBlock(ctx_, weights_.layers[il]);
    }
    FinishLayers(ctx_);
    kernels::RmsNorm(x, weights_.output_norm, x, n, d, c.rms_eps);
  }
  const int64_t n_seqs = static_cast<int64_t>(batch.seqs.size());
  out->dim = pooling == PoolingType::kRank ? c.n_cls_out : d;
  out->values.assign(static_cast<size_t>(n_seqs * out->dim), 0.0f);
  std::vector<float> pooled(static_cast<size_t>(d)), hidden(static_cast<size_t>(d));
  for (int64_t si = 0; si < n_seqs; ++si) {
    const SequenceSlice& sq = batch.seqs[si];
    const float* first = x + sq.token_start * d;
    if (pooling == PoolingType::kMean) {
      std::vector<double> sum(static_cast<size_t>(d), 0.0);
      for (int64_t j = 0; j < sq.n_tokens; ++j) {
        for (int64_t k = 0; k < d; ++k) sum[k] += first[j * d + k];
      }
      for (int64_t k = 0; k < d; ++k) pooled[k] = static_cast<float>(sum[k] / sq.n_tokens);
    } else if (pooling == PoolingType::kLast) {
      std::memcpy(pooled.data(), first + (sq.n_tokens - 1) * d, d * sizeof(float));
    } else {  // kCls, kRank
      std::memcpy(pooled.data(), first, d * sizeof(float));
    }
    float* row = out->values.data() + si * out->dim;
    if (pooling == PoolingType::kRank) {
      kernels::MatMul(weights_.cls, pooled.data(), 1, hidden.data(), nullptr);
      for (int64_t k = 0; k < d; ++k) hidden[k] = std::tanh(hidden[k] + weights_.cls_b[k]);
      kernels::MatMul(weights_.cls_out, hidden.data(), 1, row, nullptr);
      for (int64_t k = 0; k < c.n_cls_out; ++k) row[k] += weights_.cls_out_b[k];
    } else {
      std::memcpy(row, pooled.data(), d * sizeof(float));
      if (c.normalize_embeddings) L2Normalize(row, d);
    }
  }
  return OkStatus();
}

}  // namespace tachyon::model
