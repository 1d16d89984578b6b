// Scalar references of the encoder ops and their run-time dispatch.
#include "kernels/encoder_ops.h"

#include <algorithm>
#include <cmath>

namespace tachyon::kernels {

void LayerNormReference(const float* x, const float* weight, const float* bias, float* out,
                        int64_t m, int64_t n, float eps) {
  for (int64_t i = 0; i < m; ++i) {
    const float* xi = x + i * n;
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += xi[j];
    const double mean = sum / static_cast<double>(n);
    double var = 0;
    for (int64_t j = 0; j < n; ++j) var += (xi[j] - mean) * (xi[j] - mean);
    const double inv = 1.0 / std::sqrt(var / static_cast<double>(n) + eps);
    float* oi = out + i * n;
    for (int64_t j = 0; j < n; ++j) {
      oi[j] = static_cast<float>((xi[j] - mean) * inv * weight[j] + bias[j]);
    }
  }
}

void GeluErfReference(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    out[i] = static_cast<float>(0.5 * v * (1.0 + std::erf(v * 0.70710678118654752440)));
  }
}

namespace internal {

const EncoderOpsTable& EncoderOpsAtLevel(SimdLevel level) {
  static const EncoderOpsTable scalar{LayerNormReference, GeluErfReference};
  if (std::min(level, BestSimdLevel()) >= SimdLevel::kAvx2) return EncoderOpsAvx2();
  return scalar;
}

}  // namespace internal

namespace {
const internal::EncoderOpsTable& Ops() {
  static const internal::EncoderOpsTable& t = internal::EncoderOpsAtLevel(BestSimdLevel());
  return t;
}
}  // namespace

void LayerNorm(const float* x, const float* weight, const float* bias, float* out, int64_t m,
               int64_t n, float eps) {
  Ops().layer_norm(x, weight, bias, out, m, n, eps);
}

void GeluErf(const float* x, float* out, int64_t n) {
  Ops().gelu_erf(x, out, n);
}

}  // namespace tachyon::kernels
