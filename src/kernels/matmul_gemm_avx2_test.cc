// The AVX2 GEMM (matmul_gemm_avx2.cc) called directly: against the scalar kernels (float
// summation order only), bit for bit against the AVX2 few-row packed kernels it takes over from
// (batch invariance), and row by row against itself, over ragged rows / columns / row counts.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"
#include "kernels/pack.h"
#include "kernels/testing/matmul_problem.h"
#include "tensor/quant_blocks.h"
#include "util/cpu_features.h"
#include "util/thread_pool.h"

namespace tachyon::kernels {
namespace {

const GgmlType kGemmTypes[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ4_K,
                               GgmlType::kQ6_K};

bool IsSuperBlock(GgmlType t) {
  return GetTypeTraits(static_cast<uint32_t>(t))->block_size == 256;
}

// A packed problem and its activation rows in the type's format.
struct Packed {
  MatMulProblem p;
  size_t stride;
  AlignedBuffer act;
};
Packed MakePacked(GgmlType t, int64_t rows, int64_t cols, int64_t m, uint32_t seed) {
  Packed r{MakeMatMulProblem(t, rows, cols, m, seed), 0, nullptr};
  PackProblem(r.p);
  const internal::ActFormat f = internal::ActFormatFor(t);
  r.stride = internal::ActRowBytes(f, cols);
  r.act = AllocateAligned(r.stride * static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) {
    internal::QuantizeActScalar(f)(r.p.x.data() + i * cols, cols, r.act.get() + i * r.stride);
  }
  return r;
}

std::vector<float> RunGemm(const Packed& q) {
  const MatMulProblem& p = q.p;
  std::vector<float> y(p.m * p.rows, NAN);
  internal::PackedGemmAvx2(p.type)(p.cols, p.weight.packed, PackedTileBytes(p.type, p.cols),
                                   (p.rows + kPackRows - 1) / kPackRows, p.rows, q.act.get(),
                                   q.stride, p.m, y.data(), p.rows);
  return y;
}

// The few-row kernel, tile by tile, up to kPackedMaxRows rows per call.
std::vector<float> RunFewRows(const Packed& q) {
  const MatMulProblem& p = q.p;
  const internal::PackedFn packed = internal::PackedAvx2(p.type);
  const size_t tile_bytes = PackedTileBytes(p.type, p.cols);
  std::vector<float> y(p.m * p.rows, NAN);
  for (int64_t t = 0; t * kPackRows < p.rows; ++t) {
    const int nrows = static_cast<int>(std::min<int64_t>(kPackRows, p.rows - t * kPackRows));
    for (int64_t i = 0; i < p.m; i += internal::kPackedMaxRows) {
      const int nx = static_cast<int>(std::min<int64_t>(internal::kPackedMaxRows, p.m - i));
      packed(p.cols, p.weight.packed + t * tile_bytes, q.act.get() + i * q.stride, q.stride, nx,
             y.data() + i * p.rows + t * kPackRows, p.rows, nrows);
    }
  }
  return y;
}

void CheckGemm(GgmlType t, int64_t rows, int64_t cols, int64_t m, uint32_t seed) {
  SCOPED_TRACE(testing::Message() << TypeName(t) << " rows " << rows << " cols " << cols << " m "
                                  << m);
  const Packed q = MakePacked(t, rows, cols, m, seed);
  const std::vector<float> y = RunGemm(q);
  std::vector<float> scalar(m * rows);
  MatMulAtLevel(SimdLevel::kScalar, q.p.weight, q.p.x.data(), m, scalar.data(), nullptr);
  const std::vector<double> bound = ActivationRoundingBounds(q.p);
  for (size_t i = 0; i < y.size(); ++i) {
    ASSERT_NEAR(y[i], scalar[i], 1e-5 * (std::fabs(scalar[i]) + bound[i] * 50) + 1e-5) << i;
  }
  if (internal::PackedAvx2(t) != nullptr) {
    const std::vector<float> few = RunFewRows(q);
    ASSERT_EQ(std::memcmp(y.data(), few.data(), y.size() * sizeof(float)), 0)
        << "differs from the few-row kernel";
  } else {  // Q5_0: the GEMM at every row count; each row alone gives the same bits
    for (int64_t i = 0; i < m; i += 5) {
      Packed one = MakePacked(t, rows, cols, 1, seed);
      std::memcpy(one.act.get(), q.act.get() + i * q.stride, q.stride);
      const std::vector<float> yi = RunGemm(one);
      ASSERT_EQ(std::memcmp(yi.data(), y.data() + i * rows, rows * sizeof(float)), 0) << "row " << i;
    }
  }
}

TEST(MatMulGemmAvx2, RaggedShapes) {
  if (!DetectedCpuFeatures().HasAvx2Set()) GTEST_SKIP() << "needs AVX2";
  for (GgmlType t : kGemmTypes) {
    const int64_t blk = IsSuperBlock(t) ? 256 : 32;
    // Block counts around the slice (16 blocks / 2 super-blocks) and tile edges.
    const std::vector<int64_t> blocks =
        IsSuperBlock(t) ? std::vector<int64_t>{1, 2, 3, 5} : std::vector<int64_t>{1, 3, 16, 17, 33};
    for (int64_t nb : blocks) {
      for (int64_t rows : {1, 15, 16, 17, 37}) {
        CheckGemm(t, rows, nb * blk, 7, static_cast<uint32_t>(nb * 100 + rows));
      }
    }
  }
}

// Every row count of speculative verification and batched decode (one pass of up to 4 rows, or
// several, the first of which may decode the codes for the others; the K-quants' wide groups:
// Q4_K one to three up to 24 rows, Q6_K one up to 10, the slice passes above), a ragged last tile and a ragged last slice
// (3 super-blocks / 17 blocks).
TEST(MatMulGemmAvx2, RowCounts) {
  if (!DetectedCpuFeatures().HasAvx2Set()) GTEST_SKIP() << "needs AVX2";
  for (GgmlType t : kGemmTypes) {
    for (int64_t m = 1; m <= 25; ++m) {
      CheckGemm(t, 37, IsSuperBlock(t) ? 768 : 544, m, static_cast<uint32_t>(m));
    }
    CheckGemm(t, 33, IsSuperBlock(t) ? 512 : 96, 33, 33);
  }
}

// Activation rows in several L2 chunks (256 KiB of rows each).
TEST(MatMulGemmAvx2, SeveralChunks) {
  if (!DetectedCpuFeatures().HasAvx2Set()) GTEST_SKIP() << "needs AVX2";
  for (GgmlType t : kGemmTypes) CheckGemm(t, 18, IsSuperBlock(t) ? 4096 : 4000, 70, 5);
}

// Extreme codes and activations: every code at 0 or at its maximum against activations of
// +-127, so each int16 lane sits at its bound (no saturation, no wrap left in the result).
void SetCodes(MatMulProblem& p, uint8_t byte) {
  const int64_t nblocks = p.rows * p.cols / (IsSuperBlock(p.type) ? 256 : 32);
  for (int64_t b = 0; b < nblocks; ++b) {
    switch (p.type) {
      case GgmlType::kQ4_0:
        std::memset(reinterpret_cast<BlockQ4_0*>(p.w.data())[b].qs, byte, 16);
        break;
      case GgmlType::kQ4_1:
        std::memset(reinterpret_cast<BlockQ4_1*>(p.w.data())[b].qs, byte, 16);
        break;
      case GgmlType::kQ5_0: {
        BlockQ5_0& blk = reinterpret_cast<BlockQ5_0*>(p.w.data())[b];
        std::memset(blk.qs, byte, 16);
        std::memset(blk.qh, byte, 4);
        break;
      }
      case GgmlType::kQ4_K:
        std::memset(reinterpret_cast<BlockQ4_K*>(p.w.data())[b].qs, byte, 128);
        break;
      default: {  // Q6_K
        BlockQ6_K& blk = reinterpret_cast<BlockQ6_K*>(p.w.data())[b];
        std::memset(blk.ql, byte, sizeof(blk.ql));
        std::memset(blk.qh, byte, sizeof(blk.qh));
        break;
      }
    }
  }
}

TEST(MatMulGemmAvx2, ExtremeValues) {
  if (!DetectedCpuFeatures().HasAvx2Set()) GTEST_SKIP() << "needs AVX2";
  for (GgmlType t : kGemmTypes) {
    for (uint8_t byte : {uint8_t{0}, uint8_t{0xFF}}) {
      for (float sign : {1.0f, -1.0f}) {
        const int64_t cols = IsSuperBlock(t) ? 512 : 64;
        MatMulProblem p = MakeMatMulProblem(t, 16, cols, 4, 9);
        SetCodes(p, byte);
        for (float& v : p.x) v = sign;  // quantizes to +-127 everywhere
        PackProblem(p);
        const internal::ActFormat f = internal::ActFormatFor(t);
        Packed q{std::move(p), internal::ActRowBytes(f, cols), nullptr};
        q.act = AllocateAligned(q.stride * 4);
        for (int64_t i = 0; i < 4; ++i) {
          internal::QuantizeActScalar(f)(q.p.x.data() + i * cols, cols, q.act.get() + i * q.stride);
        }
        const std::vector<float> y = RunGemm(q);
        std::vector<float> ref(y.size());
        MatMulReference(q.p.weight, q.p.x.data(), q.p.m, ref.data());
        for (size_t i = 0; i < y.size(); ++i) {
          ASSERT_NEAR(y[i], ref[i], 1e-4 * (std::fabs(ref[i]) + 1))
              << TypeName(t) << " codes " << int{byte} << " x " << sign << " at " << i;
        }
      }
    }
  }
}

// Through MatMul at the AVX2 level: threaded equals single-threaded, bit for bit, and the row
// count at which the GEMM takes over does not change a row's result.
TEST(MatMulGemmAvx2, MatMulAtAvx2) {
  if (!DetectedCpuFeatures().HasAvx2Set()) GTEST_SKIP() << "needs AVX2";
  ThreadPool pool(2);
  for (GgmlType t : kGemmTypes) {
    MatMulProblem p = MakeMatMulProblem(t, 100, IsSuperBlock(t) ? 768 : 160, 24, 21);
    PackProblem(p);
    std::vector<float> a(p.m * p.rows), b(p.m * p.rows);
    MatMulAtLevel(SimdLevel::kAvx2, p.weight, p.x.data(), p.m, a.data(), nullptr);
    MatMulAtLevel(SimdLevel::kAvx2, p.weight, p.x.data(), p.m, b.data(), &pool);
    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << TypeName(t);
    for (int64_t m : {1, 3, 7}) {
      std::vector<float> c(m * p.rows);
      MatMulAtLevel(SimdLevel::kAvx2, p.weight, p.x.data(), m, c.data(), &pool);
      ASSERT_EQ(std::memcmp(a.data(), c.data(), c.size() * sizeof(float)), 0)
          << TypeName(t) << " m " << m;
    }
  }
}

TEST(MatMulGemmAvx2, MinRows) {
  if (std::getenv("TACHYON_GEMM_MIN_ROWS") != nullptr) GTEST_SKIP() << "TACHYON_GEMM_MIN_ROWS set";
  EXPECT_EQ(internal::GemmMinRowsAvx2(GgmlType::kQ5_0), 1);
  for (GgmlType t : {GgmlType::kQ4_0, GgmlType::kQ4_1}) {
    EXPECT_EQ(internal::GemmMinRowsAvx2(t), 4) << TypeName(t);
  }
  for (GgmlType t : {GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    EXPECT_EQ(internal::GemmMinRowsAvx2(t), 3) << TypeName(t);
  }
  EXPECT_EQ(internal::PackedGemmAvx2(GgmlType::kF16), nullptr);
}

}  // namespace
}  // namespace tachyon::kernels
