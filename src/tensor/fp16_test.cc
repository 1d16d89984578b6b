#include "tensor/fp16.h"

#include <cmath>

#include <gtest/gtest.h>

#include "tensor/dtype.h"
#include "tensor/quant_blocks.h"

namespace tachyon {
namespace {

TEST(Fp16, KnownValues) {
  EXPECT_EQ(Fp16ToF32(0x3C00), 1.0f);
  EXPECT_EQ(Fp16ToF32(0xC000), -2.0f);
  EXPECT_EQ(Fp16ToF32(0x7BFF), 65504.0f);
  EXPECT_EQ(Fp16ToF32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(Fp16ToF32(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_TRUE(std::isinf(Fp16ToF32(0x7C00)));
  EXPECT_TRUE(std::isnan(Fp16ToF32(0x7E00)));
  EXPECT_EQ(F32ToFp16(1.0f), 0x3C00);
  EXPECT_EQ(F32ToFp16(-2.0f), 0xC000);
  EXPECT_EQ(F32ToFp16(65504.0f), 0x7BFF);
  EXPECT_EQ(F32ToFp16(65520.0f), 0x7C00);  // rounds up to infinity
  EXPECT_EQ(F32ToFp16(1e-9f), 0x0000);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0).
  EXPECT_EQ(F32ToFp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  EXPECT_EQ(F32ToFp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  // Halfway between subnormals 1 and 2 (x 2^-24): ties to even (2).
  EXPECT_EQ(F32ToFp16(1.5f * std::ldexp(1.0f, -24)), 0x0002);
  EXPECT_EQ(F32ToFp16(0.5f * std::ldexp(1.0f, -24)), 0x0000);
  EXPECT_EQ(F32ToFp16(0.51f * std::ldexp(1.0f, -24)), 0x0001);
}

TEST(Fp16, RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = Fp16ToF32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Fp16ToF32(F32ToFp16(f))));
      continue;
    }
    ASSERT_EQ(F32ToFp16(f), h) << h;
  }
}

TEST(Fp16, RoundsToNearest) {
  // Every float between two adjacent halves maps to the nearer one.
  for (uint32_t h = 0x0001; h < 0x7BFF; h += 37) {
    const float a = Fp16ToF32(static_cast<uint16_t>(h));
    const float b = Fp16ToF32(static_cast<uint16_t>(h + 1));
    EXPECT_EQ(F32ToFp16(a + (b - a) * 0.25f), h);
    EXPECT_EQ(F32ToFp16(a + (b - a) * 0.75f), h + 1);
  }
}

TEST(Bf16, Conversions) {
  EXPECT_EQ(Bf16ToF32(0x3F80), 1.0f);
  EXPECT_EQ(F32ToBf16(1.0f), 0x3F80);
  EXPECT_EQ(F32ToBf16(-3.0f), 0xC040);
  // 1 + 2^-8 is halfway: ties to even (1.0); 1 + 3 * 2^-8 ties up to 1 + 2^-6.
  EXPECT_EQ(F32ToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  EXPECT_EQ(F32ToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(NAN))));
  for (uint32_t b = 0; b < 65536; b += 7) {
    const float f = Bf16ToF32(static_cast<uint16_t>(b));
    if (!std::isnan(f)) {
      ASSERT_EQ(F32ToBf16(f), b);
    }
  }
}

TEST(QuantBlocks, SizesMatchTypeTable) {
  struct Case {
    GgmlType t;
    size_t size;
  } cases[] = {{GgmlType::kQ4_0, sizeof(BlockQ4_0)}, {GgmlType::kQ4_1, sizeof(BlockQ4_1)},
               {GgmlType::kQ5_0, sizeof(BlockQ5_0)}, {GgmlType::kQ5_1, sizeof(BlockQ5_1)},
               {GgmlType::kQ8_0, sizeof(BlockQ8_0)}, {GgmlType::kQ8_1, sizeof(BlockQ8_1)},
               {GgmlType::kQ2_K, sizeof(BlockQ2_K)}, {GgmlType::kQ3_K, sizeof(BlockQ3_K)},
               {GgmlType::kQ4_K, sizeof(BlockQ4_K)}, {GgmlType::kQ5_K, sizeof(BlockQ5_K)},
               {GgmlType::kQ6_K, sizeof(BlockQ6_K)}, {GgmlType::kQ8_K, sizeof(BlockQ8_K)}};
  for (const Case& c : cases) {
    EXPECT_EQ(GetTypeTraits(static_cast<uint32_t>(c.t))->type_size, c.size) << TypeName(c.t);
  }
}

TEST(QuantBlocks, UnpackScaleMinK4) {
  // Scales/mins 0..7 chosen with high bits set where the packing splits them.
  const uint8_t sc[8] = {1, 62, 33, 7, 63, 17, 48, 35};
  const uint8_t mn[8] = {5, 40, 0, 63, 21, 60, 9, 50};
  uint8_t s[12] = {};
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
  }
  for (int j = 0; j < 8; ++j) {
    uint8_t a, b;
    UnpackScaleMinK4(s, j, &a, &b);
    EXPECT_EQ(a, sc[j]) << j;
    EXPECT_EQ(b, mn[j]) << j;
  }
}

}  // namespace
}  // namespace tachyon
