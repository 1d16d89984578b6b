// MatMul: dispatch by weight type and SIMD level, activation conversion, threading.
#include "kernels/matmul.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <vector>

#include "kernels/matmul_int8_amx.h"
#include "kernels/matmul_internal.h"
#include "kernels/pack.h"
#include "util/logging.h"

namespace tachyon::kernels {
namespace {

using internal::ActFormat;
using internal::DotFn;
using internal::Packed2Fn;
using internal::PackedFn;
using internal::PackedGemmFn;
using internal::QuantizeActFn;
using internal::ThreadScratch;

// Bytes of weight rows swept per pass over the activation rows.
constexpr size_t kWeightTileBytes = 192 * 1024;
// Packed path: activation bytes per chunk of rows swept over a thread's tiles (L2-resident).
constexpr size_t kActChunkBytes = 256 * 1024;

struct Impl {
  ActFormat act;
  QuantizeActFn quantize;  // null for kF32
  DotFn dot;
  PackedFn packed;    // kernel for the packed layout (null: the type has none)
  Packed2Fn packed2;  // two tiles at once (m >= 2), optional
  PackedGemmFn gemm;  // many activation rows at once, optional
  int64_t gemm_min_rows = 0;  // gemm from this many activation rows on
};

Impl MakeImpl(SimdLevel level, GgmlType type) {
  Impl impl{internal::ActFormatFor(type), nullptr, nullptr, nullptr, nullptr, nullptr};
  if (level >= SimdLevel::kAvx512) {
    impl.packed = internal::PackedAvx512(type);
    impl.packed2 = internal::Packed2Avx512(type);
    impl.gemm = internal::PackedGemmAvx512(type);
    impl.gemm_min_rows = GemmMinRows(type);
    impl.dot = internal::DotAvx512Float(type);
    if (!impl.dot) impl.dot = internal::DotAvx512Block32(type);
    if (!impl.dot) impl.dot = internal::DotAvx512K(type);
    impl.quantize = internal::QuantizeActAvx512(impl.act);
  }
  if (level >= SimdLevel::kAvx2) {
    if (!impl.packed) impl.packed = internal::PackedAvx2(type);
    if (!impl.dot) impl.dot = internal::DotAvx2Float(type);
    if (!impl.dot) impl.dot = internal::DotAvx2Quant(type);
    if (!impl.quantize) impl.quantize = internal::QuantizeActAvx2(impl.act);
    if (level == SimdLevel::kAvx2) {
      impl.gemm = internal::PackedGemmAvx2(type);
      impl.gemm_min_rows = internal::GemmMinRowsAvx2(type);
    }
  }
  if (!impl.dot) impl.dot = internal::DotScalar(type);
  // The scalar packed kernels only stand in for a missing SIMD kernel at the scalar level;
  // at AVX2 a type without an AVX2 packed kernel runs the GGUF-layout AVX2 kernel.
  if (level == SimdLevel::kScalar) impl.packed = internal::PackedScalar(type);
  if (!impl.quantize) impl.quantize = internal::QuantizeActScalar(impl.act);
  return impl;
}

// Tables per level, built once.
const Impl& GetImpl(SimdLevel level, GgmlType type) {
  static const auto tables = [] {
    std::array<std::array<Impl, 64>, 4> t{};
    for (int l = 0; l < 4; ++l) {
      for (uint32_t ty = 0; ty < 64; ++ty) {
        if (GetTypeTraits(ty))
          t[l][ty] = MakeImpl(static_cast<SimdLevel>(l), static_cast<GgmlType>(ty));
      }
    }
    return t;
  }();
  return tables[static_cast<int>(level)][static_cast<uint32_t>(type)];
}

struct ActScratch;  // ThreadScratch tag: converted activation rows

void RunRows(const Impl& impl, const Weight& w, const uint8_t* act, size_t stride, int64_t m,
             float* y, int64_t r0, int64_t r1) {
  const auto* base = static_cast<const uint8_t*>(w.data);
  const size_t row_bytes = w.row_bytes ? w.row_bytes : RowBytes(w.type, w.cols);
  // A tile of weight rows (~kWeightTileBytes, L2) is swept once per group of kMaxRows
  // activation rows (L1), so neither side is re-read from far away.
  const int64_t wtile = std::max<int64_t>(1, static_cast<int64_t>(kWeightTileBytes / row_bytes));
  for (int64_t j0 = r0; j0 < r1; j0 += wtile) {
    const int64_t j1 = std::min(r1, j0 + wtile);
    for (int64_t i = 0; i < m; i += internal::kMaxRows) {
      const int nx = static_cast<int>(std::min<int64_t>(internal::kMaxRows, m - i));
      const uint8_t* a = act + static_cast<size_t>(i) * stride;
      for (int64_t j = j0; j < j1; ++j) {
        impl.dot(w.cols, base + static_cast<size_t>(j) * row_bytes, a, stride, nx,
                 y + i * w.rows + j, w.rows);
      }
    }
  }
}

// Packed layout: tiles [t0, t1) of kPackRows rows. Activation rows are taken in chunks that
// stay in L2 while this thread's tiles sweep past them; within a chunk each tile (L1/L2) is
// reused for every group of kPackedMaxRows rows.
// Two-tile kernel for m activation rows (TACHYON_TWO_TILES=0 / 1 / 2 forces never / m >= 2 /
// always, for benchmarks).
bool TwoTiles(int64_t m) {
  static const int mode = [] {
    const char* v = std::getenv("TACHYON_TWO_TILES");
    return v ? std::atoi(v) : 2;
  }();
  return mode == 2 || (mode == 1 && m >= 2);
}

void RunPackedTiles(const Impl& impl, const Weight& w, const uint8_t* act, size_t stride, int64_t m,
                    float* y, int64_t t0, int64_t t1) {
  const size_t tile_bytes = PackedTileBytes(w.type, w.cols);
  constexpr int64_t g = internal::kPackedMaxRows;
  const int64_t mc = std::max<int64_t>(g, static_cast<int64_t>(kActChunkBytes / stride) / g * g);
  for (int64_t i0 = 0; i0 < m; i0 += mc) {
    const int64_t i1 = std::min(m, i0 + mc);
    int64_t t = t0;
    // Several activation rows: two tiles per pass, each broadcast activation word is used
    // for 32 weight rows.
    if (impl.packed2 != nullptr && TwoTiles(i1 - i0)) {
      for (; t + 2 <= t1; t += 2) {
        const uint8_t* tile = w.packed + static_cast<size_t>(t) * tile_bytes;
        const int nrows_b =
            static_cast<int>(std::min<int64_t>(kPackRows, w.rows - (t + 1) * kPackRows));
        float* yt = y + t * kPackRows;
        for (int64_t i = i0; i < i1; i += g) {
          const int nx = static_cast<int>(std::min<int64_t>(g, i1 - i));
          impl.packed2(w.cols, tile, tile_bytes, act + static_cast<size_t>(i) * stride, stride, nx,
                       yt + i * w.rows, w.rows, nrows_b);
        }
      }
    }
    for (; t < t1; ++t) {
      const uint8_t* tile = w.packed + static_cast<size_t>(t) * tile_bytes;
      const int nrows = static_cast<int>(std::min<int64_t>(kPackRows, w.rows - t * kPackRows));
      float* yt = y + t * kPackRows;
      for (int64_t i = i0; i < i1; i += g) {
        const int nx = static_cast<int>(std::min<int64_t>(g, i1 - i));
        impl.packed(w.cols, tile, act + static_cast<size_t>(i) * stride, stride, nx,
                    yt + i * w.rows, w.rows, nrows);
      }
    }
  }
}

// Units of work are 16 output rows (one packed tile, or 16 unpacked rows).
constexpr int64_t kUnitRows = 16;
int64_t Units(const Weight& w) {
  return (w.rows + kUnitRows - 1) / kUnitRows;
}

void RunUnits(const Impl& impl, const Weight& w, const uint8_t* act, size_t stride, int64_t m,
              float* y, int64_t u0, int64_t u1) {
  static_assert(kUnitRows == kPackRows);
  if (w.packed != nullptr && impl.gemm != nullptr && m >= impl.gemm_min_rows) {
    const size_t tile_bytes = PackedTileBytes(w.type, w.cols);
    impl.gemm(w.cols, w.packed + static_cast<size_t>(u0) * tile_bytes, tile_bytes, u1 - u0,
              w.rows - u0 * kPackRows, act, stride, m, y + u0 * kPackRows, w.rows);
  } else if (w.packed != nullptr && impl.packed != nullptr) {
    RunPackedTiles(impl, w, act, stride, m, y, u0, u1);
  } else {
    RunRows(impl, w, act, stride, m, y, u0 * kUnitRows, std::min(w.rows, u1 * kUnitRows));
  }
}

void CheckWeight(const Weight& w) {
  CHECK(IsSupportedWeightType(w.type)) << "MatMul: unsupported weight type " << TypeName(w.type);
  const auto traits = GetTypeTraits(static_cast<uint32_t>(w.type));
  CHECK(w.cols % traits->block_size == 0) << "MatMul: cols not a multiple of the block";
}

}  // namespace

// Measured on the quiet VM (docs/kernels.md): below 8 rows the tile kernels win for every
// type, whether the model fits the last-level cache or not; Q4_1's up to 15.
namespace {
// TACHYON_GEMM_MIN_ROWS, or 0 when unset.
int64_t ForcedGemmMinRows() {
  static const int64_t forced = [] {
    const char* v = std::getenv("TACHYON_GEMM_MIN_ROWS");
    return v ? std::max<int64_t>(1, std::atoll(v)) : int64_t{0};
  }();
  return forced;
}
}  // namespace

int64_t GemmMinRows(GgmlType type) {
  if (const int64_t forced = ForcedGemmMinRows(); forced > 0) return forced;
  return type == GgmlType::kQ4_1 ? 16 : 8;
}

namespace internal {

// Measured on Zen 3 (docs/kernels.md, AVX2 GEMM): from 4 rows the GEMM takes 0.4-0.7 of the
// few-row kernels' time for Q4_1. The K-quants' wide passes take 0.68-0.85 of the few-row
// kernels' time at 3 rows, 0.88-1.09 at 2 (DRAM-bound shapes level), 1.06-1.19 at 1.
int64_t GemmMinRowsAvx2(GgmlType type) {
  if (const int64_t forced = ForcedGemmMinRows(); forced > 0) return forced;
  switch (type) {
    case GgmlType::kQ5_0:
      return 1;
    case GgmlType::kQ4_K:
    case GgmlType::kQ6_K:
      return 3;
    default:
      return 4;
  }
}

}  // namespace internal

bool IsSupportedWeightType(GgmlType type) {
  return internal::DotScalar(type) != nullptr;
}

namespace {

// Below this many activation rows ParallelUnits gives every part of the pass a contiguous range
// of the units, claimed from its front in shrinking chunks, and a part whose range is done
// claims chunks from the back of the others' (DecodeRanges). From it on, one static range per
// thread.
constexpr int64_t kDynamicMaxRows = 8;

// What is left of one part's units in a decode pass: [front, back), both in one word so that
// its owner (taking from the front) and the other parts (taking from the back) claim with one
// compare-and-swap each. A cache line of its own: the other parts touch it only once their own
// range is done.
struct alignas(64) UnitRange {
  std::atomic<uint64_t> front_back{0};

  void Set(int64_t front, int64_t back) {
    front_back.store(static_cast<uint64_t>(back) << 32 | static_cast<uint64_t>(front),
                     std::memory_order_relaxed);
  }
  // Claims a quarter of what is left (whole tile pairs, at least one; the two-tile kernels)
  // from the front or the back into [u0, u1); false when nothing is left.
  bool Claim(bool from_front, int64_t& u0, int64_t& u1) {
    uint64_t v = front_back.load(std::memory_order_relaxed);
    for (;;) {
      const int64_t front = static_cast<uint32_t>(v), back = static_cast<int64_t>(v >> 32);
      if (front >= back) return false;
      int64_t c = std::max<int64_t>(2, (back - front + 3) / 4);
      c = std::min(back - front, c + c % 2);
      const int64_t f = from_front ? front + c : front, b = from_front ? back : back - c;
      if (front_back.compare_exchange_weak(v, static_cast<uint64_t>(b) << 32 | static_cast<uint64_t>(f),
                                           std::memory_order_relaxed)) {
        u0 = from_front ? front : b;
        u1 = from_front ? f : back;
        return true;
      }
    }
  }
};

// The decode pass over `total` units (< 2^31): part p of the pool's Run owns the p-th of
// num_threads() contiguous ranges (tile-pair aligned) and runs it front to back, so each
// thread's weights stream through memory in address order and its kernel's software prefetch
// runs ahead within its own range; once its range is done it takes chunks from the back of the
// others' ranges, so a part that starts late (or a thread descheduled on a busy machine) is
// helped and the threads finish within a tile pair of each other. (With chunks handed out from
// one counter in turn, each thread's stream jumped at every chunk, and on Zen 3 a SmolLM2-135M
// step's matmuls took 4-6.5% longer: DecodeChain in bench/kernels_bench.cc.) A row's result
// does not depend on which part computes it.
template <typename Work>
void DecodeRanges(ThreadPool& pool, int64_t total, const Work& work) {
  const int nt = pool.num_threads();
  UnitRange local[16];  // on the stack: a nested call (from inside a pool task) has its own
  std::unique_ptr<UnitRange[]> more;
  if (nt > 16) more = std::make_unique<UnitRange[]>(nt);
  UnitRange* r = nt > 16 ? more.get() : local;
  for (int p = 0; p < nt; ++p) {
    r[p].Set(total * p / nt / 2 * 2, p + 1 == nt ? total : total * (p + 1) / nt / 2 * 2);
  }
  pool.Run([&](int part, int) {
    int64_t u0, u1;
    while (r[part].Claim(/*from_front=*/true, u0, u1)) work(u0, u1);
    for (int q = 1; q < nt; ++q) {
      UnitRange& other = r[(part + q) % nt];
      while (other.Claim(/*from_front=*/false, u0, u1)) work(u0, u1);
    }
  });
}

// Runs run(i, u0, u1) over units [u0, u1) of weight i, the units of all weights laid end to
// end and split over the pool in one parallel pass.
template <typename Fn>
void ParallelUnits(std::span<const Weight* const> ws, int64_t cols, int64_t m, ThreadPool* pool,
                   const Fn& run) {
  int64_t unit_end[kMaxMultiWeights];
  int64_t total = 0, rows = 0;
  for (size_t i = 0; i < ws.size(); ++i) {
    total += Units(*ws[i]);
    rows += ws[i]->rows;
    unit_end[i] = total;
  }
  if (total == 0) return;
  auto work = [&](int64_t u0, int64_t u1) {
    int64_t begin = 0;
    for (size_t i = 0; i < ws.size() && u0 < u1; ++i) {
      const int64_t end = unit_end[i];
      if (u0 < end) {
        const int64_t e = std::min(u1, end);
        run(i, u0 - begin, e - begin);
        u0 = e;
      }
      begin = end;
    }
  };
  // Tiny problems are not worth waking the workers.
  const bool parallel = pool && pool->num_threads() > 1 && rows >= 32 &&
                        static_cast<double>(rows) * static_cast<double>(cols) * m >= 65536;
  if (!parallel) {
    work(0, total);
  } else if (m < kDynamicMaxRows) {
    DecodeRanges(*pool, total, work);
  } else {
    // Many rows: one contiguous range per thread (the GEMM kernels set up activation panels
    // per call).
    pool->ParallelFor(total, work);
  }
}

// Whether MatMulMultiAtLevel takes the AMX path: every weight reads the same inputs and has
// at least its type's threshold of activation rows.
bool UseAmx(SimdLevel level, std::span<const Weight* const> ws, int64_t m) {
  if (level < SimdLevel::kAmx) return false;
  for (const Weight* w : ws) {
    if (w->cols != ws[0]->cols || m < internal::AmxMinRows(w->type)) return false;
  }
  return true;
}

// Whether it takes the AMX int8 path instead (below the AMX-BF16 threshold): packed Q4_0 /
// Q8_0 weights that read the same inputs.
bool UseAmxInt8(SimdLevel level, std::span<const Weight* const> ws, int64_t m) {
  if (level < SimdLevel::kAmx || m < internal::AmxInt8MinRows()) return false;
  for (const Weight* w : ws) {
    if (w->cols != ws[0]->cols || !internal::AmxInt8Supports(*w)) return false;
  }
  return true;
}

// Checks every weight (CheckWeight) and that all read the same inputs; returns their cols.
// `who` names the caller in the messages. REQUIRES: !ws.empty().
int64_t CheckSameInputs(std::span<const Weight* const> ws, const char* who) {
  const int64_t cols = ws[0]->cols;
  for (const Weight* w : ws) {
    CheckWeight(*w);
    CHECK(w->cols == cols) << who << ": weights read different inputs";
  }
  return cols;
}

}  // namespace

namespace internal {

int64_t AmxInt8MinRows() {
  // Off unless TACHYON_AMX_INT8_MIN_M sets it: on the quiet machine it showed no gain over the
  // VNNI GEMM at the rows it would take (16 concurrent decodes of llama-1b Q4_0, alternating
  // runs, docs/kernels.md). One tile multiply per block and 16 weight rows
  // costs ~14 ns whatever the activation row count, and each result tile is stored and
  // re-read for its per-block scales (docs/kernels.md).
  static const int64_t rows = [] {
    const char* v = std::getenv("TACHYON_AMX_INT8_MIN_M");
    return v ? std::max<int64_t>(1, std::atoll(v)) : int64_t{1} << 62;
  }();
  return rows;
}

void MatMulMultiAmxInt8(std::span<const Weight* const> ws, const float* x, int64_t m,
                        std::span<float* const> ys, ThreadPool* pool) {
  CHECK(ws.size() == ys.size() && ws.size() <= kMaxMultiWeights) << "MatMulMulti: bad counts";
  CHECK(DetectedCpuFeatures().HasAmxSet()) << "MatMulMultiAmxInt8: no AMX";
  if (m <= 0 || ws.empty()) return;
  const int64_t cols = CheckSameInputs(ws, "MatMulMultiAmxInt8");
  for (const Weight* w : ws) {
    CHECK(AmxInt8Supports(*w)) << "MatMulMultiAmxInt8: not a packed Q4_0 / Q8_0 weight";
  }
  const AmxInt8Act l = AmxInt8Layout(cols, m);
  uint8_t* act = ThreadScratch<uint8_t, ActScratch>(l.bytes);
  auto convert = [&](int64_t b, int64_t e) { AmxInt8ConvertRows(x, cols, m, b, e, act); };
  if (pool && m >= 8) {
    pool->ParallelFor(l.mp, convert);
  } else {
    convert(0, l.mp);
  }
  ParallelUnits(ws, cols, m, pool, [&](size_t i, int64_t u0, int64_t u1) {
    AmxInt8RunTiles(*ws[i], act, m, ys[i], u0, u1);
  });
}

constexpr int64_t kNeverAmx = int64_t{1} << 62;

std::atomic<int64_t>& AmxMinRowsOverride() {
  static std::atomic<int64_t> forced = [] {
    const char* v = std::getenv("TACHYON_AMX_MIN_M");
    return v ? std::max<int64_t>(1, std::atoll(v)) : int64_t{0};
  }();
  return forced;
}

int64_t AmxMinRows(GgmlType type) {
  const int64_t forced = AmxMinRowsOverride().load(std::memory_order_relaxed);
  if (forced > 0) return forced;
  // Where the AMX path (dequantize each weight panel once to bf16, then ~2.2 T-op/s of tile
  // multiplies) overtakes the AVX-512 kernels at 2048 x 2048, one thread (MatMulAt/...
  // benchmarks, docs/kernels.md): below it the panel conversion costs more than the multiply
  // saves.
  switch (type) {
    // F32 / F16 run the hi / lo bf16 split (products to ~2^-16 relative; one bf16 alone moved
    // the reference models' logits 5x past their tolerances), three tile multiplies per step.
    // F16 overtakes its packed float kernels from 32 rows since its split panels come from
    // the packed tiles (2048 x 2048 / 2048 x 8192 at m = 32: 1.7 / 6.6 ms against 2.5 /
    // 16.1; at m = 16 even, docs/kernels.md). F32 would from 16, but F32 models promise
    // float-reassociation agreement between a chunked and a one-pass prompt (2e-4 on the
    // logits, model tests) and the split differs from the float kernels by up to 2.3e-4
    // there: F32 stays on them unless forced (TACHYON_AMX_MIN_M / SetAmxMinRows).
    case GgmlType::kF32:
      return kNeverAmx;
    case GgmlType::kF16:
      return 32;
    case GgmlType::kBF16:
      return 8;
    case GgmlType::kQ6_K:
      return 24;
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
      return 48;
    default:  // Q4_0, Q4_1, Q5_0, Q5_1, Q8_0
      return 32;
  }
}

void MatMulMultiAmx(std::span<const Weight* const> ws, const float* x, int64_t m,
                    std::span<float* const> ys, ThreadPool* pool, const InputRows* rows) {
  CHECK(ws.size() == ys.size() && ws.size() <= kMaxMultiWeights) << "MatMulMulti: bad counts";
  CHECK(DetectedCpuFeatures().HasAmxSet()) << "MatMulMultiAmx: no AMX";
  if (m <= 0 || ws.empty()) return;
  const int64_t cols = CheckSameInputs(ws, "MatMulMultiAmx");
  // bf16 activation rows, padded to a multiple of 16 rows (the A tiles' height).
  const int64_t mp = (m + 15) / 16 * 16;
  // F32 / F16 weights also read the activations' low halves, mp rows after the high ones.
  const bool split =
      std::any_of(ws.begin(), ws.end(), [](const Weight* w) { return AmxSplitType(w->type); });
  const size_t act_bytes = AmxActStride(cols) * static_cast<size_t>(mp);
  uint8_t* act = ThreadScratch<uint8_t, ActScratch>(act_bytes * (split ? 2 : 1));
  auto convert = [&](int64_t b, int64_t e) {
    AmxConvertRows(x, cols, m, b, e, act);
    if (split) AmxConvertRowsLow(x, cols, m, b, e, act + act_bytes);
  };
  // Produced rows: one block of 16 at a time into a buffer of this thread (L2), converted
  // from there, so the produced rows never pass through memory as a whole matrix.
  auto produce_convert = [&](int64_t q0, int64_t q1) {
    thread_local std::vector<float> buf;  // grow-only per thread
    if (buf.size() < static_cast<size_t>(16 * cols)) buf.resize(static_cast<size_t>(16 * cols));
    for (int64_t q = q0; q < q1; ++q) {
      const int64_t r0 = 16 * q, r1 = std::min(m, r0 + 16);
      for (int64_t i = r0; i < r1; ++i) rows->Row(i, buf.data() + (i - r0) * cols);
      AmxConvertRows(buf.data(), cols, m, r0, r0 + 16, act, r0);
      if (split) AmxConvertRowsLow(buf.data(), cols, m, r0, r0 + 16, act + act_bytes, r0);
    }
  };
  if (x == nullptr) {
    CHECK(rows != nullptr) << "MatMulMultiAmx: no input";
    if (pool && m >= 32) {
      pool->ParallelFor(mp / 16, produce_convert, 1);
    } else {
      produce_convert(0, mp / 16);
    }
  } else if (pool && m >= 8) {
    pool->ParallelFor(mp, convert);
  } else {
    convert(0, mp);
  }
  ParallelUnits(ws, cols, m, pool, [&](size_t i, int64_t u0, int64_t u1) {
    AmxRunTiles(*ws[i], act, m, ys[i], u0, u1);
  });
}

}  // namespace internal

void SetAmxMinRows(int64_t n) {
  static const int64_t from_env = internal::AmxMinRowsOverride().load();
  internal::AmxMinRowsOverride().store(n > 0 ? n : from_env);
}

namespace {

// All rows of `rows` produced into a float buffer of this thread (for the paths that read
// float activations).
const float* ProduceAll(const InputRows& rows, int64_t cols, int64_t m, ThreadPool* pool) {
  thread_local std::vector<float> buf;  // grow-only per thread
  const size_t need = static_cast<size_t>(cols) * static_cast<size_t>(m);
  if (buf.size() < need) buf.resize(need);
  float* b = buf.data();
  auto fill = [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) rows.Row(i, b + i * cols);
  };
  if (pool && m >= 8) {
    pool->ParallelFor(m, fill);
  } else {
    fill(0, m);
  }
  return b;
}

// One produced row, L1-resident until it is converted.
float* RowBuffer(int64_t cols) {
  thread_local std::vector<float> buf;  // grow-only per thread
  if (buf.size() < static_cast<size_t>(cols)) buf.resize(static_cast<size_t>(cols));
  return buf.data();
}

// MatMulMultiAtLevel on float rows x, or (x null) on the rows `rows` produces.
void MatMulMultiImpl(SimdLevel level, std::span<const Weight* const> ws, const float* x,
                     const InputRows* rows, int64_t m, std::span<float* const> ys,
                     ThreadPool* pool) {
  CHECK(ws.size() == ys.size() && ws.size() <= kMaxMultiWeights) << "MatMulMulti: bad counts";
  if (m <= 0 || ws.empty()) return;
  level = std::min(level, BestSimdLevel());
  const int64_t cols = ws[0]->cols;
  if (x == nullptr) CheckSameInputs(ws, "MatMulMultiRows");
  auto floats = [&] { return x != nullptr ? x : ProduceAll(*rows, cols, m, pool); };
  if (UseAmx(level, ws, m)) {
    internal::MatMulMultiAmx(ws, x, m, ys, pool, rows);
    return;
  }
  if (UseAmxInt8(level, ws, m)) {
    internal::MatMulMultiAmxInt8(ws, floats(), m, ys, pool);
    return;
  }
  const Impl* impls[kMaxMultiWeights];
  for (size_t i = 0; i < ws.size(); ++i) {
    CheckWeight(*ws[i]);
    impls[i] = &GetImpl(level, ws[i]->type);
    if (ws[i]->cols != cols || impls[i]->act != impls[0]->act ||
        (level >= SimdLevel::kAmx && m >= internal::AmxMinRows(ws[i]->type))) {
      // Different inputs or activation formats, or (at kAmx) a weight that takes the AMX path
      // at this m beside one that does not: one call each, so each takes MatMul's path.
      const float* xf = floats();
      for (size_t j = 0; j < ws.size(); ++j) {
        MatMulMultiImpl(level, ws.subspan(j, 1), xf, nullptr, m, ys.subspan(j, 1), pool);
      }
      return;
    }
  }
  const Impl& first = *impls[0];
  const uint8_t* act = nullptr;
  size_t stride = static_cast<size_t>(cols) * sizeof(float);
  if (first.act == ActFormat::kF32) {
    act = reinterpret_cast<const uint8_t*>(floats());
  } else {
    stride = internal::ActRowBytes(first.act, cols);
    uint8_t* buf = ThreadScratch<uint8_t, ActScratch>(stride * static_cast<size_t>(m));
    auto convert = [&](int64_t b, int64_t e) {
      float* row = x != nullptr ? nullptr : RowBuffer(cols);
      for (int64_t i = b; i < e; ++i) {
        const float* xi = row;
        if (x != nullptr) {
          xi = x + i * cols;
        } else {  // produce the row, then convert it while it is in L1
          rows->Row(i, row);
        }
        first.quantize(xi, cols, buf + i * stride);
      }
    };
    if (pool && m >= 8) {
      pool->ParallelFor(m, convert);
    } else {
      convert(0, m);
    }
    act = buf;
  }
  ParallelUnits(ws, cols, m, pool, [&](size_t i, int64_t u0, int64_t u1) {
    RunUnits(*impls[i], *ws[i], act, stride, m, ys[i], u0, u1);
  });
}

// Rows [first, first + n) of another InputRows.
class ShiftedRows final : public InputRows {
 public:
  ShiftedRows(const InputRows& rows, int64_t first) : rows_(rows), first_(first) {}
  void Row(int64_t i, float* out) const override { rows_.Row(first_ + i, out); }

 private:
  const InputRows& rows_;
  int64_t first_;
};

// MatMulMultiImpl at the best level with the first `decode_rows` rows on the AVX-512 kernels
// (matmul.h, decode rows).
void MatMulMultiDecodeRows(std::span<const Weight* const> ws, const float* x, const InputRows* rows,
                           int64_t m, std::span<float* const> ys, ThreadPool* pool,
                           int64_t decode_rows) {
  const SimdLevel level = BestSimdLevel();
  CHECK(decode_rows >= 0 && decode_rows <= m) << "MatMul: decode_rows outside [0, m]";
  if (level < SimdLevel::kAmx || decode_rows == 0) {
    MatMulMultiImpl(level, ws, x, rows, m, ys, pool);
    return;
  }
  MatMulMultiImpl(SimdLevel::kAvx512, ws, x, rows, decode_rows, ys, pool);
  if (decode_rows == m) return;
  CHECK(ys.size() <= kMaxMultiWeights) << "MatMulMulti: bad counts";
  float* rest[kMaxMultiWeights];
  for (size_t i = 0; i < ys.size(); ++i) rest[i] = ys[i] + decode_rows * ws[i]->rows;
  const std::span<float* const> ys_rest(rest, ys.size());
  if (x != nullptr) {
    MatMulMultiImpl(level, ws, x + decode_rows * ws[0]->cols, nullptr, m - decode_rows, ys_rest,
                    pool);
  } else {
    const ShiftedRows shifted(*rows, decode_rows);
    MatMulMultiImpl(level, ws, nullptr, &shifted, m - decode_rows, ys_rest, pool);
  }
}

}  // namespace

void MatMulMultiAtLevel(SimdLevel level, std::span<const Weight* const> ws, const float* x,
                        int64_t m, std::span<float* const> ys, ThreadPool* pool) {
  MatMulMultiImpl(level, ws, x, nullptr, m, ys, pool);
}

void MatMulMultiRowsAtLevel(SimdLevel level, std::span<const Weight* const> ws, const InputRows& x,
                            int64_t m, std::span<float* const> ys, ThreadPool* pool) {
  MatMulMultiImpl(level, ws, nullptr, &x, m, ys, pool);
}

void MatMulMultiRows(std::span<const Weight* const> ws, const InputRows& x, int64_t m,
                     std::span<float* const> ys, ThreadPool* pool, int64_t decode_rows) {
  MatMulMultiDecodeRows(ws, nullptr, &x, m, ys, pool, decode_rows);
}

void MatMulMulti(std::span<const Weight* const> ws, const float* x, int64_t m,
                 std::span<float* const> ys, ThreadPool* pool, int64_t decode_rows) {
  MatMulMultiDecodeRows(ws, x, nullptr, m, ys, pool, decode_rows);
}

void MatMulAtLevel(SimdLevel level, const Weight& w, const float* x, int64_t m, float* y,
                   ThreadPool* pool) {
  const Weight* ws[1] = {&w};
  float* ys[1] = {y};
  MatMulMultiAtLevel(level, ws, x, m, ys, pool);
}

void MatMul(const Weight& w, const float* x, int64_t m, float* y, ThreadPool* pool,
            int64_t decode_rows) {
  const Weight* ws[1] = {&w};
  float* ys[1] = {y};
  MatMulMultiDecodeRows(ws, x, nullptr, m, ys, pool, decode_rows);
}

void MatMulReference(const Weight& w, const float* x, int64_t m, float* y) {
  std::vector<float> row(static_cast<size_t>(w.cols));
  const auto* base = static_cast<const uint8_t*>(w.data);
  const size_t row_bytes = w.row_bytes ? w.row_bytes : RowBytes(w.type, w.cols);
  for (int64_t j = 0; j < w.rows; ++j) {
    DequantizeRow(w.type, base + static_cast<size_t>(j) * row_bytes, row.data(), w.cols);
    for (int64_t i = 0; i < m; ++i) {
      double s = 0;
      const float* xi = x + i * w.cols;
      for (int64_t c = 0; c < w.cols; ++c) s += static_cast<double>(row[c]) * xi[c];
      y[i * w.rows + j] = static_cast<float>(s);
    }
  }
}

}  // namespace tachyon::kernels
