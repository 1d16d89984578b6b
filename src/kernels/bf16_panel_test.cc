// The bf16 panel layout, checked element by element against DequantizeRow.
#include "kernels/bf16_panel.h"

#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tensor/fp16.h"

namespace tachyon::kernels {
namespace {

struct Matrix {
  Weight w;
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // dequantized, rows x cols
};

Matrix Make(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
  Matrix m;
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const size_t row_bytes = RowBytes(type, cols);
  m.bytes.resize(row_bytes * rows);
  m.values.resize(static_cast<size_t>(rows * cols));
  std::vector<float> src(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : src) v = dist(rng);
    QuantizeRow(type, src.data(), m.bytes.data() + r * row_bytes, cols);
    DequantizeRow(type, m.bytes.data() + r * row_bytes, m.values.data() + r * cols, cols);
  }
  m.w = Weight{type, rows, cols, m.bytes.data(), row_bytes, nullptr};
  return m;
}

void CheckPanel(const Matrix& m, int64_t t, int64_t k0, int64_t kc) {
  std::vector<uint16_t> panel(static_cast<size_t>(kc * 16), 0xFFFF);
  DequantPanelBf16Reference(m.w, t, k0, kc, panel.data());
  for (int64_t n = 0; n < 16; ++n) {
    for (int64_t k = 0; k < kc; ++k) {
      const int64_t r = 16 * t + n, c = k0 + k;
      const uint16_t want = (r < m.w.rows && c < m.w.cols)
                                ? F32ToBf16(m.values[static_cast<size_t>(r * m.w.cols + c)])
                                : 0;
      ASSERT_EQ(panel[static_cast<size_t>((k / 2) * 32 + 2 * n + k % 2)], want)
          << TypeName(m.w.type) << " tile " << t << " row " << n << " k " << c;
    }
  }
}

TEST(Bf16Panel, LayoutAndPaddingPerType) {
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0,
                        GgmlType::kQ4_0, GgmlType::kQ5_1, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    const int64_t block = GetTypeTraits(static_cast<uint32_t>(type))->block_size;
    const int64_t cols = block == 256 ? 512 : 96;
    const Matrix m = Make(type, 21, cols, 7);
    const int64_t align = PanelKAlign(type);
    CheckPanel(m, 0, 0, cols);              // whole rows
    CheckPanel(m, 1, 0, cols + 32);         // partial tile (rows 16..20), padded k
    CheckPanel(m, 1, align, cols - align);  // an inner k range
  }
}

TEST(Bf16Panel, OddColumnsArePaddedWithZeros) {
  const Matrix m = Make(GgmlType::kF32, 16, 45, 3);
  CheckPanel(m, 0, 0, 64);
}

TEST(Bf16Panel, KAlignCoversTheBlock) {
  EXPECT_EQ(PanelKAlign(GgmlType::kF16), 32);
  EXPECT_EQ(PanelKAlign(GgmlType::kQ8_0), 32);
  EXPECT_EQ(PanelKAlign(GgmlType::kQ6_K), 256);
}

}  // namespace
}  // namespace tachyon::kernels
