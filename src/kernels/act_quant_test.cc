// Activation converters: every SIMD level writes exactly the bytes of the scalar one, and
// the kQ8_32 layout (groups of 4 blocks, padding zeroed) decodes back to the input.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/matmul_internal.h"
#include "kernels/testing/kernel_testing.h"
#include "util/cpu_features.h"

namespace tachyon::kernels::internal {
namespace {

// N(0, 2) values with the second 32-element block (when there is one) all zero.
std::vector<float> RandnWithZeroBlock(int64_t n, uint32_t seed) {
  std::vector<float> v = Randn(n, seed, 2.0f);
  if (n >= 64) {
    for (int j = 32; j < 64; ++j) v[j] = 0.0f;  // an all-zero block
  }
  return v;
}

TEST(ActQuant, LevelsWriteIdenticalBytes) {
  const auto& cpu = DetectedCpuFeatures();
  for (ActFormat f : {ActFormat::kBF16, ActFormat::kQ8_32, ActFormat::kQ8_256}) {
    const int64_t unit = f == ActFormat::kQ8_256 ? 256 : 32;
    for (int64_t n : {1, 2, 3, 4, 5, 7, 9, 33}) {
      const int64_t k = n * unit;
      const auto x = RandnWithZeroBlock(k, static_cast<uint32_t>(n));
      const size_t bytes = ActRowBytes(f, k);
      std::vector<uint8_t> ref(bytes, 0xAB), out(bytes, 0xCD);
      QuantizeActScalar(f)(x.data(), k, ref.data());
      std::vector<QuantizeActFn> fns;
      if (cpu.HasAvx2Set()) fns.push_back(QuantizeActAvx2(f));
      if (cpu.HasAvx512Set()) fns.push_back(QuantizeActAvx512(f));
      // Only the meaningful prefix of the row: the format's own size before 64-byte padding.
      size_t used = bytes;
      if (f == ActFormat::kBF16) used = static_cast<size_t>(k) * 2;
      if (f == ActFormat::kQ8_256) used = static_cast<size_t>(k + k / 256 * 4 + k / 16 * 2);
      if (f == ActFormat::kQ8_32) used = static_cast<size_t>(Q8Groups(k) * (256 + 16));
      for (QuantizeActFn fn : fns) {
        std::fill(out.begin(), out.end(), 0xCD);
        fn(x.data(), k, out.data());
        ASSERT_EQ(std::memcmp(ref.data(), out.data(), used), 0)
            << static_cast<int>(f) << " k " << k;
      }
    }
  }
}

TEST(ActQuant, Q8_32LayoutDecodes) {
  for (int64_t nb : {1, 3, 4, 6}) {
    const int64_t k = 32 * nb;
    const auto x = RandnWithZeroBlock(k, 3);
    std::vector<uint8_t> buf(ActRowBytes(ActFormat::kQ8_32, k), 0xFF);
    QuantizeActScalar(ActFormat::kQ8_32)(x.data(), k, buf.data());
    const Q8Row32 v = ViewQ8Row32(buf.data(), k);
    for (int64_t b = 0; b < 4 * Q8Groups(k); ++b) {
      const int8_t* lo = v.qs + 128 * (b / 4) + 16 * (b % 4);
      int sum = 0;
      for (int j = 0; j < 32; ++j) {
        const int q = j < 16 ? lo[j] : lo[64 + j - 16];
        sum += q;
        if (b >= nb) {
          ASSERT_EQ(q, 0);
          continue;
        }
        ASSERT_LE(std::fabs(v.d4[4 * b] * q - x[32 * b + j]), 0.5f * v.d4[4 * b] + 1e-6f);
      }
      for (int j = 0; j < 4; ++j) {
        ASSERT_EQ(v.d4[4 * b + j], v.d4[4 * b]);
        ASSERT_FLOAT_EQ(4.0f * v.s4[4 * b + j], v.d4[4 * b] * static_cast<float>(sum));
      }
      ASSERT_EQ(v.sum[b], sum) << "block " << b;
    }
  }
}

}  // namespace
}  // namespace tachyon::kernels::internal
