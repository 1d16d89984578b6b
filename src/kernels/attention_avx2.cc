// Paged attention, AVX2 + FMA + F16C variant (compiled with AVX2 flags; called only after
// run-time dispatch): the tile kernel of attention_tile.h over AVX2 row ops, and the KV row
// conversions.
#include "kernels/ops_avx2.h"

#include <cmath>

#include "kernels/attention_tile.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"

namespace tachyon::kernels {
namespace {

using internal::HMax;
using internal::HSum;

struct Avx2Isa {
  static const float* LoadRow(KvDtype dtype, const uint8_t* src, float* buf, int64_t n) {
    switch (dtype) {
      case KvDtype::kF32:
        return reinterpret_cast<const float*>(src);
      case KvDtype::kF16: {
        const auto* h = reinterpret_cast<const uint16_t*>(src);
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) {
          _mm256_storeu_ps(
              buf + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
        }
        for (; i < n; ++i) buf[i] = Fp16ToF32(h[i]);
        return buf;
      }
      case KvDtype::kBf16: {
        const auto* h = reinterpret_cast<const uint16_t*>(src);
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) {
          const __m256i w =
              _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i)));
          _mm256_storeu_ps(buf + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
        }
        for (; i < n; ++i) buf[i] = Bf16ToF32(h[i]);
        return buf;
      }
      case KvDtype::kQ8_0: {
        const auto* b = reinterpret_cast<const BlockQ8_0*>(src);
        for (int64_t i = 0; i < n / kQK4; ++i) {
          const __m256 d = _mm256_set1_ps(Fp16ToF32(b[i].d));
          for (int c = 0; c < 4; ++c) {
            const __m128i q8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[i].qs + 8 * c));
            const __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8));
            _mm256_storeu_ps(buf + i * kQK4 + 8 * c, _mm256_mul_ps(f, d));
          }
        }
        return buf;
      }
    }
    return buf;
  }

  static float Dot(const float* a, const float* b, int64_t n) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
      acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    }
    for (; i + 8 <= n; i += 8) {
      acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    }
    float sum = HSum(_mm256_add_ps(acc0, acc1));
    for (; i < n; ++i) sum += a[i] * b[i];
    return sum;
  }

  static void Scores(const float* q, const float* const* rows, int64_t n_rows, int64_t hd,
                     float scale, float* s) {
    for (int64_t j = 0; j < n_rows; ++j) s[j] = Dot(q, rows[j], hd) * scale;
  }

  static void Scores2(const float* q0, const float* q1, const float* const* rows, int64_t n_rows,
                      int64_t hd, float scale, float* s0, float* s1) {
    Scores(q0, rows, n_rows, hd, scale, s0);
    Scores(q1, rows, n_rows, hd, scale, s1);
  }
  static float Max(const float* s, int64_t n) {
    __m256 mx = _mm256_set1_ps(s[0]);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(s + i));
    float r = HMax(mx);
    for (; i < n; ++i) r = std::max(r, s[i]);
    return r;
  }
  static float ExpSub(float* s, int64_t n, float m) {
    const __m256 vm = _mm256_set1_ps(m);
    __m256 sum = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m256 e = internal::Exp(_mm256_sub_ps(_mm256_loadu_ps(s + i), vm));
      _mm256_storeu_ps(s + i, e);
      sum = _mm256_add_ps(sum, e);
    }
    float total = HSum(sum);
    for (; i < n; ++i) total += (s[i] = std::exp(s[i] - m));
    return total;
  }

  static void Scale(float* y, float a, int64_t n) {
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), va));
    for (; i < n; ++i) y[i] *= a;
  }

  // 32 output floats at a time stay in four registers across all rows; scalar tail.
  static void Accumulate(const float* p, const float* const* rows, int64_t n_rows, float* acc,
                         int64_t hd) {
    int64_t d = 0;
    for (; d + 32 <= hd; d += 32) {
      __m256 a0 = _mm256_loadu_ps(acc + d), a1 = _mm256_loadu_ps(acc + d + 8),
             a2 = _mm256_loadu_ps(acc + d + 16), a3 = _mm256_loadu_ps(acc + d + 24);
      for (int64_t j = 0; j < n_rows; ++j) {
        const __m256 w = _mm256_set1_ps(p[j]);
        const float* r = rows[j] + d;
        a0 = _mm256_fmadd_ps(w, _mm256_loadu_ps(r), a0);
        a1 = _mm256_fmadd_ps(w, _mm256_loadu_ps(r + 8), a1);
        a2 = _mm256_fmadd_ps(w, _mm256_loadu_ps(r + 16), a2);
        a3 = _mm256_fmadd_ps(w, _mm256_loadu_ps(r + 24), a3);
      }
      _mm256_storeu_ps(acc + d, a0);
      _mm256_storeu_ps(acc + d + 8, a1);
      _mm256_storeu_ps(acc + d + 16, a2);
      _mm256_storeu_ps(acc + d + 24, a3);
    }
    for (; d + 8 <= hd; d += 8) {
      __m256 a = _mm256_loadu_ps(acc + d);
      for (int64_t j = 0; j < n_rows; ++j) {
        a = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), _mm256_loadu_ps(rows[j] + d), a);
      }
      _mm256_storeu_ps(acc + d, a);
    }
    for (; d < hd; ++d) {
      float a = acc[d];
      for (int64_t j = 0; j < n_rows; ++j) a += p[j] * rows[j][d];
      acc[d] = a;
    }
  }
};

}  // namespace

void AttendTileAvx2(const PagedKv& kv, const TileJob& job, const TileParams& p, float* scratch) {
  internal::AttendTileImpl<Avx2Isa>(kv, job, p, scratch);
}

namespace internal {

// F16 through F16C (round to nearest even, like F32ToFp16); the others as the reference.
void StoreKvRowAvx2(KvDtype dtype, const float* x, void* dst, int64_t n) {
  if (dtype != KvDtype::kF16) return StoreKvRowReference(dtype, x, dst, n);
  auto* h = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i v =
        _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i), v);
  }
  for (; i < n; ++i) h[i] = F32ToFp16(x[i]);
}

}  // namespace internal
}  // namespace tachyon::kernels
