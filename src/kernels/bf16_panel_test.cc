// The bf16 panel layout, checked element by element against DequantizeRow; the AVX-512 panel
// writer against the scalar reference, byte for byte.
#include "kernels/bf16_panel.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <random>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/bf16_panel_internal.h"
#include "kernels/pack.h"
#include "kernels/testing/matmul_problem.h"
#include "tensor/fp16.h"
#include "util/cpu_features.h"

namespace tachyon::kernels {
namespace {

void CheckPanel(const MatMulProblem& m, int64_t t, int64_t k0, int64_t kc) {
  std::vector<uint16_t> panel(static_cast<size_t>(kc * 16), 0xFFFF);
  DequantPanelBf16Reference(m.weight, t, k0, kc, panel.data());
  for (int64_t n = 0; n < 16; ++n) {
    for (int64_t k = 0; k < kc; ++k) {
      const int64_t r = 16 * t + n, c = k0 + k;
      const uint16_t want = (r < m.weight.rows && c < m.weight.cols)
                                ? F32ToBf16(m.wf[static_cast<size_t>(r * m.weight.cols + c)])
                                : 0;
      ASSERT_EQ(panel[static_cast<size_t>((k / 2) * 32 + 2 * n + k % 2)], want)
          << TypeName(m.weight.type) << " tile " << t << " row " << n << " k " << c;
    }
  }
}

TEST(Bf16Panel, LayoutAndPaddingPerType) {
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0,
                        GgmlType::kQ4_0, GgmlType::kQ5_1, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    const int64_t block = GetTypeTraits(static_cast<uint32_t>(type))->block_size;
    const int64_t cols = block == 256 ? 512 : 96;
    const MatMulProblem m = MakeMatMulProblem(type, 21, cols, /*m=*/0, 7);
    const int64_t align = PanelKAlign(type);
    CheckPanel(m, 0, 0, cols);              // whole rows
    CheckPanel(m, 1, 0, cols + 32);         // partial tile (rows 16..20), padded k
    CheckPanel(m, 1, align, cols - align);  // an inner k range
  }
}

TEST(Bf16Panel, OddColumnsArePaddedWithZeros) {
  const MatMulProblem m = MakeMatMulProblem(GgmlType::kF32, 16, 45, /*m=*/0, 3);
  CheckPanel(m, 0, 0, 64);
}

TEST(Bf16Panel, KAlignCoversTheBlock) {
  EXPECT_EQ(PanelKAlign(GgmlType::kF16), 32);
  EXPECT_EQ(PanelKAlign(GgmlType::kQ8_0), 32);
  EXPECT_EQ(PanelKAlign(GgmlType::kQ6_K), 256);
}

// ---- the AVX-512 panel writer against the reference -------------------------------------------

int64_t BlockOf(GgmlType type) {
  return GetTypeTraits(static_cast<uint32_t>(type))->block_size;
}

// A matrix of arbitrary bytes: every code and every scale bit pattern (fp16 scales include
// subnormals, infinities and NaNs), optionally repacked as the loader does.
struct RawMatrix {
  Weight w;
  std::vector<uint8_t> bytes;
  AlignedBuffer packed;
};

RawMatrix MakeRaw(GgmlType type, int64_t rows, int64_t cols, uint32_t seed, bool pack) {
  RawMatrix m;
  std::mt19937 rng(seed);
  const size_t row_bytes = RowBytes(type, cols);
  m.bytes.resize(row_bytes * static_cast<size_t>(rows));
  for (uint8_t& b : m.bytes) b = static_cast<uint8_t>(rng());
  m.w = Weight{type, rows, cols, m.bytes.data(), row_bytes, nullptr};
  if (pack) {
    m.packed = AllocateAligned(PackedBytes(type, rows, cols));
    PackWeight(m.w, m.packed.get(), nullptr);
    m.w.packed = m.packed.get();
  }
  return m;
}

// bf16 bits equal, or both NaN: which NaN an operation on a NaN scale returns (sign, payload)
// depends on the order in which the compiler put the operands, which no contract fixes.
bool SameBf16(uint16_t a, uint16_t b) {
  const auto is_nan = [](uint16_t v) { return (v & 0x7F80) == 0x7F80 && (v & 0x007F) != 0; };
  return a == b || (is_nan(a) && is_nan(b));
}

// Compares the AVX-512 writer (and the public dispatcher) with the reference for tile t over
// [k0, k0 + kc); the buffers start as garbage so a skipped element shows.
void ExpectSameAsReference(const Weight& w, int64_t t, int64_t k0, int64_t kc) {
  const size_t n = static_cast<size_t>(kc) * 16;
  std::vector<uint16_t> want(n, 0xABCD), fast(n, 0x5A5A), pub(n, 0x1234);
  DequantPanelBf16Reference(w, t, k0, kc, want.data());
  ASSERT_TRUE(internal::DequantPanelBf16Avx512(w, t, k0, kc, fast.data()));
  DequantPanelBf16(w, t, k0, kc, pub.data());
  for (size_t i = 0; i < n; ++i) {
    const int64_t k = k0 + static_cast<int64_t>(i / 32) * 2 + static_cast<int64_t>(i % 2);
    const int64_t row = 16 * t + static_cast<int64_t>(i % 32) / 2;
    ASSERT_TRUE(SameBf16(fast[i], want[i]))
        << fast[i] << " vs " << want[i] << ", " << TypeName(w.type)
        << (w.packed ? " packed" : " gguf") << " " << w.rows << "x" << w.cols << " tile " << t
        << " k0 " << k0 << " kc " << kc << ": row " << row << " k " << k;
    ASSERT_TRUE(SameBf16(pub[i], want[i]))
        << pub[i] << " vs " << want[i] << ", dispatcher, " << TypeName(w.type) << " row " << row
        << " k " << k;
  }
}

#define SKIP_WITHOUT_AVX512()                                        \
  if (!DetectedCpuFeatures().HasAvx512Set()) {                       \
    GTEST_SKIP() << "no AVX-512 (F/BW/VL/DQ/VNNI/BF16) on this CPU"; \
  }

// Every type, packed and GGUF layout, partial tiles, every aligned k0, kc from one B tile to
// past the end of the row (zero padding), arbitrary bytes.
TEST(Bf16PanelAvx512, ByteIdenticalToReference) {
  SKIP_WITHOUT_AVX512();
  for (GgmlType type : kAllMatMulTypes) {
    const int64_t block = BlockOf(type);
    const int64_t align = PanelKAlign(type);
    for (bool pack : {false, true}) {
      if (pack && !HasPackedLayout(type)) continue;
      const std::vector<int64_t> all_cols =
          block == 256  ? std::vector<int64_t>{256, 768}
          : block == 32 ? std::vector<int64_t>{32, 96, 160}
                        : std::vector<int64_t>{1, 7, 31, 32, 33, 45, 64, 100};
      for (int64_t rows : {1, 15, 16, 21, 37}) {
        for (int64_t cols : all_cols) {
          const RawMatrix m =
              MakeRaw(type, rows, cols, static_cast<uint32_t>(rows * 1000 + cols), pack);
          const int64_t tiles = (rows + 15) / 16;
          for (int64_t t = 0; t < tiles; ++t) {
            for (int64_t k0 = 0; k0 < cols; k0 += align) {
              const int64_t rest = (cols - k0 + 31) / 32 * 32;
              for (int64_t kc : {int64_t{32}, int64_t{96}, rest, rest + 64}) {
                ExpectSameAsReference(m.w, t, k0, kc);
                if (HasFailure()) return;
              }
            }
          }
        }
      }
    }
  }
}

// Weights quantized from real-looking values (finite scales), a longer row.
TEST(Bf16PanelAvx512, QuantizedRowsMatchReference) {
  SKIP_WITHOUT_AVX512();
  for (GgmlType type : kAllMatMulTypes) {
    MatMulProblem m = MakeMatMulProblem(type, 40, 2048, /*m=*/0, 11);
    ExpectSameAsReference(m.weight, 0, 0, 2048);
    ExpectSameAsReference(m.weight, 2, 1024, 512);
    if (HasPackedLayout(type)) {
      AlignedBuffer buf = AllocateAligned(PackedBytes(type, m.weight.rows, m.weight.cols));
      PackWeight(m.weight, buf.get(), nullptr);
      m.weight.packed = buf.get();
      ExpectSameAsReference(m.weight, 0, 0, 2048);
      ExpectSameAsReference(m.weight, 2, 1024, 512);
      ExpectSameAsReference(m.weight, 1, 256, 320);  // ends inside a K-quant super-block
    }
  }
}

// Float special values: NaNs (signalling and quiet), infinities, signed zeros, subnormals
// (vcvtne2ps2bf16 alone would flush F32 subnormals), rounding ties.
TEST(Bf16PanelAvx512, FloatSpecialValues) {
  SKIP_WITHOUT_AVX512();
  // +-0, +-inf, quiet and signalling NaNs, subnormals, values halfway between two bf16
  // (0x00408000, 0x3F808000: ties to even), the largest float, 1, -2.5.
  const uint32_t special[] = {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u,
                              0x7F800001u, 0xFFC12345u, 0x00000001u, 0x807FFFFFu, 0x00408000u,
                              0x3F808000u, 0x3F818000u, 0x7F7FFFFFu, 0x3F800000u, 0xC0200000u};
  const int64_t rows = 19, cols = 77;
  std::vector<float> f32(static_cast<size_t>(rows * cols));
  std::mt19937 rng(5);
  for (size_t i = 0; i < f32.size(); ++i) {
    f32[i] = BitsToF32((rng() % 3 == 0) ? special[rng() % std::size(special)]
                                        : static_cast<uint32_t>(rng()));
  }
  // F16 / BF16: every bit pattern is possible, including subnormal halves and NaN payloads.
  std::vector<uint16_t> h16(f32.size()), b16(f32.size());
  for (size_t i = 0; i < f32.size(); ++i) {
    h16[i] = static_cast<uint16_t>(rng());
    b16[i] = static_cast<uint16_t>(rng());
  }
  h16[0] = 0x0001;  // smallest subnormal half
  h16[1] = 0x7C01;  // signalling NaN
  h16[2] = 0xFC00;  // -inf
  b16[0] = 0x7F81;  // signalling NaN
  b16[1] = 0x0001;  // subnormal
  const Weight ws[] = {{GgmlType::kF32, rows, cols, f32.data(), 0, nullptr},
                       {GgmlType::kF16, rows, cols, h16.data(), 0, nullptr},
                       {GgmlType::kBF16, rows, cols, b16.data(), 0, nullptr}};
  for (const Weight& w : ws) {
    for (int64_t t = 0; t < 2; ++t) {
      ExpectSameAsReference(w, t, 0, 96);
      ExpectSameAsReference(w, t, 32, 64);
      ExpectSameAsReference(w, t, 64, 32);
    }
  }
}

// Independent of the reference: a matrix that is zero except one 1.0 per row, at a different
// input in every row, must give a panel with exactly those 16 elements at 1 (a swapped nibble,
// a row or scale taken from the wrong place, a wrong pair order all fail this).
TEST(Bf16PanelAvx512, OneHotRowsLandWhereTheLayoutSays) {
  SKIP_WITHOUT_AVX512();
  for (GgmlType type : kAllMatMulTypes) {
    const int64_t cols = 512, rows = 16;
    std::vector<uint8_t> bytes(RowBytes(type, cols) * rows);
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      std::fill(row.begin(), row.end(), 0.0f);
      row[static_cast<size_t>((37 * r + 11) % cols)] = 1.0f;
      QuantizeRow(type, row.data(), bytes.data() + r * RowBytes(type, cols), cols);
    }
    Weight w{type, rows, cols, bytes.data(), 0, nullptr};
    AlignedBuffer buf;
    for (bool pack : {false, true}) {
      if (pack) {
        if (!HasPackedLayout(type)) continue;
        buf = AllocateAligned(PackedBytes(type, rows, cols));
        PackWeight(w, buf.get(), nullptr);
        w.packed = buf.get();
      }
      std::vector<uint16_t> panel(static_cast<size_t>(cols) * 16);
      ASSERT_TRUE(internal::DequantPanelBf16Avx512(w, 0, 0, cols, panel.data()));
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t k = 0; k < cols; ++k) {
          const float v = Bf16ToF32(panel[static_cast<size_t>((k / 2) * 32 + 2 * r + k % 2)]);
          const float want = k == (37 * r + 11) % cols ? 1.0f : 0.0f;
          ASSERT_NEAR(v, want, 0.05f)
              << TypeName(type) << (pack ? " packed" : " gguf") << " row " << r << " k " << k;
        }
      }
    }
  }
}

// Q8_K (an activation type DequantizeRow also reads) has no fast path: declined, and the
// dispatcher falls back to the reference.
TEST(Bf16PanelAvx512, TypesWithoutAFastPathAreDeclined) {
  SKIP_WITHOUT_AVX512();
  const RawMatrix m = MakeRaw(GgmlType::kQ8_K, 16, 256, 1, false);
  std::vector<uint16_t> panel(256 * 16, 0x7777), want(panel.size());
  EXPECT_FALSE(internal::DequantPanelBf16Avx512(m.w, 0, 0, 256, panel.data()));
  EXPECT_EQ(panel[0], 0x7777);  // nothing written
  DequantPanelBf16(m.w, 0, 0, 256, panel.data());
  DequantPanelBf16Reference(m.w, 0, 0, 256, want.data());
  EXPECT_EQ(panel, want);
}

TEST(Bf16Panel, DispatcherMatchesReferenceForEveryType) {
  for (GgmlType type : kAllMatMulTypes) {
    const int64_t cols = BlockOf(type) == 256 ? 512 : 96;
    const RawMatrix m = MakeRaw(type, 20, cols, 3, false);
    std::vector<uint16_t> want(static_cast<size_t>(cols) * 16), got(want.size());
    DequantPanelBf16Reference(m.w, 1, 0, cols, want.data());
    DequantPanelBf16(m.w, 1, 0, cols, got.data());
    EXPECT_EQ(got, want) << TypeName(type);
  }
}

TEST(Bf16PanelDeathTest, BadRangeIsAClearError) {
  const RawMatrix m = MakeRaw(GgmlType::kQ4_K, 16, 512, 1, false);
  std::vector<uint16_t> panel(512 * 16);
  EXPECT_DEATH(DequantPanelBf16(m.w, 0, 32, 64, panel.data()), "bad input range");
  EXPECT_DEATH(DequantPanelBf16(m.w, 1, 0, 64, panel.data()), "past 16 rows");
}

// ---- hi / lo split ----------------------------------------------------------------------

// The split reference: hi is DequantPanelBf16Reference's panel, hi + lo is the value to
// 2^-16 relative (|v - hi| <= 2^-8 |v|, and lo rounds that to 8 bits), F16 values exactly.
TEST(Bf16PanelSplit, HiIsThePanelAndHiPlusLoIsTheValue) {
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kQ8_0}) {
    const MatMulProblem m = MakeMatMulProblem(type, 21, 96, /*m=*/0, 7);
    for (int64_t t = 0; t < 2; ++t) {
      std::vector<uint16_t> hi(128 * 16, 0xABCD), lo(hi.size(), 0xABCD), plain(hi.size());
      DequantPanelBf16SplitReference(m.weight, t, 0, 128, hi.data(), lo.data());
      DequantPanelBf16Reference(m.weight, t, 0, 128, plain.data());
      ASSERT_EQ(hi, plain) << TypeName(type);
      for (int64_t n = 0; n < 16; ++n) {
        for (int64_t k = 0; k < 128; ++k) {
          const size_t at = static_cast<size_t>((k / 2) * 32 + 2 * n + k % 2);
          const int64_t r = 16 * t + n;
          const double got = double{Bf16ToF32(hi[at])} + double{Bf16ToF32(lo[at])};
          if (r >= m.weight.rows || k >= m.weight.cols) {
            ASSERT_EQ(hi[at] | lo[at], 0) << "padding, row " << r << " k " << k;
            continue;
          }
          const double v = m.wf[static_cast<size_t>(r * m.weight.cols + k)];
          if (type == GgmlType::kF16) {
            ASSERT_EQ(got, v) << "row " << r << " k " << k;
          } else {
            ASSERT_LE(std::fabs(got - v), std::ldexp(std::fabs(v), -16))
                << TypeName(type) << " row " << r << " k " << k;
          }
        }
      }
    }
  }
}

void ExpectSplitSameAsReference(const Weight& w, int64_t t, int64_t k0, int64_t kc) {
  const size_t n = static_cast<size_t>(kc) * 16;
  std::vector<uint16_t> want_hi(n, 0xABCD), want_lo(n, 0xABCD), hi(n, 0x5A5A), lo(n, 0x5A5A),
      pub_hi(n, 0x1234), pub_lo(n, 0x1234);
  DequantPanelBf16SplitReference(w, t, k0, kc, want_hi.data(), want_lo.data());
  ASSERT_TRUE(internal::DequantPanelBf16SplitAvx512(w, t, k0, kc, hi.data(), lo.data()));
  DequantPanelBf16Split(w, t, k0, kc, pub_hi.data(), pub_lo.data());
  for (size_t i = 0; i < n; ++i) {
    const int64_t k = k0 + static_cast<int64_t>(i / 32) * 2 + static_cast<int64_t>(i % 2);
    const int64_t row = 16 * t + static_cast<int64_t>(i % 32) / 2;
    ASSERT_EQ(hi[i], want_hi[i]) << "hi " << TypeName(w.type) << (w.packed ? " packed " : " ")
                                 << w.rows << "x" << w.cols << " tile " << t << " k0 " << k0
                                 << " kc " << kc << ": row " << row << " k " << k;
    ASSERT_EQ(lo[i], want_lo[i]) << "lo " << TypeName(w.type) << (w.packed ? " packed " : " ")
                                 << w.rows << "x" << w.cols << " tile " << t << " k0 " << k0
                                 << " kc " << kc << ": row " << row << " k " << k;
    ASSERT_EQ(pub_hi[i], want_hi[i]) << "dispatcher hi at " << i;
    ASSERT_EQ(pub_lo[i], want_lo[i]) << "dispatcher lo at " << i;
  }
}

// Arbitrary bit patterns (NaNs, infinities, subnormals, values whose difference to hi is
// subnormal), partial tiles, odd columns, kc past the row; F16 from w.data and from its
// packed tiles (read in place, no transpose).
TEST(Bf16PanelSplitAvx512, ByteIdenticalToReference) {
  SKIP_WITHOUT_AVX512();
  for (const auto& [type, pack] :
       {std::pair{GgmlType::kF32, false}, std::pair{GgmlType::kF16, false},
        std::pair{GgmlType::kF16, true}}) {
    for (int64_t rows : {1, 16, 21}) {
      for (int64_t cols : {1, 31, 32, 33, 77, 100}) {
        const RawMatrix m =
            MakeRaw(type, rows, cols, static_cast<uint32_t>(rows * 100 + cols), pack);
        for (int64_t t = 0; t < (rows + 15) / 16; ++t) {
          for (int64_t k0 = 0; k0 < cols; k0 += 32) {
            const int64_t rest = (cols - k0 + 31) / 32 * 32;
            for (int64_t kc : {int64_t{32}, rest, rest + 64}) {
              ExpectSplitSameAsReference(m.w, t, k0, kc);
              if (HasFailure()) return;
            }
          }
        }
      }
    }
  }
  // Real-looking values, and F32 values near the subnormal range (the lo of 0x01000001 is
  // subnormal: the lanes' vcvtne2ps2bf16 would flush it).
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16}) {
    const MatMulProblem m = MakeMatMulProblem(type, 40, 1024, /*m=*/0, 3);
    ExpectSplitSameAsReference(m.weight, 2, 512, 512);
    if (type != GgmlType::kF16) continue;
    AlignedBuffer buf = AllocateAligned(PackedBytes(type, m.weight.rows, m.weight.cols));
    PackWeight(m.weight, buf.get(), nullptr);
    Weight packed = m.weight;
    packed.packed = buf.get();
    for (int64_t t : {0, 2}) ExpectSplitSameAsReference(packed, t, 512, 512);
  }
  std::vector<float> tiny(16 * 64);
  std::mt19937 rng(1);
  for (float& v : tiny) v = BitsToF32(0x00800000u + (rng() % 0x02000000u)) * ((rng() & 1) ? 1 : -1);
  ExpectSplitSameAsReference({GgmlType::kF32, 16, 64, tiny.data(), 0, nullptr}, 0, 0, 64);
}

TEST(Bf16PanelSplitAvx512, OtherTypesAreDeclined) {
  SKIP_WITHOUT_AVX512();
  const RawMatrix m = MakeRaw(GgmlType::kQ8_0, 16, 64, 1, false);
  std::vector<uint16_t> hi(64 * 16, 0x7777), lo(hi.size(), 0x7777), want_hi(hi.size()),
      want_lo(hi.size());
  EXPECT_FALSE(internal::DequantPanelBf16SplitAvx512(m.w, 0, 0, 64, hi.data(), lo.data()));
  EXPECT_EQ(hi[0], 0x7777);
  EXPECT_EQ(lo[0], 0x7777);
  DequantPanelBf16Split(m.w, 0, 0, 64, hi.data(), lo.data());
  DequantPanelBf16SplitReference(m.w, 0, 0, 64, want_hi.data(), want_lo.data());
  EXPECT_EQ(hi, want_hi);
  EXPECT_EQ(lo, want_lo);
}

}  // namespace
}  // namespace tachyon::kernels
