// Paged attention, AVX2 + FMA variant (compiled with -mavx2 -mfma; called only after
// run-time dispatch).
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/attention.h"

namespace tachyon::kernels {

namespace {

inline const float* KvRow(const float* base, const PagedKv& kv, const int32_t* block_table,
                          int64_t pos, int64_t kv_head) {
  const int64_t block = block_table[pos / kv.block_size];
  const int64_t slot = pos % kv.block_size;
  return base + ((block * kv.block_size + slot) * kv.n_kv_heads + kv_head) * kv.head_dim;
}

inline float HorizontalSum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  __m128 hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

inline float DotAvx2(const float* a, const float* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  }
  float sum = HorizontalSum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

inline void AxpyAvx2(float w, const float* x, float* y, int64_t n) {
  const __m256 vw = _mm256_set1_ps(w);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(vw, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] += w * x[i];
}

}  // namespace

void AttendGroupAvx2(const PagedKv& kv, const GroupJob& job, int64_t n_group, float scale,
                     float* scores) {
  const int64_t n_ctx = job.ctx_end - job.ctx_begin;
  const int64_t hd = kv.head_dim;
  // Scores: each K row is read once for all heads of the group.
  for (int64_t t = 0; t < n_ctx; ++t) {
    const float* k = KvRow(kv.k, kv, job.block_table, job.ctx_begin + t, job.kv_head);
    for (int64_t g = 0; g < n_group; ++g) {
      scores[g * n_ctx + t] = DotAvx2(job.q + g * hd, k, hd) * scale;
    }
  }
  for (int64_t g = 0; g < n_group; ++g) {
    float* s = scores + g * n_ctx;
    const float max_s = *std::max_element(s, s + n_ctx);
    float sum = 0;
    for (int64_t t = 0; t < n_ctx; ++t) {
      s[t] = std::exp(s[t] - max_s);
      sum += s[t];
    }
    const float inv = 1.0f / sum;
    for (int64_t t = 0; t < n_ctx; ++t) s[t] *= inv;
    std::fill(job.out + g * hd, job.out + (g + 1) * hd, 0.0f);
  }
  for (int64_t t = 0; t < n_ctx; ++t) {
    const float* v = KvRow(kv.v, kv, job.block_table, job.ctx_begin + t, job.kv_head);
    for (int64_t g = 0; g < n_group; ++g) AxpyAvx2(scores[g * n_ctx + t], v, job.out + g * hd, hd);
  }
}

}  // namespace tachyon::kernels
