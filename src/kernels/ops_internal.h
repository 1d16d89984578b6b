// Internal to kernels/: per-SIMD-level tables of the row-wise ops (see ops.h for contracts).
#pragma once

#include <cstdint>

#include "kernels/ops.h"
#include "util/cpu_features.h"

namespace tachyon::kernels::internal {

struct OpsTable {
  void (*rms_norm)(const float* x, const float* weight, float* out, int64_t m, int64_t n,
                   float eps);
  void (*silu_mul)(const float* gate, const float* up, float* out, int64_t n);
  void (*softmax)(float* x, int64_t n);
  void (*add_in_place)(float* y, const float* x, int64_t n);
  float (*dot)(const float* x, const float* y, int64_t n);
  void (*add_rms_norm)(float* x, const float* delta, const float* weight, float* out, int64_t m,
                       int64_t n, float eps);
  // Rotates the first 2 * half dims of each of n_heads heads (x: [n_heads, head_dim]) by the
  // pairs of RopeCosSin (cs: cos[half] then sin[half]).
  void (*rope_rotate)(float* x, int64_t n_heads, int64_t head_dim, int64_t half, const float* cs,
                      RopeStyle style);
  void (*gelu_tanh_mul)(const float* gate, const float* up, float* out, int64_t n);
};

// gelu_tanh(v) = v * sigmoid(2u) with u = sqrt(2/pi) (v + 0.044715 v^3) (the same function as
// 0.5 v (1 + tanh(u))): the SIMD variants compute 2u with these constants and one exp.
inline constexpr float kGeluTwoSqrt2OverPi = 1.5957691216057308f;  // 2 * sqrt(2 / pi)
inline constexpr float kGeluCubic = 0.044715f;

// The scalar rotation (OpsScalar, OpsAvx2).
void RopeRotateScalar(float* x, int64_t n_heads, int64_t head_dim, int64_t half, const float* cs,
                      RopeStyle style);

const OpsTable& OpsScalar();
const OpsTable& OpsAvx2();
const OpsTable& OpsAvx512();
// The table for `level`, capped by BestSimdLevel().
const OpsTable& OpsAtLevel(SimdLevel level);

}  // namespace tachyon::kernels::internal
