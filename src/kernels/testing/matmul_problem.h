// Shared by the MatMul tests (matmul*_test.cc, fused_rows_test.cc, batch_invariance_test.cc,
// bf16_panel_test.cc): a random weight matrix of any type with its exact dequantized values and
// activations, and the bound on |fast - exact| that rounding the activations to the weight type's
// format allows.
#pragma once

#include <cstdint>
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

// m may be 0 (weights only). N(0, 1) weights quantized to `t`; activations N(0, 1) with 1 in 51
// scaled by 8 (outliers, like real hidden states).
MatMulProblem MakeMatMulProblem(GgmlType t, int64_t rows, int64_t cols, int64_t m, uint32_t seed);

// Repacks the weights as the loader does and points weight.packed at the copy.
void PackProblem(MatMulProblem& p, ThreadPool* pool = nullptr);

// Bound on |fast - exact| per output for the AVX/scalar kernels: half a quantization step of
// each activation block (8-bit per 32 or per 256 elements), bf16 rounding for BF16 weights,
// none for F32/F16; plus float summation.
std::vector<double> ActivationRoundingBounds(const MatMulProblem& p);

}  // namespace tachyon::kernels
