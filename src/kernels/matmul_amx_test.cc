// The AMX-BF16 MatMul path (matmul_amx.cc) against the exact reference, over every weight
// type, odd shapes (partial tiles in both directions, cols not a multiple of 32, K chunks,
// activation row chunks), MatMulMulti, threads and packed weights.
//
// Error bound (per output y = sum_k x_k w_k, w_k the exact dequantized weight): the path
// rounds x_k and w_k to bf16 once each (8 significant bits, round to nearest even:
// |bf16(v) - v| <= 2^-8 |v|); the product of two bf16 values is exact in f32, and the sum
// over K runs in f32 (any order, the chunks stored and reloaded exactly), so
//   |y - ref| <= S (2^-8 + 2^-8 + 2^-16) + S' (K + 2) 2^-24,   S = sum_k |x_k| |w_k|,
// with S' = S (1 + 2^-8)^2 the sum of the rounded magnitudes; bf16 inputs below 2^-126 read as
// zero and the f32 result of MatMulReference is itself rounded, which the absolute 1e-6 and
// the 1.01 margin cover.
//
// F32 / F16 weights take the hi / lo split: v = h + l + e with h = bf16(v), l = bf16(v - h),
// |v - h| <= 2^-8 |v|, so |l| <= 2^-8 (1 + 2^-8) |v| and |e| <= 2^-8 |v - h| <= 2^-16 |v|
// (e = 0 for F16 weights). The path sums the exact products h_x h_w + l_x h_w + h_x l_w, so
//   x w - that = l_x l_w + e_x w + (h_x + l_x) e_w,
//   |.| <= |x| |w| (2^-16 (1 + 2^-8)^2 + 2^-16 + 2^-16 (1 + 2^-16)) <= 3.02 * 2^-16 |x| |w|,
// and the f32 sum runs over 3K terms of total magnitude S'' <= S (1 + 2^-8)^2 (1 + 2^-7 (1 +
// 2^-8)) <= 1.02 S:
//   |y - ref| <= 3.02 * 2^-16 S + 1.02 S (3K + 2) 2^-24   (+ the same 1e-6 and 1.01 margin).
#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"
#include "kernels/pack.h"
#include "kernels/testing/matmul_problem.h"
#include "tensor/fp16.h"
#include "util/cpu_features.h"
#include "util/thread_pool.h"

namespace tachyon::kernels {
namespace {


int64_t Block(GgmlType t) {
  return GetTypeTraits(static_cast<uint32_t>(t))->block_size;
}

#define SKIP_WITHOUT_AMX()                                                        \
  if (!DetectedCpuFeatures().HasAmxSet()) {                                       \
    GTEST_SKIP() << "this CPU (or OS) has no AMX tiles: the AMX path never runs"; \
  }

using Problem = MatMulProblem;

std::vector<float> RunAmx(const Weight& w, const float* x, int64_t m, ThreadPool* pool = nullptr) {
  std::vector<float> y(m * w.rows, NAN);
  const Weight* ws[1] = {&w};
  float* ys[1] = {y.data()};
  internal::MatMulMultiAmx(ws, x, m, ys, pool);
  return y;
}

// The bound of the header comment, checked for every output.
void CheckBound(const Problem& p, const std::vector<float>& y, const char* what) {
  std::vector<float> ref(p.m * p.rows);
  MatMulReference(p.weight, p.x.data(), p.m, ref.data());
  const double kb = std::ldexp(1.0, -8), kf = std::ldexp(1.0, -24);
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.rows; ++j) {
      double mag = 0;
      for (int64_t c = 0; c < p.cols; ++c)
        mag += std::fabs(double{p.x[i * p.cols + c]}) * std::fabs(double{p.wf[j * p.cols + c]});
      const double bound =
          internal::AmxSplitType(p.type)
              ? 1.01 * (mag * 3.02 * kb * kb + 1.02 * mag * (3 * p.cols + 2) * kf) + 1e-6
              : 1.01 * (mag * (2 * kb + kb * kb) + mag * (1 + kb) * (1 + kb) * (p.cols + 2) * kf) +
                    1e-6;
      const size_t at = i * p.rows + j;
      ASSERT_LE(std::fabs(double{y[at]} - ref[at]), bound)
          << what << " " << TypeName(p.type) << " rows " << p.rows << " cols " << p.cols << " m "
          << p.m << " at row " << i << " col " << j << " (ref " << ref[at] << ")";
    }
  }
}

TEST(MatMulAmx, OddShapesEveryType) {
  SKIP_WITHOUT_AMX();
  for (GgmlType t : kAllMatMulTypes) {
    const int64_t blk = Block(t);
    // Input counts: below / at / above one 32-step and one 512 chunk, and a long row.
    std::vector<int64_t> cols;
    if (blk == 1) {
      cols = {1, 31, 32, 33, 97, 511, 513, 4096};
    } else if (blk == 32) {
      cols = {32, 64, 96, 512, 544, 4096};
    } else {
      cols = {256, 512, 768, 4096};
    }
    for (int64_t c : cols) {
      for (int64_t rows : {1, 16, 17, 33, 48}) {
        if ((c >= 4096 && rows > 17) || (rows == 16 && c > 512)) continue;  // quick reference
        const int64_t m = c >= 4096 ? 3 : 17;
        const Problem p = MakeMatMulProblem(t, rows, c, m, static_cast<uint32_t>(c + rows));
        CheckBound(p, RunAmx(p.weight, p.x.data(), p.m), "amx");
      }
    }
  }
}

TEST(MatMulAmx, ActivationRowCounts) {
  SKIP_WITHOUT_AMX();
  for (GgmlType t : kAllMatMulTypes) {
    const int64_t cols = Block(t) == 256 ? 512 : (Block(t) == 1 ? 100 : 96);
    for (int64_t m : {1, 2, 3, 15, 16, 17, 33, 100, 512}) {
      // 512 rows (a prefill chunk) for one type of each family: the reference is the cost.
      if (m == 512 && t != GgmlType::kQ4_0 && t != GgmlType::kQ4_K && t != GgmlType::kF32) continue;
      const Problem p = MakeMatMulProblem(t, 19, cols, m, static_cast<uint32_t>(m));
      CheckBound(p, RunAmx(p.weight, p.x.data(), p.m), "amx");
    }
  }
}

// More activation rows than one L2 row chunk (1 MiB of bf16 activations: 512 rows of 1024
// inputs): every further row chunk dequantizes the panels again.
TEST(MatMulAmx, SeveralRowChunks) {
  SKIP_WITHOUT_AMX();
  const Problem p = MakeMatMulProblem(GgmlType::kQ4_0, 17, 1024, 1040, 7);
  CheckBound(p, RunAmx(p.weight, p.x.data(), p.m), "amx");
}

// A row's result does not depend on how many rows come with it (prefill in chunks gives the
// same numbers as prefill at once), nor on the thread split, nor on the weight layout.
TEST(MatMulAmx, RowResultsIndependentOfBatch) {
  SKIP_WITHOUT_AMX();
  for (GgmlType t : {GgmlType::kQ4_0, GgmlType::kQ6_K, GgmlType::kF16}) {
    const Problem p = MakeMatMulProblem(t, 40, 1024, 100, 11);
    const std::vector<float> all = RunAmx(p.weight, p.x.data(), p.m);
    for (int64_t m : {1, 2, 17, 33}) {
      const std::vector<float> part = RunAmx(p.weight, p.x.data(), m);
      for (size_t i = 0; i < part.size(); ++i)
        ASSERT_EQ(part[i], all[i]) << TypeName(t) << " m " << m << " at " << i;
    }
  }
}

// Many rows of long inputs run in K chunks with C stored to y and reloaded between them; few
// rows run the whole row at once. The results are the same bit for bit, and within the bound.
TEST(MatMulAmx, KChunksEqualWholeRows) {
  SKIP_WITHOUT_AMX();
  for (GgmlType t : {GgmlType::kQ8_0, GgmlType::kQ5_K, GgmlType::kBF16, GgmlType::kF16}) {
    // 100 x 4096 bf16 = 800 KiB: K chunks
    const Problem p = MakeMatMulProblem(t, 17, 4096, 100, 13);
    const std::vector<float> chunked = RunAmx(p.weight, p.x.data(), p.m);
    CheckBound(p, chunked, "amx k-chunks");
    const std::vector<float> whole = RunAmx(p.weight, p.x.data(), 3);
    for (size_t i = 0; i < whole.size(); ++i)
      ASSERT_EQ(whole[i], chunked[i]) << TypeName(t) << " at " << i;
    if (t != GgmlType::kF16) continue;
    // Packed F16 (split panels from the packed tiles, their source prefetched and the next
    // pair converted between the tile steps): the same bits.
    AlignedBuffer buf = AllocateAligned(PackedBytes(t, p.rows, p.cols));
    PackWeight(p.weight, buf.get(), nullptr);
    Weight packed = p.weight;
    packed.packed = buf.get();
    const std::vector<float> from_packed = RunAmx(packed, p.x.data(), p.m);
    for (size_t i = 0; i < chunked.size(); ++i)
      ASSERT_EQ(from_packed[i], chunked[i]) << "packed F16 at " << i;
  }
}

// 1100 weight rows x 528 rows of 4096 inputs: two K chunks (2048 each), three row chunks
// (2 x 256 + 16) and two groups of weight tiles accumulated in the compact buffer (64 tiles
// and 5 at 256 rows): the rows of the first and the last row chunk equal calls that run whole
// rows at once. F16 (the split) over 1024 inputs: two K chunks of 512 and three row chunks
// (2 x 256 + 16).
TEST(MatMulAmx, AccumulationGroupsAndRowChunks) {
  SKIP_WITHOUT_AMX();
  for (const auto& [t, rows, cols] : {std::tuple{GgmlType::kQ4_0, int64_t{1100}, int64_t{4096}},
                                      std::tuple{GgmlType::kF16, int64_t{40}, int64_t{1024}}}) {
    const int64_t m = 528;
    const Problem p = MakeMatMulProblem(t, rows, cols, m, 17);
    const std::vector<float> all = RunAmx(p.weight, p.x.data(), p.m);
    const std::vector<float> head = RunAmx(p.weight, p.x.data(), 3);
    for (size_t i = 0; i < head.size(); ++i)
      ASSERT_EQ(head[i], all[i]) << TypeName(t) << " at " << i;
    const int64_t last = m - 16;
    const std::vector<float> tail = RunAmx(p.weight, p.x.data() + last * p.cols, 16);
    for (size_t i = 0; i < tail.size(); ++i)
      ASSERT_EQ(tail[i], all[last * p.rows + i]) << TypeName(t) << " at " << i;
  }
}

TEST(MatMulAmx, ThreadedEqualsSingleThreaded) {
  SKIP_WITHOUT_AMX();
  ThreadPool pool(2);
  for (GgmlType t : {GgmlType::kQ4_0, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kF32}) {
    const Problem p = MakeMatMulProblem(t, 200, 512, 37, 5);
    const std::vector<float> a = RunAmx(p.weight, p.x.data(), p.m);
    const std::vector<float> b = RunAmx(p.weight, p.x.data(), p.m, &pool);
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << TypeName(t) << " at " << i;
  }
}

TEST(MatMulAmx, PackedEqualsUnpacked) {
  SKIP_WITHOUT_AMX();
  for (GgmlType t :
       {GgmlType::kQ4_0, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kF16}) {
    ASSERT_TRUE(HasPackedLayout(t));
    const Problem p = MakeMatMulProblem(t, 37, 1024, 20, 3);
    AlignedBuffer buf = AllocateAligned(PackedBytes(t, p.rows, p.cols));
    PackWeight(p.weight, buf.get(), nullptr);
    Weight packed = p.weight;
    packed.packed = buf.get();
    const std::vector<float> a = RunAmx(p.weight, p.x.data(), p.m);
    const std::vector<float> b = RunAmx(packed, p.x.data(), p.m);
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << TypeName(t) << " at " << i;
    CheckBound(p, b, "amx packed");
  }
}

// MatMulMulti on the AMX path: mixed types in one pass (F16 with the split activations
// beside the plain ones), equal to one call per weight.
TEST(MatMulAmx, MultiEqualsSeparateCalls) {
  SKIP_WITHOUT_AMX();
  ThreadPool pool(2);
  const int64_t m = 21;
  Problem ps[3] = {MakeMatMulProblem(GgmlType::kQ4_K, 64, 512, m, 1),
                   MakeMatMulProblem(GgmlType::kF16, 16, 512, m, 2),
                   MakeMatMulProblem(GgmlType::kQ8_0, 35, 512, m, 3)};
  for (ThreadPool* pl : {static_cast<ThreadPool*>(nullptr), &pool}) {
    const Weight* ws[3];
    std::vector<float> multi[3];
    float* ys[3];
    for (int i = 0; i < 3; ++i) {
      ws[i] = &ps[i].weight;
      multi[i].assign(m * ps[i].rows, NAN);
      ys[i] = multi[i].data();
    }
    internal::MatMulMultiAmx(ws, ps[0].x.data(), m, ys, pl);
    for (int i = 0; i < 3; ++i) {
      const std::vector<float> sep = RunAmx(ps[i].weight, ps[0].x.data(), m);
      for (size_t j = 0; j < sep.size(); ++j)
        ASSERT_EQ(sep[j], multi[i][j]) << TypeName(ps[i].type) << " weight " << i << " at " << j;
    }
  }
}

// The split's structure, exactly: small integers whose products and sums f32 holds exactly
// (|x|, |w| < 512, 9 significant bits, so lo parts are 0, +-1 or +-2; each activation row has
// at most 18 nonzero inputs, so at most 54 terms of magnitude < 2^18 and every partial sum is
// an integer below 2^24), so y must equal sum_k (h_x h_w + l_x h_w + h_x l_w) computed in
// double: a missing or misplaced lo term, or a wrong lo offset, changes the value. Odd cols
// (20, 70: three 32-steps), a partial weight tile (19 rows) and a partial activation tile.
TEST(MatMulAmx, SplitTermsExactOnIntegers) {
  SKIP_WITHOUT_AMX();
  for (GgmlType t : {GgmlType::kF32, GgmlType::kF16}) {
    for (int64_t cols : {20, 70}) {
      const int64_t rows = 19, m = 17;
      std::mt19937 rng(static_cast<uint32_t>(cols));
      std::uniform_int_distribution<int> d(-511, 511);
      std::vector<float> wf(rows * cols), x(m * cols);
      for (float& v : wf) v = static_cast<float>(d(rng));
      for (int64_t i = 0; i < m; ++i)
        for (int64_t k = 0; k < cols; ++k)
          x[i * cols + k] = (k + i) % 4 == 0 ? static_cast<float>(d(rng)) : 0.0f;
      std::vector<uint8_t> w(RowBytes(t, cols) * rows);
      for (int64_t r = 0; r < rows; ++r)
        QuantizeRow(t, wf.data() + r * cols, w.data() + r * RowBytes(t, cols), cols);
      const Weight weight{t, rows, cols, w.data(), RowBytes(t, cols)};
      const std::vector<float> y = RunAmx(weight, x.data(), m);
      auto split = [](float v, double* h, double* l) {
        *h = Bf16ToF32(F32ToBf16(v));
        *l = Bf16ToF32(F32ToBf16(v - static_cast<float>(*h)));
      };
      int64_t lo_terms = 0;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < rows; ++j) {
          double want = 0, exact = 0;
          for (int64_t k = 0; k < cols; ++k) {
            double xh, xl, wh, wl;
            split(x[i * cols + k], &xh, &xl);
            split(wf[j * cols + k], &wh, &wl);
            want += xh * wh + xl * wh + xh * wl;
            exact += double{x[i * cols + k]} * wf[j * cols + k];
            lo_terms += (xl != 0) + (wl != 0);
          }
          ASSERT_EQ(double{y[i * rows + j]}, want)
              << TypeName(t) << " cols " << cols << " row " << i << " col " << j
              << " (x.w = " << exact << ")";
        }
      }
      ASSERT_GT(lo_terms, 0) << "the data must have lo parts";
    }
  }
}

// MatMul at the default level takes the AMX path from AmxMinRows(type) rows on, and the
// AVX-512 kernels below it.
TEST(MatMulAmx, DispatchByRowCount) {
  SKIP_WITHOUT_AMX();
  if (BestSimdLevel() < SimdLevel::kAmx) GTEST_SKIP() << "TACHYON_CPU caps the level below amx";
  for (GgmlType t : {GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kBF16, GgmlType::kF16}) {
    const int64_t threshold = internal::AmxMinRows(t);
    ASSERT_GE(threshold, 2) << "m = 1 stays on the decode kernels";
    for (int64_t m : {threshold - 1, threshold}) {
      const Problem p = MakeMatMulProblem(t, 33, 512, m, 9);
      std::vector<float> y(m * p.rows), expect(m * p.rows);
      MatMul(p.weight, p.x.data(), m, y.data(), nullptr);
      if (m >= threshold) {
        expect = RunAmx(p.weight, p.x.data(), m);
      } else {
        MatMulAtLevel(SimdLevel::kAvx512, p.weight, p.x.data(), m, expect.data(), nullptr);
      }
      for (size_t i = 0; i < y.size(); ++i)
        ASSERT_EQ(y[i], expect[i]) << TypeName(t) << " m " << m << " at " << i;
    }
  }
}

}  // namespace
}  // namespace tachyon::kernels
