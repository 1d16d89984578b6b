// Scalar references of the elementwise / row-wise ops.
#include <cmath>
#include <numbers>

#include "kernels/ops.h"

namespace tachyon::kernels {

void RmsNormReference(const float* x, const float* weight, float* out, int64_t m, int64_t n,
                      float eps) {
  for (int64_t i = 0; i < m; ++i) {
    const float* xi = x + i * n;
    double ss = 0;
    for (int64_t j = 0; j < n; ++j) ss += static_cast<double>(xi[j]) * xi[j];
    const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
    float* oi = out + i * n;
    for (int64_t j = 0; j < n; ++j) oi[j] = xi[j] * scale * weight[j];
  }
}

void AddRmsNormReference(float* x, const float* delta, const float* weight, float* out, int64_t m,
                         int64_t n, float eps) {
  for (int64_t i = 0; i < m * n; ++i) x[i] += delta[i];
  RmsNormReference(x, weight, out, m, n, eps);
}

void RopeReference(float* x, int64_t n_heads, int64_t head_dim, int64_t rot_dim, int64_t pos,
                   const float* inv_freq, RopeStyle style) {
  const int64_t half = rot_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double angle = static_cast<double>(pos) * inv_freq[i];
    const float c = static_cast<float>(std::cos(angle)), s = static_cast<float>(std::sin(angle));
    for (int64_t h = 0; h < n_heads; ++h) {
      float* xh = x + h * head_dim;
      const int64_t a = style == RopeStyle::kAdjacent ? 2 * i : i;
      const int64_t b = style == RopeStyle::kAdjacent ? 2 * i + 1 : i + half;
      const float x0 = xh[a], x1 = xh[b];
      xh[a] = x0 * c - x1 * s;
      xh[b] = x0 * s + x1 * c;
    }
  }
}

void SiluMulReference(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void GeluTanhMulReference(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    const double u = std::sqrt(2.0 / std::numbers::pi) * (g + 0.044715 * g * g * g);
    out[i] = static_cast<float>(0.5 * g * (1.0 + std::tanh(u)) * up[i]);
  }
}

void SoftmaxReference(float* x, int64_t n) {
  if (n <= 0) return;
  float mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = std::fmax(mx, x[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void AddInPlaceReference(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

float DotReference(const float* x, const float* y, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * y[i];
  return static_cast<float>(s);
}

}  // namespace tachyon::kernels
