// Dequantizers on hand-built blocks: each test picks codes and scales, packs them by the
// published layout (written out here, independently of the quantizer), and checks every
// element against the format's formula.
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/matmul.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"

namespace tachyon::kernels {
namespace {

std::mt19937 rng(1234);
int Rand(int lo, int hi) {
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

template <typename B>
std::vector<float> Deq(GgmlType t, const B& b, int n) {
  std::vector<float> out(n);
  DequantizeRow(t, &b, out.data(), n);
  return out;
}

TEST(Dequantize, Q4_0NibbleOrder) {
  BlockQ4_0 b;
  b.d = F32ToFp16(0.5f);
  int q[32];
  for (int& v : q) v = Rand(0, 15);
  for (int i = 0; i < 16; ++i) b.qs[i] = static_cast<uint8_t>(q[i] | (q[i + 16] << 4));
  auto y = Deq(GgmlType::kQ4_0, b, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], 0.5f * (q[i] - 8)) << i;
  // Byte 0 = 0x21: element 0 is 1 - 8, element 16 is 2 - 8.
  b.qs[0] = 0x21;
  y = Deq(GgmlType::kQ4_0, b, 32);
  EXPECT_EQ(y[0], -3.5f);
  EXPECT_EQ(y[16], -3.0f);
}

TEST(Dequantize, Q4_1) {
  BlockQ4_1 b;
  b.d = F32ToFp16(0.25f);
  b.m = F32ToFp16(-1.5f);
  int q[32];
  for (int& v : q) v = Rand(0, 15);
  for (int i = 0; i < 16; ++i) b.qs[i] = static_cast<uint8_t>(q[i] | (q[i + 16] << 4));
  auto y = Deq(GgmlType::kQ4_1, b, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], 0.25f * q[i] - 1.5f) << i;
}

template <typename B>
void PackQ5(const int* q, B* b) {
  uint32_t qh = 0;
  for (int i = 0; i < 16; ++i)
    b->qs[i] = static_cast<uint8_t>((q[i] & 15) | ((q[i + 16] & 15) << 4));
  for (int i = 0; i < 32; ++i) qh |= static_cast<uint32_t>(q[i] >> 4) << i;
  b->qh[0] = qh & 0xFF;  // little-endian
  b->qh[1] = (qh >> 8) & 0xFF;
  b->qh[2] = (qh >> 16) & 0xFF;
  b->qh[3] = qh >> 24;
}

TEST(Dequantize, Q5_0HighBits) {
  BlockQ5_0 b;
  b.d = F32ToFp16(2.0f);
  int q[32];
  for (int& v : q) v = Rand(0, 31);
  q[0] = 31;
  q[31] = 16;
  PackQ5(q, &b);
  auto y = Deq(GgmlType::kQ5_0, b, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], 2.0f * (q[i] - 16)) << i;
}

TEST(Dequantize, Q5_1) {
  BlockQ5_1 b;
  b.d = F32ToFp16(0.125f);
  b.m = F32ToFp16(3.0f);
  int q[32];
  for (int& v : q) v = Rand(0, 31);
  PackQ5(q, &b);
  auto y = Deq(GgmlType::kQ5_1, b, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], 0.125f * q[i] + 3.0f) << i;
}

TEST(Dequantize, Q8_0) {
  BlockQ8_0 b;
  b.d = F32ToFp16(0.03125f);
  for (int i = 0; i < 32; ++i) b.qs[i] = static_cast<int8_t>(Rand(-128, 127));
  auto y = Deq(GgmlType::kQ8_0, b, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], 0.03125f * b.qs[i]) << i;
}

// Q2_K: element e of the 256: half h = e / 128, within it group g = (e % 128) / 32 uses bits
// 2g..2g+1 of qs[32 h + e % 32]; sub-block e / 16 has scales byte (scale | min << 4).
TEST(Dequantize, Q2_K) {
  BlockQ2_K b{};
  b.d = F32ToFp16(0.5f);
  b.dmin = F32ToFp16(0.25f);
  int q[256], sc[16], mn[16];
  for (int j = 0; j < 16; ++j) {
    sc[j] = Rand(0, 15);
    mn[j] = Rand(0, 15);
    b.scales[j] = static_cast<uint8_t>(sc[j] | (mn[j] << 4));
  }
  for (int e = 0; e < 256; ++e) {
    q[e] = Rand(0, 3);
    b.qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>(q[e] << (2 * ((e % 128) / 32)));
  }
  auto y = Deq(GgmlType::kQ2_K, b, 256);
  for (int e = 0; e < 256; ++e) {
    EXPECT_EQ(y[e], 0.5f * sc[e / 16] * q[e] - 0.25f * mn[e / 16]) << e;
  }
}

// Q3_K: 2 low bits as Q2_K; hmask bit (e / 32) of byte hmask[e % 32] is the third bit; a
// clear bit means q - 4. Scales: 6-bit, low nibbles in bytes 0..7 (sub-blocks 0..7 low
// nibble, 8..15 high nibble), top 2 bits of sub-block j at bits 2 (j / 4) of byte 8 + j % 4.
TEST(Dequantize, Q3_K) {
  BlockQ3_K b{};
  b.d = F32ToFp16(0.75f);
  int q[256], sc[16];
  for (int j = 0; j < 16; ++j) sc[j] = Rand(-32, 31);
  sc[15] = -32;  // extremes
  sc[0] = 31;
  for (int j = 0; j < 16; ++j) {
    const int u = sc[j] + 32;
    b.scales[j % 8] |= static_cast<uint8_t>((u & 15) << (j < 8 ? 0 : 4));
    b.scales[8 + j % 4] |= static_cast<uint8_t>((u >> 4) << (2 * (j / 4)));
  }
  for (int e = 0; e < 256; ++e) {
    q[e] = Rand(-4, 3);
    const int u = q[e] + 4;
    b.qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>((u & 3) << (2 * ((e % 128) / 32)));
    b.hmask[e % 32] |= static_cast<uint8_t>((u >> 2) << (e / 32));
  }
  auto y = Deq(GgmlType::kQ3_K, b, 256);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.75f * sc[e / 16] * q[e]) << e;
}

// Q4_K / Q5_K: 64-element chunk c uses qs[32 c + l]: low nibble = element 64 c + l, high
// nibble = 64 c + 32 + l; sub-blocks of 32 with 6-bit scale/min (packing tested in tensor/).
void PackK4Scales(const int* sc, const int* mn, uint8_t* s) {
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
  }
}

TEST(Dequantize, Q4_K) {
  BlockQ4_K b{};
  b.d = F32ToFp16(0.0625f);
  b.dmin = F32ToFp16(0.5f);
  int q[256], sc[8], mn[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = Rand(0, 63);
    mn[j] = Rand(0, 63);
  }
  PackK4Scales(sc, mn, b.scales);
  for (int e = 0; e < 256; ++e) {
    q[e] = Rand(0, 15);
    b.qs[32 * (e / 64) + e % 32] |= static_cast<uint8_t>(q[e] << (((e / 32) & 1) ? 4 : 0));
  }
  auto y = Deq(GgmlType::kQ4_K, b, 256);
  for (int e = 0; e < 256; ++e) {
    EXPECT_EQ(y[e], 0.0625f * sc[e / 32] * q[e] - 0.5f * mn[e / 32]) << e;
  }
}

TEST(Dequantize, Q5_K) {
  BlockQ5_K b{};
  b.d = F32ToFp16(0.0625f);
  b.dmin = F32ToFp16(0.25f);
  int q[256], sc[8], mn[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = Rand(0, 63);
    mn[j] = Rand(0, 63);
  }
  PackK4Scales(sc, mn, b.scales);
  for (int e = 0; e < 256; ++e) {
    q[e] = Rand(0, 31);
    b.qs[32 * (e / 64) + e % 32] |= static_cast<uint8_t>((q[e] & 15) << (((e / 32) & 1) ? 4 : 0));
    b.qh[e % 32] |= static_cast<uint8_t>((q[e] >> 4) << (e / 32));
  }
  auto y = Deq(GgmlType::kQ5_K, b, 256);
  for (int e = 0; e < 256; ++e) {
    EXPECT_EQ(y[e], 0.0625f * sc[e / 32] * q[e] - 0.25f * mn[e / 32]) << e;
  }
}

// Q6_K: half h (128 elements) uses ql[64 h ..], qh[32 h ..]; within it, element 32 g + l
// takes the low nibble (g = 0, 1) or high nibble (g = 2, 3) of ql[64 h + 32 (g & 1) + l] and
// bits 2g..2g+1 of qh[32 h + l]; value = d * scales[e / 16] * (q - 32).
TEST(Dequantize, Q6_K) {
  BlockQ6_K b{};
  b.d = F32ToFp16(0.01f);
  const float d = Fp16ToF32(b.d);
  int q[256];
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(Rand(-128, 127));
  for (int e = 0; e < 256; ++e) {
    q[e] = Rand(0, 63);
    const int h = e / 128, g = (e % 128) / 32, l = e % 32;
    b.ql[64 * h + 32 * (g & 1) + l] |= static_cast<uint8_t>((q[e] & 15) << (g >= 2 ? 4 : 0));
    b.qh[32 * h + l] |= static_cast<uint8_t>((q[e] >> 4) << (2 * g));
  }
  auto y = Deq(GgmlType::kQ6_K, b, 256);
  for (int e = 0; e < 256; ++e) {
    EXPECT_EQ(y[e], d * static_cast<float>(b.scales[e / 16]) * static_cast<float>(q[e] - 32)) << e;
  }
}

TEST(Dequantize, FloatTypes) {
  const float x[4] = {1.0f, -2.5f, 1e-3f, 65504.0f};
  uint16_t h[4], bf[4];
  for (int i = 0; i < 4; ++i) {
    h[i] = F32ToFp16(x[i]);
    bf[i] = F32ToBf16(x[i]);
  }
  float y[4];
  DequantizeRow(GgmlType::kF16, h, y, 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y[i], Fp16ToF32(h[i]));
  DequantizeRow(GgmlType::kBF16, bf, y, 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y[i], Bf16ToF32(bf[i]));
  DequantizeRow(GgmlType::kF32, x, y, 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y[i], x[i]);
}

}  // namespace
}  // namespace tachyon::kernels
