// AVX2 + FMA encoder ops (compiled with AVX2 flags; called only after dispatch).
#include <cmath>

#include "kernels/encoder_ops.h"
#include "kernels/ops_avx2.h"

namespace tachyon::kernels::internal {
namespace {

void LayerNorm256(const float* x, const float* weight, const float* bias, float* out, int64_t m,
                  int64_t n, float eps) {
  for (int64_t r = 0; r < m; ++r) {
    const float* xr = x + r * n;
    float* o = out + r * n;
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) acc = _mm256_add_ps(acc, _mm256_loadu_ps(xr + i));
    float sum = HSum(acc);
    for (; i < n; ++i) sum += xr[i];
    const float mean = sum / static_cast<float>(n);
    const __m256 vm = _mm256_set1_ps(mean);
    acc = _mm256_setzero_ps();
    for (i = 0; i + 8 <= n; i += 8) {
      const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(xr + i), vm);
      acc = _mm256_fmadd_ps(d, d, acc);
    }
    float ss = HSum(acc);
    for (; i < n; ++i) ss += (xr[i] - mean) * (xr[i] - mean);
    const float sc = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
    const __m256 vs = _mm256_set1_ps(sc);
    for (i = 0; i + 8 <= n; i += 8) {
      const __m256 d = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + i), vm), vs);
      _mm256_storeu_ps(o + i,
                       _mm256_fmadd_ps(d, _mm256_loadu_ps(weight + i), _mm256_loadu_ps(bias + i)));
    }
    for (; i < n; ++i) o[i] = (xr[i] - mean) * sc * weight[i] + bias[i];
  }
}

// erf by Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7), odd in x.
__m256 Erf(__m256 x) {
  const __m256 sign = _mm256_and_ps(x, _mm256_set1_ps(-0.0f));
  const __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
  const __m256 t = _mm256_div_ps(
      _mm256_set1_ps(1.0f), _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), a, _mm256_set1_ps(1.0f)));
  __m256 p = _mm256_set1_ps(1.061405429f);
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.453152027f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.421413741f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.284496736f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.254829592f));
  p = _mm256_mul_ps(p, t);
  const __m256 e = Exp(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(a, a)));
  const __m256 y = _mm256_fnmadd_ps(p, e, _mm256_set1_ps(1.0f));
  return _mm256_or_ps(y, sign);
}

void GeluErf256(const float* x, float* out, int64_t n) {
  int64_t i = 0;
  const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
  const __m256 rs2 = _mm256_set1_ps(0.70710678118654752f);
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 e = Erf(_mm256_mul_ps(v, rs2));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(half, v), _mm256_add_ps(one, e)));
  }
  for (; i < n; ++i) out[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678118654752f));
}

}  // namespace

const EncoderOpsTable& EncoderOpsAvx2() {
  static const EncoderOpsTable t{LayerNorm256, GeluErf256};
  return t;
}

}  // namespace tachyon::kernels::internal
