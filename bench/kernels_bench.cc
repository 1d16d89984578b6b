// Kernel micro-benchmarks: MatMul per weight type at Llama-3.2-1B matrix shapes and per M
// regime (decode m = 1, batched decode m = 4 / 8 / 16 / 64, prefill m = 512), plus the machine's
// peaks measured in the same run: a memory-read probe and int8 (vpdpbusd) / bf16
// (vdpbf16ps) / AMX bf16 (tdpbf16ps) compute probes; MatMulAt/... runs the AVX-512 and the AMX
// kernels side by side at each m (where the AMX threshold goes).
//
//   scripts/build.sh release && cmake --build build -j2 --target kernels_bench
//   build/kernels_bench --benchmark_filter='Peak|MemRead|MatMul/Q4_0/.*/m:1/' [--benchmark_min_time=0.3s]
//
// Counters: WGB/s = weight bytes streamed per second (meaningful at m = 1, where decode is
// bandwidth-bound); GOP/s = 2 * m * rows * cols per second (meaningful at large m);
// of_int8_peak = GOP/s as a fraction of the int8 compute peak (kernels/peak.h) measured once
// per process with the same thread count (a plain fraction: Google Benchmark prints rate
// counters with a "/s" suffix). The matrices fit this VM's 300 MiB L3, so WGB/s is not the
// decode roofline; `tachyon bench` measures that.
// MemRead/threads:N reads a 1 GiB array (AVX-512 loads where available) — compare WGB/s
// with it; PeakInt8 / PeakBf16 run independent vpdpbusd / vdpbf16ps chains on registers
// (GOP/s, 2 ops per multiply-add) — compare GOP/s with them. Weights with a packed layout
// (kernels/pack.h) are packed as the model loader does; MatMulUnpacked/... runs the same
// matrices in the GGUF layout. One-thread rates use CPU time (robust on a shared,
// time-sliced machine); two-thread rates use wall time (meaningful only on a quiet machine).
#include <benchmark/benchmark.h>
#include <sys/mman.h>
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/amx.h"
#include "kernels/bf16_panel.h"
#include "kernels/fused_rows.h"
#include "kernels/peak.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/pack.h"
#include "util/cpu_features.h"
#include "util/thread_pool.h"

namespace tachyon {
namespace {

ThreadPool* Pool(int n) {
  static std::map<int, std::unique_ptr<ThreadPool>> pools;
  auto& p = pools[n];
  if (!p) p = std::make_unique<ThreadPool>(n);
  return p.get();
}

// Weights: 16 distinct properly quantized rows repeated (speed does not depend on values,
// but realistic scales avoid denormals). One matrix cached at a time.
struct Matrix {
  GgmlType type;
  int64_t rows = 0, cols = 0;
  std::vector<uint8_t> data;
  kernels::AlignedBuffer packed;  // null when the type has no packed layout
};
const Matrix& GetMatrix(GgmlType type, int64_t rows, int64_t cols) {
  static Matrix m;
  if (m.type == type && m.rows == rows && m.cols == cols && !m.data.empty()) return m;
  m.data.clear();
  m.data.shrink_to_fit();
  m.type = type;
  m.rows = rows;
  m.cols = cols;
  const size_t rb = RowBytes(type, cols);
  m.data.resize(rb * rows);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  std::vector<float> row(cols);
  for (int64_t r = 0; r < std::min<int64_t>(rows, 16); ++r) {
    for (float& v : row) v = nd(rng);
    kernels::QuantizeRow(type, row.data(), m.data.data() + r * rb, cols);
  }
  for (int64_t r = 16; r < rows; ++r)
    std::memcpy(m.data.data() + r * rb, m.data.data() + (r % 16) * rb, rb);
  m.packed.reset();
  if (kernels::HasPackedLayout(type)) {
    m.packed = kernels::AllocateAligned(kernels::PackedBytes(type, rows, cols));
    kernels::Weight w{type, rows, cols, m.data.data(), rb};
    kernels::PackWeight(w, m.packed.get(), nullptr);
  }
  return m;
}

// The int8 compute peak for the fraction-of-peak counters (defined below).
double Int8PeakGops(int threads);

void BM_MatMul(benchmark::State& state, GgmlType type, int64_t rows, int64_t cols, int64_t m,
               int threads, bool packed) {
  const Matrix& mat = GetMatrix(type, rows, cols);
  kernels::Weight w{type, rows, cols, mat.data.data(), RowBytes(type, cols)};
  if (packed) w.packed = mat.packed.get();
  std::vector<float> x(m * cols), y(m * rows);
  std::mt19937 rng(2);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (float& v : x) v = nd(rng);
  ThreadPool* pool = Pool(threads);
  for (auto _ : state) {
    kernels::MatMul(w, x.data(), m, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  const double bytes = static_cast<double>(mat.data.size());
  state.counters["WGB/s"] =
      benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GOP/s"] = benchmark::Counter(2.0 * m * rows * cols / 1e9,
                                               benchmark::Counter::kIsIterationInvariantRate);
  // Fraction of the int8 compute roofline (for many rows; decode's roofline is the memory
  // one, which these L3-resident matrices do not show: `tachyon bench` measures it).
  if (const double peak = Int8PeakGops(threads); peak > 0) {
    state.counters["of_int8_peak"] = benchmark::Counter(
        2.0 * m * rows * cols / (peak * 1e9), benchmark::Counter::kIsIterationInvariantRate);
  }
}

// One decode step's matmuls of a small model, in the order a layer runs them, from memory:
// SmolLM2-135M's 30 layers (q / k / v 576 + 192 + 192 rows in one pass, o, gate / up in one
// pass, down; Q4_1, packed) and its 49152-row Q8_0 output matrix, m = 1, every matrix a copy
// of its own laid out one after another in load order (96.6 MB, so they stream from DRAM as in
// `tachyon bench`) on 4 KiB pages ("4k") or transparent 2 MiB pages ("2m", where the kernel
// grants them). "one": the same Q4_1 bytes as a single 576-column matrix and the output matrix
// (2 MiB pages): what the 121 passes lose against one long stream. WGB/s against MemRead.
// DecodeChain/{4k,2m,one}/threads:N
void BM_DecodeChain(benchmark::State& state, int variant, int threads) {
  constexpr int kLayers = 30, kPerLayer = 7;
  struct Shape {
    int64_t rows, cols;
  };
  const Shape layer[kPerLayer] = {{576, 576},  {192, 576},  {192, 576}, {576, 576},
                                  {1536, 576}, {1536, 576}, {576, 1536}};
  std::vector<Shape> shapes;
  if (variant == 2) {
    int64_t rows = 0;
    for (const Shape& sh : layer) rows += sh.rows * sh.cols / 576;
    shapes.push_back({kLayers * rows, 576});
  } else {
    for (int l = 0; l < kLayers; ++l) shapes.insert(shapes.end(), layer, layer + kPerLayer);
  }
  size_t total = 0;
  for (const Shape& sh : shapes) total += kernels::PackedBytes(GgmlType::kQ4_1, sh.rows, sh.cols);
  total += kernels::PackedBytes(GgmlType::kQ8_0, 49152, 576);
  // 2 MiB aligned and advised onto huge pages (untouched yet, so "4k" can still opt out).
  kernels::AlignedBuffer arena = kernels::AllocateAligned(total);
  if (variant == 0) madvise(arena.get(), total, MADV_NOHUGEPAGE);
  uint8_t* next = arena.get();
  std::vector<kernels::Weight> ws;
  auto add = [&](GgmlType type, int64_t rows, int64_t cols) {
    const Matrix& mat = GetMatrix(type, rows, cols);  // `data` is read only by other paths
    kernels::Weight w{type, rows, cols, nullptr, RowBytes(type, cols)};
    std::memcpy(next, mat.packed.get(), kernels::PackedBytes(type, rows, cols));
    w.packed = next;
    next += kernels::PackedBytes(type, rows, cols);
    ws.push_back(w);
  };
  for (const Shape& sh : shapes) add(GgmlType::kQ4_1, sh.rows, sh.cols);
  add(GgmlType::kQ8_0, 49152, 576);
  double weight_bytes = 0;
  for (const kernels::Weight& w : ws) weight_bytes += static_cast<double>(w.rows * w.row_bytes);
  int64_t max_rows = 0;
  for (const kernels::Weight& w : ws) max_rows = std::max(max_rows, w.rows);
  std::vector<float> x(1536, 0.5f), y(static_cast<size_t>(max_rows));
  ThreadPool* pool = Pool(threads);
  float* y3[] = {y.data(), y.data() + 576, y.data() + 768};
  float* y2[] = {y.data(), y.data() + 1536};
  for (auto _ : state) {
    if (variant == 2) {
      kernels::MatMul(ws[0], x.data(), 1, y.data(), pool);
    } else {
      for (int l = 0; l < kLayers; ++l) {
        const kernels::Weight* w = ws.data() + kPerLayer * l;
        const kernels::Weight* qkv[] = {w, w + 1, w + 2};
        kernels::MatMulMulti(qkv, x.data(), 1, y3, pool);
        kernels::MatMul(w[3], x.data(), 1, y.data(), pool);
        const kernels::Weight* gate_up[] = {w + 4, w + 5};
        kernels::MatMulMulti(gate_up, x.data(), 1, y2, pool);
        kernels::MatMul(w[6], x.data(), 1, y.data(), pool);
      }
    }
    kernels::MatMul(ws.back(), x.data(), 1, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["WGB/s"] =
      benchmark::Counter(weight_bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

// A matmul fed by an elementwise op, the op fused into the activation conversion
// (MatMulMultiRows with kernels/fused_rows.h) or run as its own pass first, as a layer runs
// them: "norm" = residual add + RMSNorm into a 2048 -> rows matrix (the FFN gate / up input),
// "silu" = SiLU(gate) * up into the 8192 -> 2048 down matrix. One thread, CPU time.
// FusedInput/.../m:{1,16,512}/{separate,fused}
void BM_FusedInput(benchmark::State& state, GgmlType type, bool silu, int64_t m, bool fused) {
  const int64_t cols = silu ? 8192 : 2048, rows = silu ? 2048 : 8192;
  const Matrix& mat = GetMatrix(type, rows, cols);
  kernels::Weight w{type, rows, cols, mat.data.data(), RowBytes(type, cols)};
  w.packed = mat.packed.get();
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> a(m * cols), b(m * cols), norm_w(cols), tmp(m * cols), y(m * rows);
  for (float& v : a) v = nd(rng);
  for (float& v : norm_w) v = nd(rng);
  // silu: a = gate, b = up; norm: a = x, b = delta = 0 (x keeps its values over iterations).
  if (silu) {
    for (float& v : b) v = nd(rng);
  }
  const kernels::Weight* ws[] = {&w};
  float* ys[] = {y.data()};
  for (auto _ : state) {
    if (fused) {
      if (silu) {
        kernels::MatMulMultiRows(ws, kernels::GatedMulRows(a.data(), b.data(), cols), m, ys,
                                 nullptr);
      } else {
        kernels::MatMulMultiRows(
            ws, kernels::RmsNormRows(a.data(), b.data(), norm_w.data(), cols, 1e-5f), m, ys,
            nullptr);
      }
    } else {
      if (silu) {
        kernels::SiluMul(a.data(), b.data(), tmp.data(), m * cols);
      } else {
        kernels::AddRmsNorm(a.data(), b.data(), norm_w.data(), tmp.data(), m, cols, 1e-5f);
      }
      kernels::MatMul(w, tmp.data(), m, y.data(), nullptr);
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GOP/s"] = benchmark::Counter(2.0 * m * rows * cols / 1e9,
                                               benchmark::Counter::kIsIterationInvariantRate);
}

// One row-count regime on one kernel family: "avx512" = the VNNI / AVX-512 kernels (what
// TACHYON_CPU=avx512 runs), "amx" = the AMX bf16 path whatever m (SetAmxMinRows(1)),
// "amx-int8" = the AMX int8 path of packed Q4_0 / Q8_0 whatever m >= 2 (the bf16 path off).
// Compare them per type and m to place kernels::internal::AmxMinRows / AmxInt8MinRows; one
// thread, CPU time.
void BM_MatMulAt(benchmark::State& state, GgmlType type, int64_t rows, int64_t cols, int64_t m,
                 SimdLevel level, bool int8 = false) {
  if (level > BestSimdLevel()) {
    state.SkipWithError("level not available on this CPU (or capped by TACHYON_CPU)");
    return;
  }
  const Matrix& mat = GetMatrix(type, rows, cols);
  kernels::Weight w{type, rows, cols, mat.data.data(), RowBytes(type, cols)};
  w.packed = mat.packed.get();
  std::vector<float> x(m * cols), y(m * rows);
  std::mt19937 rng(2);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (float& v : x) v = nd(rng);
  if (level == SimdLevel::kAmx) kernels::SetAmxMinRows(int8 ? int64_t{1} << 40 : 1);
  for (auto _ : state) {
    kernels::MatMulAtLevel(level, w, x.data(), m, y.data(), nullptr);
    benchmark::DoNotOptimize(y.data());
  }
  kernels::SetAmxMinRows(0);
  state.counters["GOP/s"] = benchmark::Counter(2.0 * m * rows * cols / 1e9,
                                               benchmark::Counter::kIsIterationInvariantRate);
  if (const double peak = Int8PeakGops(1); peak > 0) {
    state.counters["of_int8_peak"] = benchmark::Counter(
        2.0 * m * rows * cols / (peak * 1e9), benchmark::Counter::kIsIterationInvariantRate);
  }
}

__attribute__((target("avx512f"))) uint64_t ReadAvx512(const uint8_t* p, size_t n) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 256 <= n; i += 256) {
    a0 = _mm512_xor_si512(a0, _mm512_load_si512(p + i));
    a1 = _mm512_xor_si512(a1, _mm512_load_si512(p + i + 64));
    a2 = _mm512_xor_si512(a2, _mm512_load_si512(p + i + 128));
    a3 = _mm512_xor_si512(a3, _mm512_load_si512(p + i + 192));
  }
  const __m512i a = _mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3));
  alignas(64) uint64_t out[8];
  _mm512_store_si512(out, a);
  return out[0] ^ out[7];
}
uint64_t ReadPlain(const uint8_t* p, size_t n) {
  uint64_t s = 0;
  for (size_t i = 0; i + 8 <= n; i += 8) {
    uint64_t v;
    std::memcpy(&v, p + i, 8);
    s ^= v;
  }
  return s;
}

// The int8 compute peak (kernels/peak.h), measured once per process and thread count, for
// the of_int8_peak counters (the fraction of the peak a MatMul benchmark reaches).
double Int8PeakGops(int threads) {
  static std::map<int, double> peaks;
  auto it = peaks.find(threads);
  if (it == peaks.end()) {
    it = peaks.emplace(threads, kernels::MeasureComputePeak(Pool(threads)).int8_gops).first;
  }
  return it->second;
}
void BM_MemRead(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  constexpr size_t kBytes = size_t{1} << 30;
  static uint8_t* buf = [] {
    auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, kBytes));
    std::memset(p, 1, kBytes);
    return p;
  }();
  const bool avx512 = DetectedCpuFeatures().avx512f;
  ThreadPool* pool = Pool(threads);
  std::vector<uint64_t> sink(threads);
  for (auto _ : state) {
    pool->Run([&](int tid, int n) {
      const size_t chunk = kBytes / n / 256 * 256;
      const uint8_t* p = buf + chunk * tid;
      sink[tid] = avx512 ? ReadAvx512(p, chunk) : ReadPlain(p, chunk);
    });
    benchmark::DoNotOptimize(sink.data());
  }
  state.counters["GB/s"] =
      benchmark::Counter(kBytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

// Repacking at load (kernels/pack.h): GB/s of GGUF bytes packed, one thread.
void BM_Pack(benchmark::State& state, GgmlType type, int64_t rows, int64_t cols) {
  const Matrix& mat = GetMatrix(type, rows, cols);
  kernels::Weight w{type, rows, cols, mat.data.data(), RowBytes(type, cols)};
  kernels::AlignedBuffer out = kernels::AllocateAligned(kernels::PackedBytes(type, rows, cols));
  for (auto _ : state) {
    kernels::PackWeight(w, out.get(), nullptr);
    benchmark::DoNotOptimize(out.get());
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(mat.data.size()) / 1e9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}

// bf16 weight panels for the AMX GEMM (kernels/bf16_panel.h): the whole matrix as 16-row
// tiles x kc = 256 input panels into one L1-resident buffer, as the GEMM consumes them.
// Gelem/s = weight elements dequantized per second (one thread, CPU time); "ref" runs the
// scalar reference, "gguf" reads the GGUF layout of a type that is normally packed.
void BM_Panel(benchmark::State& state, GgmlType type, int64_t rows, int64_t cols, bool packed,
              bool reference) {
  const Matrix& mat = GetMatrix(type, rows, cols);
  kernels::Weight w{type, rows, cols, mat.data.data(), RowBytes(type, cols)};
  if (packed) w.packed = mat.packed.get();
  constexpr int64_t kc = 256;
  alignas(64) static uint16_t panel[kc * 16];
  const int64_t tiles = (rows + 15) / 16;
  for (auto _ : state) {
    for (int64_t t = 0; t < tiles; ++t) {
      for (int64_t k0 = 0; k0 < cols; k0 += kc) {
        if (reference) {
          kernels::DequantPanelBf16Reference(w, t, k0, kc, panel);
        } else {
          kernels::DequantPanelBf16(w, t, k0, kc, panel);
        }
        benchmark::DoNotOptimize(panel);
      }
    }
  }
  state.counters["Gelem/s"] = benchmark::Counter(static_cast<double>(rows) * cols / 1e9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

// Compute peaks: 12 independent accumulator chains per thread (enough to cover latency).
constexpr int kPeakIters = 1 << 20;
// The int8 loop is the one `tachyon bench` measures its roofline with (kernels/peak.h).
__attribute__((target("avx512f,avx512bf16"))) float PeakBf16Loop(int iters) {
  __m512 acc[12];
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = (__m512bh)_mm512_set1_epi16(0x3c00);
  for (int it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) {
      acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
      asm volatile("" : "+v"(acc[i]));
    }
  }
  __m512 s = acc[0];
#pragma GCC unroll 12
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  alignas(64) float out[16];
  _mm512_store_ps(out, s);
  return out[0];
}

// AMX TDPBF16PS into 4 independent accumulator tiles (16 x 16 f32 += 16 x 32 bf16 · 32 x 16
// bf16: 16384 ops each); A / B tiles loaded once. Only called where HasAmxSet().
__attribute__((target("amx-tile,amx-bf16"))) float PeakAmxBf16Loop(int iters) {
  kernels::TileConfig cfg;
  for (int i = 0; i < kernels::kAmxTiles; ++i) cfg.Set(i, 16, 64);
  kernels::LoadTileConfig(cfg);
  alignas(64) static const uint16_t ab[16 * 32] = {};
  alignas(64) float c[16 * 16];
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, ab, 64);
  _tile_loadd(5, ab, 64);
  _tile_loadd(6, ab, 64);
  _tile_loadd(7, ab, 64);
  for (int it = 0; it < iters; ++it) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c, 64);
  kernels::ReleaseTiles();
  return c[0];
}
void BM_PeakAmxBf16(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  if (!DetectedCpuFeatures().HasAmxSet()) {
    state.SkipWithError("needs AMX (amx-tile, amx-bf16, OS tile state)");
    return;
  }
  constexpr int kIters = 1 << 18;
  ThreadPool* pool = Pool(threads);
  std::vector<double> sink(threads);
  for (auto _ : state) {
    pool->Run([&](int tid, int) { sink[tid] = PeakAmxBf16Loop(kIters); });
    benchmark::DoNotOptimize(sink.data());
  }
  const double ops = 4.0 * kIters * 16384 * threads;
  state.counters["GOP/s"] =
      benchmark::Counter(ops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

// ops_per_instr: 128 for vpdpbusd zmm (64 multiply-adds), 64 for vdpbf16ps zmm.
void BM_Peak(benchmark::State& state, bool int8) {
  const int threads = static_cast<int>(state.range(0));
  const CpuFeatures& f = DetectedCpuFeatures();
  if (int8 ? !(f.avx512f && f.avx512vnni) : !(f.avx512f && f.avx512bf16)) {
    state.SkipWithError("needs AVX-512 VNNI / BF16");
    return;
  }
  ThreadPool* pool = Pool(threads);
  std::vector<double> sink(threads);
  for (auto _ : state) {
    pool->Run([&](int tid, int) {
      sink[tid] =
          int8 ? kernels::internal::PeakInt8Avx512(kPeakIters) : PeakBf16Loop(kPeakIters);
    });
    benchmark::DoNotOptimize(sink.data());
  }
  const double ops =
      (int8 ? kernels::internal::kPeakOpsPerIterAvx512 : 12.0 * 64) * kPeakIters * threads;
  state.counters["GOP/s"] =
      benchmark::Counter(ops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void RegisterAll() {
  for (int threads : {1, 2}) {
    for (bool int8 : {true, false}) {
      const std::string name = std::string(int8 ? "PeakInt8" : "PeakBf16") +
                               "/threads:" + std::to_string(threads);
      auto* b = benchmark::RegisterBenchmark(name.c_str(), BM_Peak, int8)->Arg(threads);
      b->Unit(benchmark::kMillisecond);
      if (threads > 1) b->UseRealTime();
    }
  }
  for (int threads : {1, 2}) {
    auto* b = benchmark::RegisterBenchmark(("PeakAmxBf16/threads:" + std::to_string(threads)).c_str(),
                                           BM_PeakAmxBf16)
                  ->Arg(threads)
                  ->Unit(benchmark::kMillisecond);
    if (threads > 1) b->UseRealTime();
  }
  for (bool silu : {false, true}) {
    for (int64_t m : {1, 16, 512}) {  // 512: the AMX path where the CPU has it
      for (bool fused : {false, true}) {
        const std::string name = std::string("FusedInput/") + (silu ? "silu" : "norm") +
                                 "/Q4_0/m:" + std::to_string(m) + (fused ? "/fused" : "/separate");
        benchmark::RegisterBenchmark(name.c_str(), BM_FusedInput, GgmlType::kQ4_0, silu, m, fused)
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  for (int v : {0, 1, 2}) {
    for (int threads : {1, 2}) {
      const char* names[] = {"4k", "2m", "one"};
      const std::string name =
          std::string("DecodeChain/") + names[v] + "/threads:" + std::to_string(threads);
      auto* b = benchmark::RegisterBenchmark(name.c_str(), BM_DecodeChain, v, threads);
      b->Unit(benchmark::kMillisecond);
      if (threads > 1) b->UseRealTime();
    }
  }
  benchmark::RegisterBenchmark("MemRead/threads:1", BM_MemRead)
      ->Arg(1)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("MemRead/threads:2", BM_MemRead)
      ->Arg(2)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  for (GgmlType t : {GgmlType::kQ4_0, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K,
                     GgmlType::kF16, GgmlType::kBF16}) {
    const std::string name = "Pack/" + std::string(TypeName(t)) + "/8192x2048";
    benchmark::RegisterBenchmark(name.c_str(), BM_Pack, t, 8192, 2048)
        ->Unit(benchmark::kMillisecond);
  }
  for (GgmlType t : {GgmlType::kQ4_0, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K,
                     GgmlType::kF16, GgmlType::kBF16, GgmlType::kF32, GgmlType::kQ4_1,
                     GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ2_K, GgmlType::kQ3_K,
                     GgmlType::kQ5_K}) {
    // Packed quantized layouts are read by the panel writer; F16/BF16 panels read w.data.
    const bool has_packed =
        kernels::HasPackedLayout(t) && t != GgmlType::kF16 && t != GgmlType::kBF16;
    // 2048x8192 streams from L3 / memory; 16x512 stays in L1 (the compute rate).
    for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{2048, 8192}, {16, 512}}) {
      for (const char* variant : {"fast", "gguf", "ref"}) {
        const std::string v = variant;
        if (v == "gguf" && !has_packed) continue;
        const std::string name = "Panel/" + std::string(TypeName(t)) + "/" + v + "/" +
                                 std::to_string(rows) + "x" + std::to_string(cols);
        benchmark::RegisterBenchmark(name.c_str(), BM_Panel, t, rows, cols,
                                     has_packed && v != "gguf", v == "ref")
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  const GgmlType types[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ8_0, GgmlType::kQ4_K,
                            GgmlType::kQ6_K, GgmlType::kF16,  GgmlType::kBF16};
  struct Shape {
    int64_t rows, cols;
  } shapes[] = {{2048, 2048},
                {8192, 2048},
                {2048, 8192},
                {128256, 2048},
                // SmolLM2-135M: the FFN's gate / up and down
                {1536, 576},
                {576, 1536},
                // Qwen2.5-Coder-1.5B: the k / v projection (in L2), the FFN's gate / up and down
                {256, 1536},
                {8960, 1536},
                {1536, 8960}};
  for (GgmlType t : types) {
    for (SimdLevel level : {SimdLevel::kAvx512, SimdLevel::kAmx}) {
      for (int64_t m : {2, 4, 8, 16, 32, 48, 64, 512}) {
        const std::string name = "MatMulAt/" + std::string(TypeName(t)) + "/2048x2048/m:" +
                                 std::to_string(m) + "/" + SimdLevelName(level);
        benchmark::RegisterBenchmark(name.c_str(), BM_MatMulAt, t, 2048, 2048, m, level, false)
            ->Unit(benchmark::kMillisecond);
      }
    }
    if (t != GgmlType::kQ4_0 && t != GgmlType::kQ8_0) continue;
    for (int64_t m : {2, 4, 8, 16, 32, 48, 64}) {
      const std::string name = "MatMulAt/" + std::string(TypeName(t)) + "/2048x2048/m:" +
                               std::to_string(m) + "/amx-int8";
      benchmark::RegisterBenchmark(name.c_str(), BM_MatMulAt, t, 2048, 2048, m, SimdLevel::kAmx,
                                   true)
          ->Unit(benchmark::kMillisecond);
    }
  }
  // F32 / F16 weights on AMX run the hi / lo bf16 split (three tile multiplies per step):
  // where it overtakes the float kernels, also over a long row (the down projection's 8192).
  for (GgmlType t : {GgmlType::kF32, GgmlType::kF16}) {
    for (const Shape& s : {Shape{2048, 2048}, Shape{2048, 8192}}) {
      if (t == GgmlType::kF16 && s.cols == 2048) continue;  // registered above
      for (SimdLevel level : {SimdLevel::kAvx512, SimdLevel::kAmx}) {
        for (int64_t m : {8, 16, 32, 64, 512}) {
          const std::string name = "MatMulAt/" + std::string(TypeName(t)) + "/" +
                                   std::to_string(s.rows) + "x" + std::to_string(s.cols) +
                                   "/m:" + std::to_string(m) + "/" + SimdLevelName(level);
          benchmark::RegisterBenchmark(name.c_str(), BM_MatMulAt, t, s.rows, s.cols, m, level,
                                       false)
              ->Unit(benchmark::kMillisecond);
        }
      }
    }
  }
  for (bool packed : {true, false}) {
    for (GgmlType t : types) {
      if (!packed && !kernels::HasPackedLayout(t)) continue;  // same as the packed run
      for (const Shape& s : shapes) {
        for (int64_t m : {1, 2, 3, 4, 6, 8, 9, 16, 64, 512}) {
          if (s.rows > 100000 && m > 16) continue;  // the output matrix runs for few rows
          for (int threads : {1, 2}) {
            const std::string name = std::string(packed ? "MatMul/" : "MatMulUnpacked/") +
                                     std::string(TypeName(t)) + "/" + std::to_string(s.rows) +
                                     "x" + std::to_string(s.cols) + "/m:" + std::to_string(m) +
                                     "/threads:" + std::to_string(threads);
            auto* b = benchmark::RegisterBenchmark(name.c_str(), BM_MatMul, t, s.rows, s.cols, m,
                                                   threads, packed);
            b->Unit(benchmark::kMillisecond);
            if (threads > 1) b->UseRealTime();
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tachyon

int main(int argc, char** argv) {
  tachyon::RegisterAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
