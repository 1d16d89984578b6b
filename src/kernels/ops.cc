// Dispatch of the row-wise ops to the best SIMD level, chosen once.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/ops.h"
#include "kernels/ops_internal.h"

namespace tachyon::kernels {
namespace internal {

const OpsTable& OpsScalar() {
  static const OpsTable t{RmsNormReference,    SiluMulReference,    SoftmaxReference,
                          AddInPlaceReference, DotReference,        AddRmsNormReference,
                          RopeRotateScalar,    GeluTanhMulReference};
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

namespace internal {

void RopeRotateScalar(float* x, int64_t n_heads, int64_t head_dim, int64_t half, const float* cs,
                      RopeStyle style) {
  const float* sn = cs + half;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* xh = x + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const int64_t a = style == RopeStyle::kAdjacent ? 2 * i : i;
      const int64_t b = style == RopeStyle::kAdjacent ? 2 * i + 1 : i + half;
      const float c = cs[i], s = sn[i], x0 = xh[a], x1 = xh[b];
      xh[a] = x0 * c - x1 * s;
      xh[b] = x0 * s + x1 * c;
    }
  }
}

}  // namespace internal

void RopeCosSin(int64_t pos, int64_t rot_dim, const float* inv_freq, float* cs) {
  const int64_t half = rot_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double angle = static_cast<double>(pos) * inv_freq[i];
    cs[i] = static_cast<float>(std::cos(angle));
    cs[half + i] = static_cast<float>(std::sin(angle));
  }
}

void RopeQkCached(float* q, int64_t n_heads, float* k, int64_t n_kv_heads, int64_t head_dim,
                  int64_t rot_dim, const float* cs, RopeStyle style) {
  Ops().rope_rotate(q, n_heads, head_dim, rot_dim / 2, cs, style);
  Ops().rope_rotate(k, n_kv_heads, head_dim, rot_dim / 2, cs, style);
}

namespace {

// Grow-only per-thread buffer for the cos/sin pairs of one call.
float* CosSinScratch(int64_t rot_dim) {
  thread_local std::vector<float> cs;
  if (cs.size() < static_cast<size_t>(rot_dim)) cs.resize(static_cast<size_t>(rot_dim));
  return cs.data();
}

}  // namespace

void RopeQk(float* q, int64_t n_heads, float* k, int64_t n_kv_heads, int64_t head_dim,
            int64_t rot_dim, int64_t pos, const float* inv_freq, RopeStyle style) {
  float* cs = CosSinScratch(rot_dim);
  RopeCosSin(pos, rot_dim, inv_freq, cs);
  RopeQkCached(q, n_heads, k, n_kv_heads, head_dim, rot_dim, cs, style);
}

// RoPE is cheap next to the matmuls: the cos/sin pairs are computed once per call and the
// rotation is applied to every head.
void Rope(float* x, int64_t n_heads, int64_t head_dim, int64_t rot_dim, int64_t pos,
          const float* inv_freq, RopeStyle style) {
  float* cs = CosSinScratch(rot_dim);
  RopeCosSin(pos, rot_dim, inv_freq, cs);
  Ops().rope_rotate(x, n_heads, head_dim, rot_dim / 2, cs, style);
}

void SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  Ops().silu_mul(gate, up, out, n);
}
void GeluTanhMul(const float* gate, const float* up, float* out, int64_t n) {
  Ops().gelu_tanh_mul(gate, up, out, n);
}
void GatedMul(GatedAct act, const float* gate, const float* up, float* out, int64_t n) {
  if (act == GatedAct::kGeluTanh) {
    GeluTanhMul(gate, up, out, n);
  } else {
    SiluMul(gate, up, out, n);
  }
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
