// Row-wise ops: every SIMD level against the scalar references over odd sizes, plus
// hand-checked values of the references.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/ops.h"
#include "kernels/ops_internal.h"
#include "kernels/testing/kernel_testing.h"
#include "util/cpu_features.h"

namespace tachyon::kernels {
namespace {

const int64_t kSizes[] = {1, 2, 3, 7, 15, 16, 17, 31, 33, 127, 129, 1023};

void ExpectClose(const std::vector<float>& a, const std::vector<float>& b, float rel, float abs,
                 const char* what, int64_t n) {
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], b[i], abs + rel * std::fabs(b[i])) << what << " n " << n << " i " << i;
  }
}

TEST(Ops, RmsNormVariants) {
  for (SimdLevel l : SimdLevelsUpTo(SimdLevel::kAvx512)) {
    const auto& ops = internal::OpsAtLevel(l);
    for (int64_t n : kSizes) {
      const auto x = Randn(3 * n, 1), w = Randn(n, 2);
      std::vector<float> ref(3 * n), out(3 * n);
      RmsNormReference(x.data(), w.data(), ref.data(), 3, n, 1e-5f);
      ops.rms_norm(x.data(), w.data(), out.data(), 3, n, 1e-5f);
      ExpectClose(out, ref, 2e-6f, 1e-7f, SimdLevelName(l), n);
      std::vector<float> inplace = x;  // out may alias x
      ops.rms_norm(inplace.data(), w.data(), inplace.data(), 3, n, 1e-5f);
      ExpectClose(inplace, ref, 2e-6f, 1e-7f, SimdLevelName(l), n);
    }
  }
}

TEST(Ops, AddRmsNormVariants) {
  for (SimdLevel l : SimdLevelsUpTo(SimdLevel::kAvx512)) {
    const auto& ops = internal::OpsAtLevel(l);
    for (int64_t n : kSizes) {
      const auto x0 = Randn(3 * n, 11), d = Randn(3 * n, 12), w = Randn(n, 13);
      std::vector<float> xr = x0, ref(3 * n), xo = x0, out(3 * n);
      AddRmsNormReference(xr.data(), d.data(), w.data(), ref.data(), 3, n, 1e-5f);
      ops.add_rms_norm(xo.data(), d.data(), w.data(), out.data(), 3, n, 1e-5f);
      ExpectClose(xo, xr, 0, 0, SimdLevelName(l), n);  // the residual sum is exact
      ExpectClose(out, ref, 2e-6f, 1e-7f, SimdLevelName(l), n);
      // Same as the unfused pair.
      std::vector<float> sum = x0, sep(3 * n);
      AddInPlaceReference(sum.data(), d.data(), 3 * n);
      RmsNormReference(sum.data(), w.data(), sep.data(), 3, n, 1e-5f);
      ExpectClose(ref, sep, 0, 0, "fused vs separate", n);
    }
  }
}

TEST(Ops, RopeQkMatchesTwoRopes) {
  for (RopeStyle style : {RopeStyle::kAdjacent, RopeStyle::kNeox}) {
    for (int64_t hd : {2, 4, 64, 128}) {
      for (int64_t rot : {hd, hd / 2}) {
        if (rot % 2) continue;
        std::vector<float> inv(rot / 2);
        for (int64_t i = 0; i < rot / 2; ++i) inv[i] = std::pow(10000.0f, -2.0f * i / rot);
        auto q = Randn(4 * hd, 21), k = Randn(2 * hd, 22);
        std::vector<float> qr = q, kr = k;
        RopeReference(qr.data(), 4, hd, rot, 17, inv.data(), style);
        RopeReference(kr.data(), 2, hd, rot, 17, inv.data(), style);
        std::vector<float> qc = q, kc = k, cs(rot);
        RopeQk(q.data(), 4, k.data(), 2, hd, rot, 17, inv.data(), style);
        ExpectClose(q, qr, 1e-6f, 1e-6f, "rope q", hd);
        ExpectClose(k, kr, 1e-6f, 1e-6f, "rope k", hd);
        // With the pairs precomputed (as a forward step shares them across layers): the
        // same bits.
        RopeCosSin(17, rot, inv.data(), cs.data());
        RopeQkCached(qc.data(), 4, kc.data(), 2, hd, rot, cs.data(), style);
        EXPECT_EQ(qc, q);
        EXPECT_EQ(kc, k);
      }
    }
  }
}

TEST(Ops, RmsNormValue) {
  const float x[4] = {1, 2, 3, 4}, w[4] = {1, 1, 2, 0.5f};
  float out[4];
  RmsNorm(x, w, out, 1, 4, 0.0f);
  const float inv = 1.0f / std::sqrt(30.0f / 4);
  EXPECT_NEAR(out[0], 1 * inv, 1e-6);
  EXPECT_NEAR(out[2], 6 * inv, 1e-6);
  EXPECT_NEAR(out[3], 2 * inv, 1e-6);
}

TEST(Ops, SiluMulVariants) {
  for (SimdLevel l : SimdLevelsUpTo(SimdLevel::kAvx512)) {
    const auto& ops = internal::OpsAtLevel(l);
    for (int64_t n : kSizes) {
      auto g = Randn(n, 3, 4.0f);
      if (n > 3) {
        g[0] = -100.0f;  // exp overflow region
        g[1] = 100.0f;
        g[2] = 0.0f;
      }
      const auto u = Randn(n, 4);
      std::vector<float> ref(n), out(n);
      SiluMulReference(g.data(), u.data(), ref.data(), n);
      ops.silu_mul(g.data(), u.data(), out.data(), n);
      ExpectClose(out, ref, 1e-6f, 1e-7f, SimdLevelName(l), n);
    }
  }
}

TEST(Ops, GeluTanhMulVariants) {
  for (SimdLevel l : SimdLevelsUpTo(SimdLevel::kAvx512)) {
    const auto& ops = internal::OpsAtLevel(l);
    for (int64_t n : kSizes) {
      auto g = Randn(n, 6, 4.0f);
      if (n > 4) {
        g[0] = -100.0f;  // exp overflow region: gelu -> -0
        g[1] = 100.0f;   // gelu -> x
        g[2] = 0.0f;
        g[3] = -1e20f;  // the cube overflows
      }
      const auto u = Randn(n, 7);
      std::vector<float> ref(n), out(n);
      GeluTanhMulReference(g.data(), u.data(), ref.data(), n);
      ops.gelu_tanh_mul(g.data(), u.data(), out.data(), n);
      ExpectClose(out, ref, 2e-6f, 1e-7f, SimdLevelName(l), n);
    }
  }
}

TEST(Ops, GeluTanhValues) {
  // gelu_tanh(1) = 0.5 (1 + tanh(sqrt(2/pi) 1.044715)) = 0.8411920; gelu_tanh(-1) = -0.1588080.
  const float g[3] = {1.0f, -1.0f, 2.0f}, u[3] = {1.0f, 1.0f, -0.5f};
  float out[3];
  GeluTanhMul(g, u, out, 3);
  EXPECT_NEAR(out[0], 0.8411920f, 1e-6);
  EXPECT_NEAR(out[1], -0.1588080f, 1e-6);
  EXPECT_NEAR(out[2], -0.5f * 1.9545977f, 1e-6);
  GatedMul(GatedAct::kGeluTanh, g, u, out, 3);
  EXPECT_NEAR(out[0], 0.8411920f, 1e-6);
}

TEST(Ops, SoftmaxVariants) {
  for (SimdLevel l : SimdLevelsUpTo(SimdLevel::kAvx512)) {
    const auto& ops = internal::OpsAtLevel(l);
    for (int64_t n : kSizes) {
      auto x = Randn(n, 5, 10.0f);
      if (n > 2) x[1] = -INFINITY;  // masked position
      std::vector<float> ref = x, out = x;
      SoftmaxReference(ref.data(), n);
      ops.softmax(out.data(), n);
      ExpectClose(out, ref, 1e-5f, 1e-9f, SimdLevelName(l), n);
      double sum = 0;
      for (float v : out) sum += v;
      EXPECT_NEAR(sum, 1.0, 1e-5);
      if (n > 2) {
        EXPECT_EQ(out[1], 0.0f);
      }
    }
  }
}

TEST(Ops, AddAndDotVariants) {
  for (SimdLevel l : SimdLevelsUpTo(SimdLevel::kAvx512)) {
    const auto& ops = internal::OpsAtLevel(l);
    for (int64_t n : kSizes) {
      const auto x = Randn(n, 6), y0 = Randn(n, 7);
      std::vector<float> ref = y0, out = y0;
      AddInPlaceReference(ref.data(), x.data(), n);
      ops.add_in_place(out.data(), x.data(), n);
      ExpectClose(out, ref, 0, 0, SimdLevelName(l), n);
      double mag = 0;
      for (int64_t i = 0; i < n; ++i) mag += std::fabs(x[i] * y0[i]);
      EXPECT_NEAR(ops.dot(x.data(), y0.data(), n), DotReference(x.data(), y0.data(), n), 1e-6 * mag)
          << SimdLevelName(l) << " " << n;
    }
  }
}

TEST(Ops, RopeMatchesReferenceBothStyles) {
  const int64_t heads = 3, hd = 64;
  for (RopeStyle style : {RopeStyle::kAdjacent, RopeStyle::kNeox}) {
    for (int64_t rot : {hd, int64_t{32}}) {
      std::vector<float> inv(rot / 2);
      for (int64_t i = 0; i < rot / 2; ++i) inv[i] = std::pow(10000.0f, -2.0f * i / rot);
      for (int64_t pos : {0, 1, 7, 4095}) {
        auto x = Randn(heads * hd, 8);
        std::vector<float> ref = x;
        RopeReference(ref.data(), heads, hd, rot, pos, inv.data(), style);
        Rope(x.data(), heads, hd, rot, pos, inv.data(), style);
        ExpectClose(x, ref, 1e-6f, 1e-6f, "rope", pos);
      }
    }
  }
}

// The rotation of every level against RopeReference (pairs from RopeCosSin), both styles,
// rot_dim with and without SIMD tails, dims past rot_dim untouched.
TEST(Ops, RopeRotateVariants) {
  for (SimdLevel l : SimdLevelsUpTo(SimdLevel::kAvx512)) {
    const auto& ops = internal::OpsAtLevel(l);
    for (RopeStyle style : {RopeStyle::kAdjacent, RopeStyle::kNeox}) {
      for (int64_t rot : {2, 6, 20, 34, 64, 128}) {
        const int64_t hd = rot + 6, heads = 3, pos = 1234;
        std::vector<float> inv(rot / 2), cs(rot);
        for (int64_t i = 0; i < rot / 2; ++i) inv[i] = std::pow(10000.0f, -2.0f * i / rot);
        auto x = Randn(heads * hd, 9);
        std::vector<float> ref = x;
        RopeReference(ref.data(), heads, hd, rot, pos, inv.data(), style);
        RopeCosSin(pos, rot, inv.data(), cs.data());
        ops.rope_rotate(x.data(), heads, hd, rot / 2, cs.data(), style);
        ExpectClose(x, ref, 1e-6f, 1e-6f, SimdLevelName(l), rot);
        for (int64_t h = 0; h < heads; ++h) {
          for (int64_t d = rot; d < hd; ++d) ASSERT_EQ(x[h * hd + d], ref[h * hd + d]);
        }
      }
    }
  }
}

TEST(Ops, RopeReferenceValues) {
  // One head of dim 4, pos 1, inv_freq {1, 0.5}: adjacent rotates (0,1) by 1 rad and (2,3)
  // by 0.5 rad; NEOX rotates (0,2) by 1 and (1,3) by 0.5.
  const float inv[2] = {1.0f, 0.5f};
  float a[4] = {1, 0, 1, 0};
  RopeReference(a, 1, 4, 4, 1, inv, RopeStyle::kAdjacent);
  EXPECT_NEAR(a[0], std::cos(1.0), 1e-6);
  EXPECT_NEAR(a[1], std::sin(1.0), 1e-6);
  EXPECT_NEAR(a[2], std::cos(0.5), 1e-6);
  EXPECT_NEAR(a[3], std::sin(0.5), 1e-6);
  float b[4] = {1, 1, 0, 0};
  RopeReference(b, 1, 4, 4, 1, inv, RopeStyle::kNeox);
  EXPECT_NEAR(b[0], std::cos(1.0), 1e-6);
  EXPECT_NEAR(b[2], std::sin(1.0), 1e-6);
  EXPECT_NEAR(b[1], std::cos(0.5), 1e-6);
  EXPECT_NEAR(b[3], std::sin(0.5), 1e-6);
  // Dims past rot_dim are untouched.
  float c[4] = {1, 2, 3, 4};
  RopeReference(c, 1, 4, 2, 5, inv, RopeStyle::kNeox);
  EXPECT_EQ(c[2], 3.0f);
  EXPECT_EQ(c[3], 4.0f);
}

}  // namespace
}  // namespace tachyon::kernels
