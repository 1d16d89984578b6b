// AVX-512 row-wise ops (compiled with AVX-512 flags; called only after dispatch).
#include "kernels/ops_avx512.h"  // first: see simd_avx512.h

#include <cmath>

#include "kernels/ops_internal.h"

namespace tachyon::kernels::internal {
namespace {

__mmask16 TailMask(int64_t n) {
  return static_cast<__mmask16>((1u << n) - 1u);
}

float SumSquares(const float* x, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16);
    a0 = _mm512_fmadd_ps(v0, v0, a0);
    a1 = _mm512_fmadd_ps(v1, v1, a1);
  }
  for (; i < n; i += 16) {
    const __m512 v = _mm512_maskz_loadu_ps(TailMask(n - i < 16 ? n - i : 16), x + i);
    a0 = _mm512_fmadd_ps(v, v, a0);
  }
  return HAdd(_mm512_add_ps(a0, a1));
}

void RmsNorm512(const float* x, const float* weight, float* out, int64_t m, int64_t n, float eps) {
  for (int64_t r = 0; r < m; ++r) {
    const float* xr = x + r * n;
    float* o = out + r * n;
    const __m512 sc =
        _mm512_set1_ps(1.0f / std::sqrt(SumSquares(xr, n) / static_cast<float>(n) + eps));
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 k = TailMask(n - i < 16 ? n - i : 16);
      const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, xr + i), sc);
      _mm512_mask_storeu_ps(o + i, k, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(k, weight + i)));
    }
  }
}

// x += delta and the sum of squares in one pass; then the scaled product.
void AddRmsNorm512(float* x, const float* delta, const float* weight, float* out, int64_t m,
                   int64_t n, float eps) {
  for (int64_t r = 0; r < m; ++r) {
    float* xr = x + r * n;
    const float* dr = delta + r * n;
    float* o = out + r * n;
    __m512 a0 = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 k = TailMask(n - i < 16 ? n - i : 16);
      const __m512 v =
          _mm512_add_ps(_mm512_maskz_loadu_ps(k, xr + i), _mm512_maskz_loadu_ps(k, dr + i));
      _mm512_mask_storeu_ps(xr + i, k, v);
      a0 = _mm512_fmadd_ps(v, v, a0);
    }
    const __m512 sc = _mm512_set1_ps(1.0f / std::sqrt(HAdd(a0) / static_cast<float>(n) + eps));
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 k = TailMask(n - i < 16 ? n - i : 16);
      const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, xr + i), sc);
      _mm512_mask_storeu_ps(o + i, k, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(k, weight + i)));
    }
  }
}

void SiluMul512(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = TailMask(n - i < 16 ? n - i : 16);
    const __m512 g = _mm512_maskz_loadu_ps(k, gate + i);
    const __m512 u = _mm512_maskz_loadu_ps(k, up + i);
    const __m512 e = Exp(_mm512_sub_ps(_mm512_setzero_ps(), g));
    const __m512 s = _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    _mm512_mask_storeu_ps(out + i, k, _mm512_mul_ps(s, u));
  }
}

void GeluTanhMul512(const float* gate, const float* up, float* out, int64_t n) {
  const __m512 c2 = _mm512_set1_ps(kGeluTwoSqrt2OverPi), c3 = _mm512_set1_ps(kGeluCubic);
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = TailMask(n - i < 16 ? n - i : 16);
    const __m512 g = _mm512_maskz_loadu_ps(k, gate + i);
    const __m512 u = _mm512_maskz_loadu_ps(k, up + i);
    const __m512 g2 = _mm512_mul_ps(g, g);
    const __m512 t = _mm512_mul_ps(_mm512_mul_ps(c2, g), _mm512_fmadd_ps(c3, g2, one));  // 2u
    const __m512 e = Exp(_mm512_sub_ps(_mm512_setzero_ps(), t));
    const __m512 s = _mm512_div_ps(g, _mm512_add_ps(one, e));
    _mm512_mask_storeu_ps(out + i, k, _mm512_mul_ps(s, u));
  }
}

void Softmax512(float* x, int64_t n) {
  if (n <= 0) return;
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = TailMask(n - i < 16 ? n - i : 16);
    mx = _mm512_mask_max_ps(mx, k, mx, _mm512_maskz_loadu_ps(k, x + i));
  }
  const __m512 m = _mm512_set1_ps(HMax(mx));
  __m512 sum = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = TailMask(n - i < 16 ? n - i : 16);
    const __m512 e = Exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), m));
    _mm512_mask_storeu_ps(x + i, k, e);
    sum = _mm512_mask_add_ps(sum, k, sum, e);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / HAdd(sum));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = TailMask(n - i < 16 ? n - i : 16);
    _mm512_mask_storeu_ps(x + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), inv));
  }
}

void Add512(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = TailMask(n - i < 16 ? n - i : 16);
    _mm512_mask_storeu_ps(
        y + i, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, y + i), _mm512_maskz_loadu_ps(k, x + i)));
  }
}

float Dot512(const float* x, const float* y, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), a0);
    a1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(y + i + 16), a1);
  }
  for (; i < n; i += 16) {
    const __mmask16 k = TailMask(n - i < 16 ? n - i : 16);
    a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, x + i), _mm512_maskz_loadu_ps(k, y + i), a0);
  }
  return HAdd(_mm512_add_ps(a0, a1));
}

// RoPE rotation, 16 floats at a time. NEOX: the pair (i, i + half) lies in two separate runs,
// so a chunk of 16 i rotates with cos / sin as they are stored. Adjacent pairs (2i, 2i + 1):
// a chunk of x holds 8 pairs; cos and sin are widened to (c_i, c_i) / (s_i, s_i) by a
// permute, and fmaddsub(x, c, swap(x) * s) gives x0 c - x1 s in the even lanes and
// x1 c + x0 s in the odd ones.
void RopeRotate512(float* x, int64_t n_heads, int64_t head_dim, int64_t half, const float* cs,
                   RopeStyle style) {
  const float* sn = cs + half;
  const __m512i dup = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  for (int64_t h = 0; h < n_heads; ++h) {
    float* xh = x + h * head_dim;
    if (style == RopeStyle::kNeox) {
      for (int64_t i = 0; i < half; i += 16) {
        const __mmask16 k = TailMask(half - i < 16 ? half - i : 16);
        const __m512 c = _mm512_maskz_loadu_ps(k, cs + i), s = _mm512_maskz_loadu_ps(k, sn + i);
        const __m512 x0 = _mm512_maskz_loadu_ps(k, xh + i);
        const __m512 x1 = _mm512_maskz_loadu_ps(k, xh + half + i);
        _mm512_mask_storeu_ps(xh + i, k, _mm512_fmsub_ps(x0, c, _mm512_mul_ps(x1, s)));
        _mm512_mask_storeu_ps(xh + half + i, k, _mm512_fmadd_ps(x0, s, _mm512_mul_ps(x1, c)));
      }
    } else {
      for (int64_t i = 0; i < half; i += 8) {  // pairs i .. i + 7: floats 2i .. 2i + 15
        const int64_t np = half - i < 8 ? half - i : 8;
        const __mmask16 kp = TailMask(np), kx = TailMask(2 * np);
        const __m512 c = _mm512_permutexvar_ps(dup, _mm512_maskz_loadu_ps(kp, cs + i));
        const __m512 s = _mm512_permutexvar_ps(dup, _mm512_maskz_loadu_ps(kp, sn + i));
        const __m512 v = _mm512_maskz_loadu_ps(kx, xh + 2 * i);
        const __m512 swapped = _mm512_permute_ps(v, 0xB1);  // (x1, x0) per pair
        _mm512_mask_storeu_ps(xh + 2 * i, kx,
                              _mm512_fmaddsub_ps(v, c, _mm512_mul_ps(swapped, s)));
      }
    }
  }
}

}  // namespace

const OpsTable& OpsAvx512() {
  static const OpsTable t{RmsNorm512, SiluMul512,    Softmax512,    Add512,
                          Dot512,     AddRmsNorm512, RopeRotate512, GeluTanhMul512};
  return t;
}

}  // namespace tachyon::kernels::internal
