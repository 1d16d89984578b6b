// The AMX int8 path for packed Q4_0 / Q8_0 (matmul_int8_amx.cc): against the scalar packed
// kernel (same activation codes and integer block dots, so float summation order only: 1e-5
// relative) and against the exact reference (the activation rounding bound of matmul_test.cc),
// over activation row counts around the 16-row A tile, partial weight tiles, K chunks, threads
// and MatMulMulti.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/matmul.h"
#include "kernels/matmul_int8_amx.h"
#include "kernels/matmul_internal.h"
#include "kernels/pack.h"
#include "kernels/testing/matmul_problem.h"
#include "util/cpu_features.h"
#include "util/thread_pool.h"

namespace tachyon::kernels {
namespace {

#define SKIP_WITHOUT_AMX()                                                        \
  if (!DetectedCpuFeatures().HasAmxSet()) {                                       \
    GTEST_SKIP() << "this CPU (or OS) has no AMX tiles: the AMX path never runs"; \
  }

using Problem = MatMulProblem;
Problem Make(GgmlType t, int64_t rows, int64_t cols, int64_t m, uint32_t seed) {
  Problem p = MakeMatMulProblem(t, rows, cols, m, seed);
  PackProblem(p);
  return p;
}

std::vector<float> RunInt8(const Problem& p, ThreadPool* pool = nullptr) {
  std::vector<float> y(p.m * p.rows, NAN);
  const Weight* ws[1] = {&p.weight};
  float* ys[1] = {y.data()};
  internal::MatMulMultiAmxInt8(ws, p.x.data(), p.m, ys, pool);
  return y;
}

void Check(const Problem& p, const std::vector<float>& y) {
  std::vector<float> ref(p.m * p.rows), scalar(p.m * p.rows, NAN);
  MatMulReference(p.weight, p.x.data(), p.m, ref.data());
  MatMulAtLevel(SimdLevel::kScalar, p.weight, p.x.data(), p.m, scalar.data(), nullptr);
  const std::vector<double> bound = ActivationRoundingBounds(p);
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_LE(std::fabs(y[i] - ref[i]), bound[i])
        << TypeName(p.type) << " rows " << p.rows << " cols " << p.cols << " m " << p.m << " at "
        << i;
    ASSERT_NEAR(y[i], scalar[i], 1e-5 * (std::fabs(ref[i]) + bound[i] * 50) + 1e-5)
        << TypeName(p.type) << " rows " << p.rows << " cols " << p.cols << " m " << p.m << " at "
        << i;
  }
}

const GgmlType kTypes[] = {GgmlType::kQ4_0, GgmlType::kQ8_0};

TEST(MatMulAmxInt8, ActivationRowCounts) {
  SKIP_WITHOUT_AMX();
  for (GgmlType t : kTypes) {
    for (int64_t m : {1, 2, 3, 5, 15, 16, 17, 31, 32, 33, 47, 48, 64}) {
      const Problem p = Make(t, 33, 320, m, static_cast<uint32_t>(m));
      Check(p, RunInt8(p));
    }
  }
}

// Partial weight tiles, and columns from one block to several K chunks with every remainder
// of the four-block pass.
TEST(MatMulAmxInt8, Shapes) {
  SKIP_WITHOUT_AMX();
  for (GgmlType t : kTypes) {
    for (int64_t rows : {1, 15, 16, 17, 33, 48}) {
      const Problem p = Make(t, rows, 160, 5, static_cast<uint32_t>(rows));
      Check(p, RunInt8(p));
    }
    for (int64_t cols : {32, 64, 96, 128, 1024, 1056, 2080, 4096}) {
      const Problem p = Make(t, 19, cols, 17, static_cast<uint32_t>(cols));
      Check(p, RunInt8(p));
    }
  }
}

// Results are the same whatever the split: threads, or the row's batch.
TEST(MatMulAmxInt8, ThreadedAndBatchIndependent) {
  SKIP_WITHOUT_AMX();
  ThreadPool pool(2);
  for (GgmlType t : kTypes) {
    const Problem p = Make(t, 200, 512, 19, 7);
    const std::vector<float> a = RunInt8(p), b = RunInt8(p, &pool);
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << TypeName(t) << " " << i;
    Check(p, b);
    // Rows 3.. of the batch run alone give the same bits.
    Problem q = Make(t, 200, 512, 4, 7);
    std::copy(p.x.begin() + 3 * p.cols, p.x.begin() + 7 * p.cols, q.x.begin());
    const std::vector<float> c = RunInt8(q);
    for (int64_t i = 0; i < 4; ++i) {
      for (int64_t r = 0; r < p.rows; ++r)
        ASSERT_EQ(c[i * p.rows + r], a[(3 + i) * p.rows + r]) << TypeName(t) << " " << i;
    }
  }
}

TEST(MatMulAmxInt8, MultiEqualsSeparateCalls) {
  SKIP_WITHOUT_AMX();
  ThreadPool pool(2);
  const Problem a = Make(GgmlType::kQ4_0, 40, 256, 9, 1);
  Problem b = Make(GgmlType::kQ8_0, 24, 256, 9, 2);
  Problem c = Make(GgmlType::kQ4_0, 16, 256, 9, 3);
  b.x = a.x;
  c.x = a.x;
  std::vector<float> ya(9 * 40, NAN), yb(9 * 24, NAN), yc(9 * 16, NAN);
  const Weight* ws[3] = {&a.weight, &b.weight, &c.weight};
  float* ys[3] = {ya.data(), yb.data(), yc.data()};
  internal::MatMulMultiAmxInt8(ws, a.x.data(), 9, ys, &pool);
  const std::vector<float> ra = RunInt8(a), rb = RunInt8(b), rc = RunInt8(c);
  for (size_t i = 0; i < ya.size(); ++i) ASSERT_EQ(ya[i], ra[i]) << i;
  for (size_t i = 0; i < yb.size(); ++i) ASSERT_EQ(yb[i], rb[i]) << i;
  for (size_t i = 0; i < yc.size(); ++i) ASSERT_EQ(yc[i], rc[i]) << i;
}

// MatMul at kAmx takes this path for packed Q4_0 / Q8_0 between AmxInt8MinRows() and the
// AMX-BF16 threshold (same bits as the direct call), and not for unpacked weights.
TEST(MatMulAmxInt8, Dispatch) {
  SKIP_WITHOUT_AMX();
  if (BestSimdLevel() < SimdLevel::kAmx) GTEST_SKIP() << "TACHYON_CPU caps the level below amx";
  for (GgmlType t : kTypes) {
    const int64_t m = internal::AmxInt8MinRows();
    if (m >= internal::AmxMinRows(t)) {
      GTEST_SKIP() << "the AMX int8 path is off by default (TACHYON_AMX_INT8_MIN_M=16 enables it)";
    }
    const Problem p = Make(t, 40, 256, m, 5);
    std::vector<float> y(m * p.rows, NAN);
    MatMul(p.weight, p.x.data(), m, y.data(), nullptr);
    const std::vector<float> direct = RunInt8(p);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], direct[i]) << TypeName(t) << " " << i;
    Weight unpacked = p.weight;
    unpacked.packed = nullptr;
    EXPECT_FALSE(internal::AmxInt8Supports(unpacked));
    EXPECT_TRUE(internal::AmxInt8Supports(p.weight));
  }
}

}  // namespace
}  // namespace tachyon::kernels
