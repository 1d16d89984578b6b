// Dispatch of the row-wise ops to the best SIMD level, chosen once.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/ops.h"
#include "kernels/ops_internal.h"

namespace tachyon::kernels {
namespace internal {

const OpsTable& OpsScalar() {
  static const OpsTable t{RmsNormReference,    SiluMulReference, SoftmaxReference,
                          AddInPlaceReference, DotReference,     AddRmsNormReference};
  return t;
}

const OpsTable& OpsAtLevel(SimdLevel level) {
  switch (std::min(level, BestSimdLevel())) {
    case SimdLevel::kAmx:
    case SimdLevel::kAvx512:
      return OpsAvx512();
    case SimdLevel::kAvx2:
      return OpsAvx2();
    default:
      return OpsScalar();
  }
}

}  // namespace internal

namespace {
const internal::OpsTable& Ops() {
  static const internal::OpsTable& t = internal::OpsAtLevel(BestSimdLevel());
  return t;
}
}  // namespace

void RmsNorm(const float* x, const float* weight, float* out, int64_t m, int64_t n, float eps) {
  Ops().rms_norm(x, weight, out, m, n, eps);
}

void AddRmsNorm(float* x, const float* delta, const float* weight, float* out, int64_t m, int64_t n,
                float eps) {
  Ops().add_rms_norm(x, delta, weight, out, m, n, eps);
}

namespace {

void RotateHeads(float* x, int64_t n_heads, int64_t head_dim, int64_t half, const float* cs,
                 RopeStyle style) {
  for (int64_t h = 0; h < n_heads; ++h) {
    float* xh = x + h * head_dim;
    if (style == RopeStyle::kAdjacent) {
      for (int64_t i = 0; i < half; ++i) {
        const float c = cs[2 * i], s = cs[2 * i + 1], x0 = xh[2 * i], x1 = xh[2 * i + 1];
        xh[2 * i] = x0 * c - x1 * s;
        xh[2 * i + 1] = x0 * s + x1 * c;
      }
    } else {
      for (int64_t i = 0; i < half; ++i) {
        const float c = cs[2 * i], s = cs[2 * i + 1], x0 = xh[i], x1 = xh[i + half];
        xh[i] = x0 * c - x1 * s;
        xh[i + half] = x0 * s + x1 * c;
      }
    }
  }
}

}  // namespace

void RopeQk(float* q, int64_t n_heads, float* k, int64_t n_kv_heads, int64_t head_dim,
            int64_t rot_dim, int64_t pos, const float* inv_freq, RopeStyle style) {
  const int64_t half = rot_dim / 2;
  thread_local std::vector<float> cs;  // grow-only per thread
  if (cs.size() < static_cast<size_t>(2 * half)) cs.resize(static_cast<size_t>(2 * half));
  for (int64_t i = 0; i < half; ++i) {
    const double angle = static_cast<double>(pos) * inv_freq[i];
    cs[2 * i] = static_cast<float>(std::cos(angle));
    cs[2 * i + 1] = static_cast<float>(std::sin(angle));
  }
  RotateHeads(q, n_heads, head_dim, half, cs.data(), style);
  RotateHeads(k, n_kv_heads, head_dim, half, cs.data(), style);
}

// RoPE is cheap next to the matmuls: the cos/sin pairs are computed once per call and the
// rotation is applied to every head.
void Rope(float* x, int64_t n_heads, int64_t head_dim, int64_t rot_dim, int64_t pos,
          const float* inv_freq, RopeStyle style) {
  const int64_t half = rot_dim / 2;
  thread_local std::vector<float> cs;  // grow-only per thread
  if (cs.size() < static_cast<size_t>(2 * half)) cs.resize(static_cast<size_t>(2 * half));
  for (int64_t i = 0; i < half; ++i) {
    const double angle = static_cast<double>(pos) * inv_freq[i];
    cs[2 * i] = static_cast<float>(std::cos(angle));
    cs[2 * i + 1] = static_cast<float>(std::sin(angle));
  }
  RotateHeads(x, n_heads, head_dim, half, cs.data(), style);
}

void SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  Ops().silu_mul(gate, up, out, n);
}
void Softmax(float* x, int64_t n) {
  Ops().softmax(x, n);
}
void AddInPlace(float* y, const float* x, int64_t n) {
  Ops().add_in_place(y, x, n);
}
float Dot(const float* x, const float* y, int64_t n) {
  return Ops().dot(x, y, n);
}

}  // namespace tachyon::kernels
