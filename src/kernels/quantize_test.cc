// QuantizeRow -> DequantizeRow round trips: error bounds per format, exact cases.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/matmul.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"

namespace tachyon::kernels {
namespace {

struct Bound {
  GgmlType type;
  double max_rel_rms;  // rms(error) / rms(x) for Gaussian data
};

// Bounds sit ~1.3x above what the quantizers reach on N(0, 1) rows; a wrong layout or scale
// lands far above them.
constexpr Bound kBounds[] = {
    {GgmlType::kF16, 3e-4},   {GgmlType::kBF16, 2.2e-3}, {GgmlType::kQ8_0, 0.007},
    {GgmlType::kQ8_1, 0.007}, {GgmlType::kQ8_K, 0.009},  {GgmlType::kQ4_0, 0.11},
    {GgmlType::kQ4_1, 0.10},  {GgmlType::kQ5_0, 0.055},  {GgmlType::kQ5_1, 0.048},
    {GgmlType::kQ2_K, 0.35},  {GgmlType::kQ3_K, 0.19},   {GgmlType::kQ4_K, 0.093},
    {GgmlType::kQ5_K, 0.047}, {GgmlType::kQ6_K, 0.023},
};

double RelRms(GgmlType t, const std::vector<float>& x) {
  const int64_t k = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(RowBytes(t, k));
  QuantizeRow(t, x.data(), q.data(), k);
  std::vector<float> y(x.size());
  DequantizeRow(t, q.data(), y.data(), k);
  double e = 0, s = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    e += (y[i] - x[i]) * (y[i] - x[i]);
    s += x[i] * x[i];
  }
  return std::sqrt(e / s);
}

TEST(Quantize, RoundTripErrorBounds) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(256 * 16);
  for (float& v : x) v = nd(rng);
  for (const Bound& b : kBounds) {
    const double err = RelRms(b.type, x);
    EXPECT_LT(err, b.max_rel_rms) << TypeName(b.type);
    RecordProperty(std::string(TypeName(b.type)), std::to_string(err));
  }
}

TEST(Quantize, ErrorGrowsWithFewerBits) {
  std::mt19937 rng(8);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(256 * 8);
  for (float& v : x) v = nd(rng);
  EXPECT_LT(RelRms(GgmlType::kQ6_K, x), RelRms(GgmlType::kQ5_K, x));
  EXPECT_LT(RelRms(GgmlType::kQ5_K, x), RelRms(GgmlType::kQ4_K, x));
  EXPECT_LT(RelRms(GgmlType::kQ4_K, x), RelRms(GgmlType::kQ3_K, x));
  EXPECT_LT(RelRms(GgmlType::kQ3_K, x), RelRms(GgmlType::kQ2_K, x));
}

TEST(Quantize, ExactlyRepresentableRowsRoundTrip) {
  // Values d * (q - 8) with the extreme -8 d present are exact in Q4_0; zeros stay zero.
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = 0.25f * static_cast<float>((i * 5) % 16 - 8);
  std::vector<uint8_t> q(RowBytes(GgmlType::kQ4_0, 64));
  QuantizeRow(GgmlType::kQ4_0, x.data(), q.data(), 64);
  std::vector<float> y(64);
  DequantizeRow(GgmlType::kQ4_0, q.data(), y.data(), 64);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(y[i], x[i]) << i;
  for (GgmlType t : {GgmlType::kQ4_0, GgmlType::kQ5_1, GgmlType::kQ2_K, GgmlType::kQ3_K,
                     GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ8_K}) {
    std::vector<float> z(256, 0.0f), out(256, 1.0f);
    std::vector<uint8_t> buf(RowBytes(t, 256));
    QuantizeRow(t, z.data(), buf.data(), 256);
    DequantizeRow(t, buf.data(), out.data(), 256);
    for (float v : out) ASSERT_EQ(v, 0.0f) << TypeName(t);
  }
}

TEST(Quantize, Q8_0MaxErrorIsHalfStep) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> ud(-3.0f, 3.0f);
  std::vector<float> x(32 * 10);
  for (float& v : x) v = ud(rng);
  std::vector<BlockQ8_0> b(10);
  QuantizeRow(GgmlType::kQ8_0, x.data(), b.data(), 320);
  std::vector<float> y(320);
  DequantizeRow(GgmlType::kQ8_0, b.data(), y.data(), 320);
  for (int i = 0; i < 320; ++i) {
    const float d = Fp16ToF32(b[i / 32].d);
    EXPECT_LE(std::fabs(y[i] - x[i]), 0.5f * d + 2e-3f * std::fabs(x[i])) << i;
  }
}

TEST(Quantize, Q8_KBlockSums) {
  std::mt19937 rng(10);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(512);
  for (float& v : x) v = nd(rng);
  std::vector<BlockQ8_K> b(2);
  QuantizeRow(GgmlType::kQ8_K, x.data(), b.data(), 512);
  for (const BlockQ8_K& blk : b) {
    for (int j = 0; j < 16; ++j) {
      int s = 0;
      for (int i = 0; i < 16; ++i) s += blk.qs[16 * j + i];
      EXPECT_EQ(blk.bsums[j], s);
    }
  }
}

}  // namespace
}  // namespace tachyon::kernels
