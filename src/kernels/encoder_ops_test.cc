// Encoder ops: every SIMD level against the scalar references over odd sizes, plus
// hand-checked values.
#include "kernels/encoder_ops.h"

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/testing/kernel_testing.h"

namespace tachyon::kernels {
namespace {

const int64_t kSizes[] = {1, 2, 3, 7, 15, 16, 17, 31, 33, 127, 129, 1023};

TEST(EncoderOps, LayerNormVariants) {
  for (SimdLevel l : SimdLevelsUpTo(SimdLevel::kAvx2)) {
    const auto& ops = internal::EncoderOpsAtLevel(l);
    for (int64_t n : kSizes) {
      // A row offset far from 0 checks the mean is removed before the variance.
      const auto x = Randn(3 * n, 1, 2.0f, 5.0f), w = Randn(n, 2, 1.0f), b = Randn(n, 3, 1.0f);
      std::vector<float> ref(3 * n), out(3 * n);
      LayerNormReference(x.data(), w.data(), b.data(), ref.data(), 3, n, 1e-12f);
      ops.layer_norm(x.data(), w.data(), b.data(), out.data(), 3, n, 1e-12f);
      for (int64_t i = 0; i < 3 * n; ++i) {
        ASSERT_NEAR(out[i], ref[i], 2e-5f * (1 + std::fabs(ref[i])))
            << SimdLevelName(l) << " n " << n << " i " << i;
      }
      std::vector<float> inplace = x;  // out may alias x
      ops.layer_norm(inplace.data(), w.data(), b.data(), inplace.data(), 3, n, 1e-12f);
      for (int64_t i = 0; i < 3 * n; ++i) ASSERT_FLOAT_EQ(inplace[i], out[i]);
    }
  }
}

TEST(EncoderOps, LayerNormValue) {
  const float x[4] = {1, 2, 3, 6}, w[4] = {1, 2, 1, 1}, b[4] = {0, 0, 1, -1};
  float out[4];
  LayerNorm(x, w, b, out, 1, 4, 0.0f);
  const float sd = std::sqrt((4.0f + 1 + 0 + 9) / 4);  // mean 3
  EXPECT_NEAR(out[0], -2 / sd, 1e-6);
  EXPECT_NEAR(out[1], -2 / sd, 1e-6);
  EXPECT_NEAR(out[2], 1.0f, 1e-6);
  EXPECT_NEAR(out[3], 3 / sd - 1, 1e-6);
}

TEST(EncoderOps, GeluErfVariants) {
  for (SimdLevel l : SimdLevelsUpTo(SimdLevel::kAvx2)) {
    const auto& ops = internal::EncoderOpsAtLevel(l);
    for (int64_t n : kSizes) {
      auto x = Randn(n, 4, 3.0f);
      if (n > 3) {
        x[0] = -30.0f;  // erf saturates
        x[1] = 30.0f;
        x[2] = 0.0f;
      }
      std::vector<float> ref(n), out(n);
      GeluErfReference(x.data(), ref.data(), n);
      ops.gelu_erf(x.data(), out.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_NEAR(out[i], ref[i], 1e-6f * (1 + std::fabs(x[i])))
            << SimdLevelName(l) << " n " << n << " x " << x[i];
      }
    }
  }
}

TEST(EncoderOps, GeluErfValue) {
  const float x[3] = {0.0f, 1.0f, -1.0f};
  float out[3];
  GeluErf(x, out, 3);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_NEAR(out[1], 0.8413447460685429f, 1e-6);   // Φ(1)
  EXPECT_NEAR(out[2], -0.1586552539314571f, 1e-6);  // -(1 - Φ(1))
}

}  // namespace
}  // namespace tachyon::kernels
