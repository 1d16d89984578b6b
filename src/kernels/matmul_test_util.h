// Shared by the MatMul tests (matmul_test.cc, matmul_int8_amx_test.cc, matmul_amx_test.cc):
// a random weight matrix of any type with its exact dequantized values and activations, and
// the bound on |fast - exact| that rounding the activations to the weight type's format allows.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/pack.h"

namespace tachyon::kernels {

// Every weight type MatMul supports (the matmul tests run each of them).
inline constexpr GgmlType kAllMatMulTypes[] = {
    GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ8_0, GgmlType::kQ4_0,
    GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ2_K, GgmlType::kQ3_K,
    GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};

struct MatMulProblem {
  GgmlType type;
  int64_t rows, cols, m;
  std::vector<uint8_t> w;
  std::vector<float> wf;  // dequantized weights [rows, cols]
  std::vector<float> x;   // [m, cols]
  AlignedBuffer packed;   // set by PackProblem
  Weight weight;          // GGUF layout; weight.packed set by PackProblem
};

// N(0, 1) weights quantized to `t`; activations N(0, 1) with 1 in 51 scaled by 8 (outliers,
// like real hidden states).
inline MatMulProblem MakeMatMulProblem(GgmlType t, int64_t rows, int64_t cols, int64_t m,
                                       uint32_t seed) {
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

// Repacks the weights as the loader does and points weight.packed at the copy.
inline void PackProblem(MatMulProblem& p, ThreadPool* pool = nullptr) {
  p.packed = AllocateAligned(PackedBytes(p.type, p.rows, p.cols));
  PackWeight(p.weight, p.packed.get(), pool);
  p.weight.packed = p.packed.get();
}

// Bound on |fast - exact| per output for the AVX/scalar kernels: half a quantization step of
// each activation block (8-bit per 32 or per 256 elements), bf16 rounding for BF16 weights,
// none for F32/F16; plus float summation.
inline std::vector<double> ActivationRoundingBounds(const MatMulProblem& p) {
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
