// AVX2 + FMA row-wise ops (compiled with AVX2 flags; called only after dispatch).
#include "kernels/ops_avx2.h"

#include <cmath>
#include <cstring>

#include "kernels/ops_internal.h"

namespace tachyon::kernels::internal {
namespace {

void RmsNorm256(const float* x, const float* weight, float* out, int64_t m, int64_t n, float eps) {
  for (int64_t r = 0; r < m; ++r) {
    const float* xr = x + r * n;
    float* o = out + r * n;
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m256 v = _mm256_loadu_ps(xr + i);
      acc = _mm256_fmadd_ps(v, v, acc);
    }
    float ss = HSum(acc);
    for (; i < n; ++i) ss += xr[i] * xr[i];
    const float sc = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
    const __m256 vs = _mm256_set1_ps(sc);
    for (i = 0; i + 8 <= n; i += 8) {
      const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(xr + i), vs);
      _mm256_storeu_ps(o + i, _mm256_mul_ps(v, _mm256_loadu_ps(weight + i)));
    }
    for (; i < n; ++i) o[i] = xr[i] * sc * weight[i];
  }
}

// x += delta and the sum of squares in one pass; then the scaled product.
void AddRmsNorm256(float* x, const float* delta, const float* weight, float* out, int64_t m,
                   int64_t n, float eps) {
  for (int64_t r = 0; r < m; ++r) {
    float* xr = x + r * n;
    const float* dr = delta + r * n;
    float* o = out + r * n;
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m256 v = _mm256_add_ps(_mm256_loadu_ps(xr + i), _mm256_loadu_ps(dr + i));
      _mm256_storeu_ps(xr + i, v);
      acc = _mm256_fmadd_ps(v, v, acc);
    }
    float ss = HSum(acc);
    for (; i < n; ++i) {
      xr[i] += dr[i];
      ss += xr[i] * xr[i];
    }
    const float sc = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
    const __m256 vs = _mm256_set1_ps(sc);
    for (i = 0; i + 8 <= n; i += 8) {
      const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(xr + i), vs);
      _mm256_storeu_ps(o + i, _mm256_mul_ps(v, _mm256_loadu_ps(weight + i)));
    }
    for (; i < n; ++i) o[i] = xr[i] * sc * weight[i];
  }
}

// out[0, n) = f(gate) * up for an elementwise 8-wide F; the last n % 8 elements go through F
// too (zero-padded), so an element's result does not depend on its position in the call
// (GatedMulRows produces one row of a larger SiluMul / GeluTanhMul at a time).
template <typename F>
void GatedMul256(const float* gate, const float* up, float* out, int64_t n, const F& f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_mul_ps(f(_mm256_loadu_ps(gate + i)), _mm256_loadu_ps(up + i)));
  }
  if (i < n) {
    alignas(32) float g[8] = {}, u[8] = {}, o[8];
    const size_t rest = static_cast<size_t>(n - i) * sizeof(float);
    std::memcpy(g, gate + i, rest);
    std::memcpy(u, up + i, rest);
    _mm256_store_ps(o, _mm256_mul_ps(f(_mm256_load_ps(g)), _mm256_load_ps(u)));
    std::memcpy(out + i, o, rest);
  }
}

void SiluMul256(const float* gate, const float* up, float* out, int64_t n) {
  GatedMul256(gate, up, out, n, [](__m256 g) {
    const __m256 e = Exp(_mm256_sub_ps(_mm256_setzero_ps(), g));
    return _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1), e));
  });
}

void GeluTanhMul256(const float* gate, const float* up, float* out, int64_t n) {
  const __m256 c2 = _mm256_set1_ps(kGeluTwoSqrt2OverPi), c3 = _mm256_set1_ps(kGeluCubic);
  const __m256 one = _mm256_set1_ps(1);
  GatedMul256(gate, up, out, n, [&](__m256 g) {
    const __m256 g2 = _mm256_mul_ps(g, g);
    const __m256 t = _mm256_mul_ps(_mm256_mul_ps(c2, g), _mm256_fmadd_ps(c3, g2, one));  // 2u
    const __m256 e = Exp(_mm256_sub_ps(_mm256_setzero_ps(), t));
    return _mm256_div_ps(g, _mm256_add_ps(one, e));
  });
}

void Softmax256(float* x, int64_t n) {
  if (n <= 0) return;
  __m256 mx = _mm256_set1_ps(-INFINITY);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(x + i));
  float m = HMax(mx);
  for (; i < n; ++i) m = std::fmax(m, x[i]);
  const __m256 vm = _mm256_set1_ps(m);
  __m256 sum = _mm256_setzero_ps();
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 e = Exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    _mm256_storeu_ps(x + i, e);
    sum = _mm256_add_ps(sum, e);
  }
  float s = HSum(sum);
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    s += x[i];
  }
  const float inv = 1.0f / s;
  const __m256 vi = _mm256_set1_ps(inv);
  for (i = 0; i + 8 <= n; i += 8)
    _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vi));
  for (; i < n; ++i) x[i] *= inv;
}

void Add256(float* y, const float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
  }
  for (; i < n; ++i) y[i] += x[i];
}

float Dot256(const float* x, const float* y, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
  }
  for (; i + 8 <= n; i += 8)
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
  float s = HSum(_mm256_add_ps(a0, a1));
  for (; i < n; ++i) s += x[i] * y[i];
  return s;
}

}  // namespace

const OpsTable& OpsAvx2() {
  static const OpsTable t{RmsNorm256, SiluMul256,    Softmax256,       Add256,
                          Dot256,     AddRmsNorm256, RopeRotateScalar, GeluTanhMul256};
  return t;
}

}  // namespace tachyon::kernels::internal
