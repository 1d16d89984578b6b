// MatMul variants (scalar / AVX2 / AVX-512) against each other and against the exact
// reference, for every weight type, odd sizes and several activation row counts.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"
#include "kernels/pack.h"
#include "kernels/testing/kernel_testing.h"
#include "kernels/testing/matmul_problem.h"
#include "tensor/quant_blocks.h"
#include "util/cpu_features.h"
#include "util/thread_pool.h"

namespace tachyon::kernels {
namespace {


bool IsK(GgmlType t) {
  return GetTypeTraits(static_cast<uint32_t>(t))->block_size == 256;
}
bool IsFloat(GgmlType t) {
  return t == GgmlType::kF32 || t == GgmlType::kF16 || t == GgmlType::kBF16;
}

using Problem = MatMulProblem;
std::vector<double> Bounds(const Problem& p) {
  return ActivationRoundingBounds(p);
}

std::vector<float> RunAt(const Problem& p, SimdLevel level, ThreadPool* pool = nullptr) {
  std::vector<float> y(p.m * p.rows, NAN);
  MatMulAtLevel(level, p.weight, p.x.data(), p.m, y.data(), pool);
  return y;
}

void CheckAll(const Problem& p) {
  std::vector<float> ref(p.m * p.rows);
  MatMulReference(p.weight, p.x.data(), p.m, ref.data());
  const std::vector<double> bound = Bounds(p);
  std::vector<float> scalar = RunAt(p, SimdLevel::kScalar);
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_LE(std::fabs(scalar[i] - ref[i]), bound[i])
        << TypeName(p.type) << " cols " << p.cols << " m " << p.m << " at " << i;
  }
  for (SimdLevel l : SimdLevelsUpTo(SimdLevel::kAvx512)) {
    const std::vector<float> y = RunAt(p, l);
    for (size_t i = 0; i < ref.size(); ++i) {
      // Same quantized activations as the scalar kernel: only float summation order differs.
      const double tol = 1e-5 * (std::fabs(ref[i]) + bound[i] * 50) + 1e-5;
      ASSERT_NEAR(y[i], scalar[i], tol) << TypeName(p.type) << " " << SimdLevelName(l) << " cols "
                                        << p.cols << " m " << p.m << " at " << i;
    }
  }
}

TEST(MatMul, OddSizesEveryType) {
  const int64_t sizes[] = {1, 2, 3, 7, 15, 16, 17, 31, 33, 127, 129};
  for (GgmlType t : kAllMatMulTypes) {
    const int64_t blk = IsFloat(t) ? 1 : (IsK(t) ? 256 : 32);
    for (int64_t s : sizes) {
      if (IsK(t) && s > 33) continue;  // keep K-quants small; 1023 below
      CheckAll(MakeMatMulProblem(t, 5, s * blk, 3, static_cast<uint32_t>(s)));
    }
  }
}

TEST(MatMul, ActivationRowCounts) {
  for (GgmlType t : kAllMatMulTypes) {
    const int64_t cols = IsFloat(t) ? 97 : (IsK(t) ? 512 : 33 * 32);
    for (int64_t m : {1, 2, 3, 4, 5, 8, 17})
      CheckAll(MakeMatMulProblem(t, 7, cols, m, static_cast<uint32_t>(m)));
  }
}

TEST(MatMul, LongRows) {
  for (GgmlType t : kAllMatMulTypes) {
    const int64_t blk = IsFloat(t) ? 1 : (IsK(t) ? 256 : 32);
    const int64_t n = IsK(t) ? 129 : 1023;
    CheckAll(MakeMatMulProblem(t, 2, n * blk, 1, 99));
  }
}

TEST(MatMul, ThreadedEqualsSingleThreaded) {
  ThreadPool pool(2);
  for (GgmlType t : {GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kF16}) {
    const Problem p = MakeMatMulProblem(t, 96, 512, 9, 5);
    const std::vector<float> a = RunAt(p, BestSimdLevel()), b = RunAt(p, BestSimdLevel(), &pool);
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << i;
    std::vector<float> c(a.size());
    MatMul(p.weight, p.x.data(), p.m, c.data(), &pool);
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], c[i]) << i;
  }
}

// Packed layouts: every level on the packed copy against the exact reference (activation
// rounding bound) and against the unpacked scalar kernel (float summation order only).
void CheckPacked(const Problem& p, ThreadPool* pool = nullptr) {
  ASSERT_TRUE(HasPackedLayout(p.type));
  AlignedBuffer buf = AllocateAligned(PackedBytes(p.type, p.rows, p.cols));
  PackWeight(p.weight, buf.get(), pool);
  Weight packed = p.weight;
  packed.packed = buf.get();
  std::vector<float> ref(p.m * p.rows);
  MatMulReference(p.weight, p.x.data(), p.m, ref.data());
  const std::vector<double> bound = Bounds(p);
  const std::vector<float> scalar = RunAt(p, SimdLevel::kScalar);
  for (SimdLevel l : SimdLevelsUpTo(SimdLevel::kAvx512)) {
    std::vector<float> y(p.m * p.rows, NAN);
    MatMulAtLevel(l, packed, p.x.data(), p.m, y.data(), pool);
    for (size_t i = 0; i < ref.size(); ++i) {
      ASSERT_LE(std::fabs(y[i] - ref[i]), bound[i])
          << "packed " << TypeName(p.type) << " " << SimdLevelName(l) << " rows " << p.rows
          << " cols " << p.cols << " m " << p.m << " at " << i;
      // F16 / BF16 rows of thousands of float products: summation order alone moves the
      // result by ~sqrt(cols) roundings of the partial sums, so the bound itself is the
      // tolerance there (still ~1000x below one missing product).
      const double tol = IsFloat(p.type)
                             ? bound[i]
                             : 1e-5 * (std::fabs(ref[i]) + bound[i] * 50) + 1e-5;
      ASSERT_NEAR(y[i], scalar[i], tol) << "packed " << TypeName(p.type) << " "
                                        << SimdLevelName(l) << " rows " << p.rows << " cols "
                                        << p.cols << " m " << p.m << " at " << i;
    }
  }
}

const GgmlType kPackedTypes[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0,
                                 GgmlType::kQ5_1, GgmlType::kQ8_0, GgmlType::kQ4_K,
                                 GgmlType::kQ6_K, GgmlType::kF16,  GgmlType::kBF16};

TEST(MatMulPacked, OddColumnCounts) {
  for (GgmlType t : kPackedTypes) {
    const int64_t blk = IsFloat(t) ? 1 : (IsK(t) ? 256 : 32);
    for (int64_t n : {1, 2, 3, 5, 11, 32, 128}) {
      if (IsK(t) && n > 16) continue;  // 4096 columns at most
      CheckPacked(MakeMatMulProblem(t, 37, n * blk, 3, static_cast<uint32_t>(n)));
    }
  }
  // F16 / BF16 rows of any length: odd inputs, partial pair bands, long rows.
  for (GgmlType t : {GgmlType::kF16, GgmlType::kBF16}) {
    for (int64_t cols : {4, 7, 15, 17, 31, 33, 63, 65, 97, 1023, 4096}) {
      for (int64_t m : {1, 2, 5}) {
        CheckPacked(MakeMatMulProblem(t, 19, cols, m, static_cast<uint32_t>(cols + m)));
      }
    }
  }
}

// The packed F16 / BF16 tile is the AMX B operand of the whole row: it equals the bf16 panel
// layout bit for bit (BF16), with cols padded to 32 by zeros.
TEST(MatMulPacked, FloatTileLayout) {
  for (GgmlType t : {GgmlType::kF16, GgmlType::kBF16}) {
    const Problem p = MakeMatMulProblem(t, 21, 45, 1, 11);
    const size_t tile_bytes = PackedTileBytes(t, p.cols);
    ASSERT_EQ(tile_bytes, 2u * 1024u);
    AlignedBuffer buf = AllocateAligned(PackedBytes(t, p.rows, p.cols));
    std::fill(buf.get(), buf.get() + PackedBytes(t, p.rows, p.cols), 0xEE);
    PackWeight(p.weight, buf.get(), nullptr);
    const auto* w = reinterpret_cast<const uint16_t*>(p.w.data());
    for (int64_t tile = 0; tile < 2; ++tile) {
      const auto* d = reinterpret_cast<const uint16_t*>(buf.get() + tile * tile_bytes);
      for (int64_t c = 0; c < 64; ++c) {
        for (int64_t r = 0; r < 16; ++r) {
          const int64_t row = 16 * tile + r;
          const uint16_t want = row < p.rows && c < p.cols ? w[row * p.cols + c] : 0;
          ASSERT_EQ(d[32 * (c / 2) + 2 * r + c % 2], want) << TypeName(t) << " " << row << " " << c;
        }
      }
    }
  }
}

TEST(MatMulPacked, ActivationRowCounts) {
  for (GgmlType t : kPackedTypes) {
    for (int64_t m : {1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 33, 64, 100}) {
      CheckPacked(MakeMatMulProblem(t, 21, 256, m, static_cast<uint32_t>(m)));
    }
    CheckPacked(MakeMatMulProblem(t, 19, IsK(t) ? 256 : 96, 512, 7));
  }
}

TEST(MatMulPacked, RowCountsAroundTheTile) {
  for (GgmlType t : kPackedTypes) {
    for (int64_t rows : {1, 15, 16, 17, 31, 48}) {
      CheckPacked(MakeMatMulProblem(t, rows, IsK(t) ? 512 : 128, 5, static_cast<uint32_t>(rows)));
    }
  }
}

// The many-row (GEMM) kernels: activation rows in several L2 chunks, K in several slices with a
// short last one, tile pairs plus a single partial tile, row groups with every remainder.
TEST(MatMulPacked, ManyRowsChunksAndSlices) {
  for (GgmlType t : {GgmlType::kQ4_0, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    const int64_t blk = IsK(t) ? 256 : 32;
    CheckPacked(MakeMatMulProblem(t, 37, (IsK(t) ? 3 : 33) * blk, 13, 11));  // slices 16+16+1 / 2+1
    CheckPacked(MakeMatMulProblem(t, 3, 4096, IsK(t) ? 120 : 140, 12));     // two chunks
    for (int64_t m = 8; m <= 13; ++m)
      CheckPacked(MakeMatMulProblem(t, 50, 2 * blk, m, static_cast<uint32_t>(m)));
  }
}

// Where MatMul switches to the GEMM kernels (TACHYON_GEMM_MIN_ROWS unset, as in the tests).
TEST(MatMulPacked, GemmMinRowsPerType) {
  if (std::getenv("TACHYON_GEMM_MIN_ROWS") != nullptr) GTEST_SKIP() << "TACHYON_GEMM_MIN_ROWS set";
  for (GgmlType t : {GgmlType::kQ4_0, GgmlType::kQ5_0, GgmlType::kQ8_0, GgmlType::kQ4_K,
                     GgmlType::kQ6_K}) {
    EXPECT_EQ(GemmMinRows(t), 8) << TypeName(t);
  }
  EXPECT_EQ(GemmMinRows(GgmlType::kQ4_1), 16);
}

// The GEMM kernels called directly at 1..7 rows (MatMul uses them from 8 or 16 rows on, so its
// row groups are 4..6 rows; short chunk tails still reach the 1..3-row variants).
TEST(MatMulPacked, GemmKernelFewRows) {
  if (!DetectedCpuFeatures().HasAvx512Set()) GTEST_SKIP() << "needs AVX-512";
  for (GgmlType t : {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                     GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    const internal::PackedGemmFn gemm = internal::PackedGemmAvx512(t);
    ASSERT_NE(gemm, nullptr) << TypeName(t);
    for (int64_t m = 1; m <= 7; ++m) {
      const Problem p =
          MakeMatMulProblem(t, 37, IsK(t) ? 512 : 544, m, static_cast<uint32_t>(40 + m));
      AlignedBuffer buf = AllocateAligned(PackedBytes(t, p.rows, p.cols));
      PackWeight(p.weight, buf.get(), nullptr);
      const internal::ActFormat f = internal::ActFormatFor(t);
      const size_t stride = internal::ActRowBytes(f, p.cols);
      AlignedBuffer act = AllocateAligned(stride * m);
      for (int64_t i = 0; i < m; ++i)
        internal::QuantizeActScalar(f)(p.x.data() + i * p.cols, p.cols, act.get() + i * stride);
      std::vector<float> y(m * p.rows, NAN);
      gemm(p.cols, buf.get(), PackedTileBytes(t, p.cols), (p.rows + 15) / 16, p.rows, act.get(),
           stride, m, y.data(), p.rows);
      const std::vector<float> scalar = RunAt(p, SimdLevel::kScalar);
      const std::vector<double> bound = Bounds(p);
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_NEAR(y[i], scalar[i], 1e-5 * (std::fabs(scalar[i]) + bound[i] * 50) + 1e-5)
            << TypeName(t) << " m " << m << " at " << i;
      }
    }
  }
}

TEST(MatMulPacked, ThreadedEqualsSingleThreaded) {
  ThreadPool pool(2);
  for (GgmlType t : kPackedTypes) {
    const Problem p = MakeMatMulProblem(t, 200, 512, 9, 3);
    CheckPacked(p, &pool);
    AlignedBuffer buf = AllocateAligned(PackedBytes(t, p.rows, p.cols));
    PackWeight(p.weight, buf.get(), &pool);
    Weight packed = p.weight;
    packed.packed = buf.get();
    std::vector<float> a(p.m * p.rows), b(p.m * p.rows);
    MatMul(packed, p.x.data(), p.m, a.data(), nullptr);
    MatMul(packed, p.x.data(), p.m, b.data(), &pool);
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << i;
  }
}

// Decode passes (few activation rows): every part runs its own range of the tiles and then
// takes tiles from the back of the others'. With more threads than cores (parts start late or
// are descheduled, so ranges are taken over at random points), more than 16 threads (the ranges
// on the heap) and tile counts that do not split evenly, every output row is computed exactly
// as on one thread.
TEST(MatMulPacked, DecodePassesComputeEveryRowOnAnyThreadCount) {
  for (int threads : {3, 5, 17}) {
    ThreadPool pool(threads);
    for (int64_t rows : {48, 200, 1000}) {
      const Problem p = MakeMatMulProblem(GgmlType::kQ4_1, rows, 256, 2, 7);
      AlignedBuffer buf = AllocateAligned(PackedBytes(p.type, p.rows, p.cols));
      PackWeight(p.weight, buf.get(), nullptr);
      Weight packed = p.weight;
      packed.packed = buf.get();
      for (int64_t m : {1, 2}) {
        std::vector<float> a(m * p.rows), b(m * p.rows, NAN);
        MatMul(packed, p.x.data(), m, a.data(), nullptr);
        for (int rep = 0; rep < 20; ++rep) {
          std::fill(b.begin(), b.end(), NAN);
          MatMul(packed, p.x.data(), m, b.data(), &pool);
          for (size_t i = 0; i < a.size(); ++i) {
            ASSERT_EQ(a[i], b[i]) << threads << " threads, rows " << rows << " m " << m << " at " << i;
          }
        }
      }
    }
  }
}

TEST(MatMulPacked, LayoutSizes) {
  EXPECT_TRUE(HasPackedLayout(GgmlType::kQ4_0));
  EXPECT_FALSE(HasPackedLayout(GgmlType::kF32));
  EXPECT_EQ(PackedTileBytes(GgmlType::kQ4_0, 64), 2u * (256 + 32));
  EXPECT_EQ(PackedTileBytes(GgmlType::kQ4_1, 64), 2u * (256 + 64));  // codes, scales, mins
  EXPECT_EQ(PackedTileBytes(GgmlType::kQ4_1, 32), 320u);
  EXPECT_EQ(PackedTileBytes(GgmlType::kQ8_0, 32), 576u);  // 512 + 32 rounded to 64
  EXPECT_EQ(PackedBytes(GgmlType::kQ8_0, 17, 32), 2u * 576u);
  EXPECT_EQ(PackedTileBytes(GgmlType::kQ4_K, 512), 2u * (2048 + 320));
  EXPECT_EQ(PackedTileBytes(GgmlType::kQ6_K, 256), 3392u);  // 3072 + 288 rounded to 64
  EXPECT_EQ(PackedTileBytes(GgmlType::kF16, 2048), 2048u * 32);  // cols padded to 32
  EXPECT_EQ(PackedTileBytes(GgmlType::kBF16, 33), 2048u);
  EXPECT_EQ(PackedBytes(GgmlType::kF16, 33, 1), 3u * 1024);
  // Same bytes as the GGUF rows (Q4_0 / Q8_0), or within 3% (K-quants: unpacked scales).
  EXPECT_EQ(PackedBytes(GgmlType::kQ4_0, 32, 4096), RowBytes(GgmlType::kQ4_0, 4096) * 32);
  EXPECT_EQ(PackedBytes(GgmlType::kQ4_1, 32, 4096), RowBytes(GgmlType::kQ4_1, 4096) * 32);
  // Q5: codes and the fifth bits' plane (320 bytes a block), scales (and mins).
  EXPECT_EQ(PackedTileBytes(GgmlType::kQ5_0, 64), 2u * (320 + 32));
  EXPECT_EQ(PackedTileBytes(GgmlType::kQ5_1, 32), 384u);
  EXPECT_EQ(PackedBytes(GgmlType::kQ5_0, 32, 896), RowBytes(GgmlType::kQ5_0, 896) * 32);
  EXPECT_EQ(PackedBytes(GgmlType::kQ5_1, 32, 4096), RowBytes(GgmlType::kQ5_1, 4096) * 32);
}

// The Q5 bit plane: byte j of row r's plane word holds the fifth bits of elements 4 s + j
// (bit s) and 16 + 4 s + j (bit 4 + s), read here from a packed tile of one-hot qh words.
TEST(MatMulPacked, Q5BitPlaneLayout) {
  MatMulProblem p = MakeMatMulProblem(GgmlType::kQ5_0, 16, 32, 1, 3);
  auto* blocks = reinterpret_cast<BlockQ5_0*>(p.w.data());
  for (int e = 0; e < 32; ++e) {
    const uint32_t qh = 1u << e;
    std::memcpy(blocks[e % 16].qh, &qh, 4);
    AlignedBuffer buf = AllocateAligned(PackedBytes(p.type, p.rows, p.cols));
    PackWeight(p.weight, buf.get(), nullptr);
    const int j = e % 4, bit = e < 16 ? e / 4 : 4 + (e - 16) / 4;
    for (int byte = 0; byte < 4; ++byte) {
      const uint8_t want = byte == j ? static_cast<uint8_t>(1u << bit) : 0;
      EXPECT_EQ(buf[256 + 4 * (e % 16) + byte], want) << "element " << e << " byte " << byte;
    }
  }
}

// MatMulMulti == one MatMul per weight, bit for bit (packed, unpacked, mixed types and
// formats, threaded or not).
TEST(MatMulMulti, EqualsSeparateCalls) {
  ThreadPool pool(2);
  struct Case {
    GgmlType a, b, c;
    bool pack;
  } cases[] = {{GgmlType::kQ4_0, GgmlType::kQ4_0, GgmlType::kQ4_0, true},
               {GgmlType::kQ4_0, GgmlType::kQ8_0, GgmlType::kQ4_0, true},
               {GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ4_K, false},
               {GgmlType::kQ8_0, GgmlType::kF16, GgmlType::kQ4_0, true}};
  for (const Case& c : cases) {
    for (int64_t m : {1, 5, 20}) {
      for (ThreadPool* pl : {static_cast<ThreadPool*>(nullptr), &pool}) {
        Problem ps[3] = {MakeMatMulProblem(c.a, 64, 512, m, 1),
                         MakeMatMulProblem(c.b, 16, 512, m, 2),
                         MakeMatMulProblem(c.c, 35, 512, m, 3)};
        std::vector<AlignedBuffer> bufs;
        const Weight* ws[3];
        Weight packed[3];
        std::vector<float> sep[3], multi[3];
        float* ys[3];
        for (int i = 0; i < 3; ++i) {
          packed[i] = ps[i].weight;
          if (c.pack && HasPackedLayout(ps[i].type)) {
            bufs.push_back(AllocateAligned(PackedBytes(ps[i].type, ps[i].rows, ps[i].cols)));
            PackWeight(ps[i].weight, bufs.back().get(), nullptr);
            packed[i].packed = bufs.back().get();
          }
          ws[i] = &packed[i];
          sep[i].resize(m * ps[i].rows);
          multi[i].assign(m * ps[i].rows, NAN);
          ys[i] = multi[i].data();
          // Same x for all three (the shared input).
          MatMul(packed[i], ps[0].x.data(), m, sep[i].data(), pl);
        }
        MatMulMulti(ws, ps[0].x.data(), m, ys, pl);
        for (int i = 0; i < 3; ++i) {
          for (size_t j = 0; j < sep[i].size(); ++j) {
            ASSERT_EQ(sep[i][j], multi[i][j])
                << TypeName(ps[i].type) << " m " << m << " weight " << i;
          }
        }
      }
    }
  }
}

TEST(MatMul, SupportedTypes) {
  for (GgmlType t : kAllMatMulTypes) EXPECT_TRUE(IsSupportedWeightType(t)) << TypeName(t);
  EXPECT_FALSE(IsSupportedWeightType(GgmlType::kIQ2_XXS));
  EXPECT_FALSE(IsSupportedWeightType(GgmlType::kQ8_K));
}

}  // namespace
}  // namespace tachyon::kernels
