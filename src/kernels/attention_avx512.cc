// Paged attention, AVX-512 variant (compiled with -mavx512f...; called only after run-time
// dispatch). Tails use masked loads, so any head_dim works.
// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own _mm256_undefined_pd().
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
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

inline __mmask16 TailMask(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }

inline float DotAvx512(const float* a, const float* b, int64_t n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
  }
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
  }
  if (i < n) {
    const __mmask16 m = TailMask(n - i);
    acc1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc1);
  }
  const __m512 acc = _mm512_add_ps(acc0, acc1);
  __m256 h = _mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1));
  __m128 l = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  l = _mm_add_ps(l, _mm_movehl_ps(l, l));
  l = _mm_add_ss(l, _mm_movehdup_ps(l));
  return _mm_cvtss_f32(l);
}

inline void AxpyAvx512(float w, const float* x, float* y, int64_t n) {
  const __m512 vw = _mm512_set1_ps(w);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(vw, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
  }
  if (i < n) {
    const __mmask16 m = TailMask(n - i);
    const __m512 r = _mm512_fmadd_ps(vw, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i));
    _mm512_mask_storeu_ps(y + i, m, r);
  }
}

}  // namespace

void AttendGroupAvx512(const PagedKv& kv, const GroupJob& job, int64_t n_group, float scale,
                       float* scores) {
  const int64_t n_ctx = job.ctx_end - job.ctx_begin;
  const int64_t hd = kv.head_dim;
  // Scores: each K row is read once for all heads of the group.
  for (int64_t t = 0; t < n_ctx; ++t) {
    const float* k = KvRow(kv.k, kv, job.block_table, job.ctx_begin + t, job.kv_head);
    for (int64_t g = 0; g < n_group; ++g) {
      scores[g * n_ctx + t] = DotAvx512(job.q + g * hd, k, hd) * scale;
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
    for (int64_t g = 0; g < n_group; ++g) {
      AxpyAvx512(scores[g * n_ctx + t], v, job.out + g * hd, hd);
    }
  }
}

}  // namespace tachyon::kernels
