#include "kernels/fused_rows.h"

#include "kernels/ops.h"
#include "util/logging.h"

namespace tachyon::kernels {

RmsNormRows::RmsNormRows(float* x, const float* delta, const float* weight, int64_t n, float eps,
                         const int64_t* index)
    : x_(x), delta_(delta), weight_(weight), n_(n), eps_(eps), index_(index) {
  CHECK(delta == nullptr || index == nullptr) << "RmsNormRows: a residual add needs all rows";
}

void RmsNormRows::Row(int64_t i, float* out) const {
  if (delta_ != nullptr) {
    AddRmsNorm(x_ + i * n_, delta_ + i * n_, weight_, out, 1, n_, eps_);
  } else {
    const int64_t r = index_ != nullptr ? index_[i] : i;
    RmsNorm(x_ + r * n_, weight_, out, 1, n_, eps_);
  }
}

void GatedMulRows::Row(int64_t i, float* out) const {
  GatedMul(act_, gate_ + i * n_, up_ + i * n_, out, n_);
}

}  // namespace tachyon::kernels
