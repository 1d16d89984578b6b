// The packed K-quant kernels (matmul_packed_avx2.cc and the other levels) at the edges of their
// int16 sums: every code at its largest value, every 6-bit scale / min at 63 (Q6_K: scales of
// both signs) and activation rows of one constant, so every quantized activation byte is +127
// or -127 and all products of a sum have the same sign. This is the case the kernels' bounds on
// int16 accumulation (no saturation) are written for; a deeper int16 sum would saturate here
// and miss the exact reference by far more than the rounding bound. 1..3 activation rows (the
// decode and few-row passes), ragged row counts, several super-blocks.
#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/matmul.h"
#include "kernels/pack.h"
#include "kernels/testing/kernel_testing.h"
#include "kernels/testing/matmul_problem.h"
#include "tensor/quant_blocks.h"

namespace tachyon::kernels {
namespace {

// Largest codes / scales in every block of p's weights (d, dmin as quantized: they differ per
// row), wf re-derived, and activation row i = +1 or -1 (alternating).
void SetKQuantExtremes(MatMulProblem& p) {
  const size_t rb = RowBytes(p.type, p.cols);
  for (int64_t r = 0; r < p.rows; ++r) {
    uint8_t* row = p.w.data() + r * rb;
    for (int64_t b = 0; b < p.cols / 256; ++b) {
      if (p.type == GgmlType::kQ4_K) {
        auto* blk = reinterpret_cast<BlockQ4_K*>(row + b * sizeof(BlockQ4_K));
        std::memset(blk->qs, 0xFF, sizeof(blk->qs));          // codes 15
        std::memset(blk->scales, 0xFF, sizeof(blk->scales));  // scales and mins 63
      } else {
        auto* blk = reinterpret_cast<BlockQ6_K*>(row + b * sizeof(BlockQ6_K));
        std::memset(blk->ql, 0xFF, sizeof(blk->ql));  // codes 63 (value 31)
        std::memset(blk->qh, 0xFF, sizeof(blk->qh));
        for (int g = 0; g < 16; ++g) blk->scales[g] = static_cast<int8_t>((g + r) % 2 ? -128 : 127);
      }
    }
    DequantizeRow(p.type, row, p.wf.data() + r * p.cols, p.cols);
  }
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t c = 0; c < p.cols; ++c) p.x[i * p.cols + c] = i % 2 ? -1.0f : 1.0f;
  }
}

TEST(MatMulPackedKQuant, LargestCodesAndActivations) {
  for (GgmlType t : {GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    for (int64_t rows : {7, 16, 37}) {
      for (int64_t m : {1, 2, 3}) {
        MatMulProblem p = MakeMatMulProblem(t, rows, 768, m, static_cast<uint32_t>(rows + m));
        SetKQuantExtremes(p);
        PackProblem(p);
        std::vector<float> ref(m * rows);
        MatMulReference(p.weight, p.x.data(), m, ref.data());
        const std::vector<double> bound = ActivationRoundingBounds(p);
        for (SimdLevel l : SimdLevelsUpTo(SimdLevel::kAvx512)) {
          std::vector<float> y(m * rows, NAN);
          MatMulAtLevel(l, p.weight, p.x.data(), m, y.data(), nullptr);
          for (size_t i = 0; i < ref.size(); ++i) {
            ASSERT_LE(std::fabs(y[i] - ref[i]), bound[i])
                << TypeName(t) << " " << SimdLevelName(l) << " rows " << rows << " m " << m
                << " at " << i << ": " << y[i] << " vs " << ref[i];
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tachyon::kernels
