// Matmul inputs computed on the fly (kernels::InputRows, matmul.h): the elementwise ops that
// feed a transformer layer's matmuls, fused into the matmuls' activation conversion so the
// float rows never make a pass through memory of their own (issue #8: RMSNorm + quantize,
// SiLU x up + quantize). Each row equals what the unfused op (kernels/ops.h) writes for it,
// bit for bit.
#pragma once

#include <cstdint>

#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace tachyon::kernels {

// Row i = RmsNorm(x[r]) * weight with r = index ? index[i] : i (rows of n floats).
// With `delta` (then index must be null), x[i] += delta[i] first, written back to x: the
// pending residual add of AddRmsNorm, done in the same pass.
class RmsNormRows final : public InputRows {
 public:
  RmsNormRows(float* x, const float* delta, const float* weight, int64_t n, float eps,
              const int64_t* index = nullptr);
  void Row(int64_t i, float* out) const override;

 private:
  float* x_;
  const float* delta_;
  const float* weight_;
  int64_t n_;
  float eps_;
  const int64_t* index_;
};

// Row i = act(gate[i]) * up[i] (rows of n floats; GatedMul).
class GatedMulRows final : public InputRows {
 public:
  GatedMulRows(const float* gate, const float* up, int64_t n, GatedAct act = GatedAct::kSilu)
      : gate_(gate), up_(up), n_(n), act_(act) {}
  void Row(int64_t i, float* out) const override;

 private:
  const float* gate_;
  const float* up_;
  int64_t n_;
  GatedAct act_;
};

}  // namespace tachyon::kernels
