// Fused matmul inputs (kernels/fused_rows.h, MatMulMultiRows): the rows equal the unfused
// ops', each row is produced exactly once, and the matmul results equal MatMulMulti's on the
// materialised rows bit for bit, for every weight type, SIMD level, row count and path.
#include "kernels/fused_rows.h"

#include <atomic>
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/ops.h"
#include "kernels/testing/kernel_testing.h"
#include "kernels/testing/matmul_problem.h"
#include "util/cpu_features.h"
#include "util/thread_pool.h"

namespace tachyon::kernels {
namespace {

std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(n);
  for (float& e : v) e = nd(rng);
  return v;
}

// Counts the calls per row of the rows it forwards to.
class CountingRows final : public InputRows {
 public:
  CountingRows(const InputRows& inner, int64_t m) : inner_(inner), calls_(m) {}
  void Row(int64_t i, float* out) const override {
    calls_[i].fetch_add(1);
    inner_.Row(i, out);
  }
  int Calls(int64_t i) const { return calls_[i].load(); }

 private:
  const InputRows& inner_;
  mutable std::vector<std::atomic<int>> calls_;
};

TEST(FusedRows, RmsNormRowsEqualTheOps) {
  const int64_t m = 5, n = 80;
  std::vector<float> x = Random(m * n, 1, 3.0f), delta = Random(m * n, 2), w = Random(n, 3);
  std::vector<float> want(m * n), got(n);
  RmsNorm(x.data(), w.data(), want.data(), m, n, 1e-5f);
  const RmsNormRows plain(x.data(), nullptr, w.data(), n, 1e-5f);
  for (int64_t i = 0; i < m; ++i) {
    plain.Row(i, got.data());
    for (int64_t j = 0; j < n; ++j) ASSERT_EQ(got[j], want[i * n + j]) << i << " " << j;
  }
  // A gathered subset, in any order.
  const int64_t index[] = {4, 0, 2};
  const RmsNormRows gathered(x.data(), nullptr, w.data(), n, 1e-5f, index);
  for (int64_t i = 0; i < 3; ++i) {
    gathered.Row(i, got.data());
    for (int64_t j = 0; j < n; ++j) ASSERT_EQ(got[j], want[index[i] * n + j]);
  }
  // With the pending residual: x is updated as AddRmsNorm updates it.
  std::vector<float> x2 = x, want_x = x;
  AddRmsNorm(want_x.data(), delta.data(), w.data(), want.data(), m, n, 1e-5f);
  const RmsNormRows added(x2.data(), delta.data(), w.data(), n, 1e-5f);
  for (int64_t i = 0; i < m; ++i) {
    added.Row(i, got.data());
    for (int64_t j = 0; j < n; ++j) ASSERT_EQ(got[j], want[i * n + j]);
  }
  EXPECT_EQ(x2, want_x);
}

TEST(FusedRows, GatedMulRowsEqualTheOp) {
  const int64_t m = 3, n = 100;
  const std::vector<float> gate = Random(m * n, 4, 4.0f), up = Random(m * n, 5);
  for (GatedAct act : {GatedAct::kSilu, GatedAct::kGeluTanh}) {
    std::vector<float> want(m * n), got(n);
    if (act == GatedAct::kSilu) {
      SiluMul(gate.data(), up.data(), want.data(), m * n);
    } else {
      GeluTanhMul(gate.data(), up.data(), want.data(), m * n);
    }
    const GatedMulRows rows(gate.data(), up.data(), n, act);
    for (int64_t i = 0; i < m; ++i) {
      rows.Row(i, got.data());
      for (int64_t j = 0; j < n; ++j) ASSERT_EQ(got[j], want[i * n + j]);
    }
  }
}

// For weights ws (same cols), the fused call with the residual-adding norm equals AddRmsNorm
// followed by MatMulMulti, outputs and the updated residual stream alike, and produces each
// row once.
void CheckFusedEqualsUnfused(std::span<const Weight* const> ws, int64_t m, SimdLevel level,
                             ThreadPool* pool, uint32_t seed) {
  const int64_t n = ws[0]->cols;
  const std::vector<float> x0 = Random(m * n, seed, 2.0f), delta = Random(m * n, seed + 1),
                           w = Random(n, seed + 2);
  std::vector<float> x_unfused = x0, xn(m * n);
  AddRmsNorm(x_unfused.data(), delta.data(), w.data(), xn.data(), m, n, 1e-6f);
  std::vector<std::vector<float>> want(ws.size()), got(ws.size());
  std::vector<float*> yw, yg;
  for (size_t i = 0; i < ws.size(); ++i) {
    want[i].assign(m * ws[i]->rows, NAN);
    got[i].assign(m * ws[i]->rows, NAN);
    yw.push_back(want[i].data());
    yg.push_back(got[i].data());
  }
  MatMulMultiAtLevel(level, ws, xn.data(), m, yw, pool);
  std::vector<float> x_fused = x0;
  const RmsNormRows normed(x_fused.data(), delta.data(), w.data(), n, 1e-6f);
  const CountingRows counted(normed, m);
  MatMulMultiRowsAtLevel(level, ws, counted, m, yg, pool);
  const std::string where = std::string(TypeName(ws[0]->type)) + " at " + SimdLevelName(level) +
                            " m " + std::to_string(m) + (pool ? " threaded" : "");
  for (int64_t i = 0; i < m; ++i) ASSERT_EQ(counted.Calls(i), 1) << where << " row " << i;
  ASSERT_EQ(x_fused, x_unfused) << where;
  for (size_t i = 0; i < ws.size(); ++i) {
    for (size_t j = 0; j < want[i].size(); ++j) {
      ASSERT_EQ(got[i][j], want[i][j]) << where << " weight " << i << " at " << j;
    }
  }
}

TEST(MatMulMultiRows, EqualsUnfusedEveryTypeLevelAndRowCount) {
  ThreadPool pool(2);
  for (GgmlType t : kAllMatMulTypes) {
    MatMulProblem a = MakeMatMulProblem(t, 48, 512, 1, 11),
                  b = MakeMatMulProblem(t, 16, 512, 1, 12);
    if (HasPackedLayout(t)) {
      PackProblem(a);
      PackProblem(b);
    }
    const Weight* ws[] = {&a.weight, &b.weight};
    for (SimdLevel level : SimdLevelsUpTo(SimdLevel::kAmx)) {
      for (int64_t m : {1, 3, 8, 17, 40}) {  // register kernels, GEMM, AMX thresholds
        for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
          CheckFusedEqualsUnfused(ws, m, level, p, static_cast<uint32_t>(m));
          if (HasFailure()) return;
        }
      }
    }
  }
}

// Weights that need different activation formats (one call each on the produced rows) still
// see every row produced once.
TEST(MatMulMultiRows, MixedFormatsProduceEachRowOnce) {
  ThreadPool pool(2);
  MatMulProblem q = MakeMatMulProblem(GgmlType::kQ4_0, 32, 256, 1, 21),
                f = MakeMatMulProblem(GgmlType::kF16, 16, 256, 1, 22),
                k = MakeMatMulProblem(GgmlType::kQ6_K, 16, 256, 1, 23);
  PackProblem(q);
  const Weight* ws[] = {&q.weight, &f.weight, &k.weight};
  for (SimdLevel level : SimdLevelsUpTo(SimdLevel::kAmx)) {
    for (int64_t m : {2, 20}) CheckFusedEqualsUnfused(ws, m, level, &pool, 7);
  }
}

TEST(MatMulMultiRows, SiluMulIntoTheDownProjection) {
  MatMulProblem d = MakeMatMulProblem(GgmlType::kQ4_K, 16, 768, 1, 31);
  PackProblem(d);
  const int64_t m = 6, n = 768;
  const std::vector<float> gate = Random(m * n, 32, 3.0f), up = Random(m * n, 33);
  std::vector<float> act(m * n), want(m * 16), got(m * 16, NAN);
  SiluMul(gate.data(), up.data(), act.data(), m * n);
  MatMul(d.weight, act.data(), m, want.data(), nullptr);
  const Weight* ws[] = {&d.weight};
  float* ys[] = {got.data()};
  MatMulMultiRows(ws, GatedMulRows(gate.data(), up.data(), n), m, ys, nullptr);
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace tachyon::kernels
