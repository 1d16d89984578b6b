// The compute-peak loops (kernels/peak.h): each returns the closed form of its chains, so a
// loop that skipped or merged work would show; the measurement finds a rate where SIMD exists.
#include "kernels/peak.h"

#include <gtest/gtest.h>

#include "util/cpu_features.h"

namespace tachyon::kernels {
namespace {

TEST(ComputePeak, Avx512LoopDoesEveryIteration) {
  const CpuFeatures& f = DetectedCpuFeatures();
  if (BestSimdLevel() < SimdLevel::kAvx512 || !f.avx512vnni) GTEST_SKIP() << "no AVX-512 VNNI";
  // Chain i starts at i in every lane and adds 4 x (3 x -2) per iteration; 16 lanes summed.
  for (int64_t iters : {0, 1, 7, 1000}) {
    EXPECT_EQ(internal::PeakInt8Avx512(iters), 16 * (66 - 12 * 24 * iters)) << iters;
  }
}

TEST(ComputePeak, Avx2LoopDoesEveryIteration) {
  if (BestSimdLevel() < SimdLevel::kAvx2) GTEST_SKIP() << "no AVX2";
  // Chain i adds 2 x 2 x (3 + i) x -2 per lane and iteration; lanes 0 and 7 of the sum.
  for (int64_t iters : {0, 1, 7, 1000}) {
    EXPECT_EQ(internal::PeakInt8Avx2(iters), 2 * (15 - 8 * (6 * 3 + 15) * iters)) << iters;
  }
}

TEST(ComputePeak, MeasuresARateOnEveryThread) {
  if (BestSimdLevel() < SimdLevel::kAvx2) GTEST_SKIP() << "no SIMD int8 dot product";
  ThreadPool pool(2);
  const ComputePeak p = MeasureComputePeak(&pool, /*runs=*/2, /*ms_per_run=*/2);
  EXPECT_GT(p.int8_gops, 0);
  EXPECT_NE(p.int8_instr, "none");
  const ComputePeak single = MeasureComputePeak(nullptr, 2, 2);
  EXPECT_GT(single.int8_gops, 0);
}

}  // namespace
}  // namespace tachyon::kernels
