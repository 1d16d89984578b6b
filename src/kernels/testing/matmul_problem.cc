#include "kernels/testing/matmul_problem.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace tachyon::kernels {

MatMulProblem MakeMatMulProblem(GgmlType t, int64_t rows, int64_t cols, int64_t m, uint32_t seed) {
  MatMulProblem p{t, rows, cols, m, {}, {}, {}, nullptr, {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const size_t rb = RowBytes(t, cols);
  p.w.resize(rb * rows);
  p.wf.resize(rows * cols);
  std::vector<float> tmp(cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : tmp) v = nd(rng);
    QuantizeRow(t, tmp.data(), p.w.data() + r * rb, cols);
    DequantizeRow(t, p.w.data() + r * rb, p.wf.data() + r * cols, cols);
  }
  p.x.resize(m * cols);
  for (float& v : p.x) v = nd(rng) * (std::uniform_int_distribution<int>(0, 50)(rng) == 0 ? 8 : 1);
  p.weight = {t, rows, cols, p.w.data(), rb};
  return p;
}

void PackProblem(MatMulProblem& p, ThreadPool* pool) {
  p.packed = AllocateAligned(PackedBytes(p.type, p.rows, p.cols));
  PackWeight(p.weight, p.packed.get(), pool);
  p.weight.packed = p.packed.get();
}

std::vector<double> ActivationRoundingBounds(const MatMulProblem& p) {
  const int64_t blk = GetTypeTraits(static_cast<uint32_t>(p.type))->block_size == 256 ? 256 : 32;
  const bool is_float =
      p.type == GgmlType::kF32 || p.type == GgmlType::kF16 || p.type == GgmlType::kBF16;
  std::vector<double> b(p.m * p.rows);
  for (int64_t i = 0; i < p.m; ++i) {
    const float* x = p.x.data() + i * p.cols;
    std::vector<double> xerr(p.cols);
    for (int64_t c0 = 0; c0 < p.cols; c0 += blk) {
      double amax = 0;
      for (int64_t c = c0; c < std::min(p.cols, c0 + blk); ++c)
        amax = std::max(amax, std::fabs(double{x[c]}));
      for (int64_t c = c0; c < std::min(p.cols, c0 + blk); ++c) {
        if (p.type == GgmlType::kBF16) {
          xerr[c] = std::fabs(x[c]) * std::ldexp(1.0, -8);
        } else if (is_float) {
          xerr[c] = 0;
        } else {
          xerr[c] = amax / 127 * 0.5 * 1.001;
        }
      }
    }
    for (int64_t j = 0; j < p.rows; ++j) {
      double e = 0, mag = 0;
      for (int64_t c = 0; c < p.cols; ++c) {
        const double w = std::fabs(p.wf[j * p.cols + c]);
        e += w * xerr[c];
        mag += w * std::fabs(x[c]);
      }
      b[i * p.rows + j] = e + 2e-6 * mag + 1e-6;
    }
  }
  return b;
}

}  // namespace tachyon::kernels
