// Why AMX int8 does not beat the VNNI GEMM for a few activation rows (batched decode) on the
// development VM: one 16 x 16 x 32 tile multiply per 32-element block (the per-block scales of
// Q4_0 / Q8_0 force K = 32) must hand its int32 tile to AVX-512 for scaling, and the tile work
// and the vector fold do not overlap. Per block-tile (CPU ns, one thread):
//   TileOnly    tilezero + A / B tile loads + TDPBSSD + tilestored
//   FoldOnly    the fold alone: 16 x (load C row, cvt, mul by dx, fma with dw)
//   Lag/N       both, the fold reading the tile stored N blocks earlier
//   Batch4      both, four multiplies issued before the previous four tiles are folded
// If the units overlapped, Lag / Batch4 would cost max(TileOnly, FoldOnly); docs/kernels.md
// records that they cost the sum or more.
//
//   build/amx_handoff_bench [--benchmark_min_time=0.2]
// GCC 12 flags the intrinsics' internal _mm512_undefined_* under function-level target
// attributes (this file is built without AVX-512 flags, like every benchmark) as uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstdint>

#include "kernels/amx.h"
#include "util/cpu_features.h"

namespace tachyon {
namespace {

constexpr int kBlocks = 64;  // A, B and the scales of 64 blocks: 72 KiB, L1 / L2 resident

struct Data {
  alignas(64) int8_t a[kBlocks][512];   // A tiles: 16 rows x 32 codes
  alignas(64) int8_t b[kBlocks][512];   // B tiles: 8 rows x 64 bytes
  alignas(64) int32_t c[2][4][256];     // stored C tiles
  alignas(64) float dx[kBlocks][16];
  alignas(64) float dw[kBlocks][16];
};
Data* Shared() {
  static Data* d = [] {
    auto* p = new Data();
    for (int i = 0; i < kBlocks; ++i) {
      for (int j = 0; j < 512; ++j) {
        p->a[i][j] = static_cast<int8_t>((i * 7 + j * 3) % 255 - 127);
        p->b[i][j] = static_cast<int8_t>((i * 5 + j) % 15 - 8);
      }
      for (int j = 0; j < 16; ++j) {
        p->dx[i][j] = 0.01f * static_cast<float>(j + 1);
        p->dw[i][j] = 0.02f * static_cast<float>(i % 5 + 1);
      }
    }
    return p;
  }();
  return d;
}

void Configure() {
  kernels::TileConfig cfg;
  for (int t = 0; t < 4; ++t) cfg.Set(t, 16, 64);  // C
  cfg.Set(4, 16, 32);                              // A
  cfg.Set(5, 16, 32);
  cfg.Set(6, 8, 64);  // B
  cfg.Set(7, 8, 64);
  kernels::LoadTileConfig(cfg);
}

#define TACHYON_AMX_TARGET __attribute__((target("amx-tile,amx-int8,avx512f,avx512dq"), noinline))

TACHYON_AMX_TARGET void Fold(__m512* acc, const int32_t* c, const float* dx, const float* dw) {
  const __m512 w = _mm512_load_ps(dw);
#pragma GCC unroll 16
  for (int r = 0; r < 16; ++r) {
    const __m512 v = _mm512_cvtepi32_ps(_mm512_load_si512(c + 16 * r));
    acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(v, _mm512_set1_ps(dx[r])), w, acc[r]);
  }
}

// mode 0: tiles only, 1: fold only, 2..4: both with the fold lagging 1..3 blocks.
template <int kMode>
TACHYON_AMX_TARGET float RunLag(Data* d, int64_t iters) {
  constexpr int kLag = kMode >= 2 ? kMode - 1 : 1;
  __m512 acc[16];
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (int64_t it = 0; it < iters; it += 4) {
#define TACHYON_STEP(u, at, bt)                                                         \
  {                                                                                     \
    const int b = static_cast<int>((it + u) % kBlocks);                                 \
    if (kMode != 1) {                                                                   \
      _tile_zero(u);                                                                    \
      _tile_loadd(at, d->a[b], 32);                                                     \
      _tile_loadd(bt, d->b[b], 64);                                                     \
      _tile_dpbssd(u, at, bt);                                                          \
    }                                                                                   \
    if (kMode != 0) {                                                                   \
      const int pb = (b + kBlocks - kLag) % kBlocks;                                    \
      Fold(acc, d->c[0][(u + 4 - kLag) % 4], d->dx[pb], d->dw[pb]);                     \
    }                                                                                   \
    if (kMode != 1) _tile_stored(u, d->c[0][u], 64);                                    \
  }
    TACHYON_STEP(0, 4, 6)
    TACHYON_STEP(1, 5, 7)
    TACHYON_STEP(2, 4, 6)
    TACHYON_STEP(3, 5, 7)
#undef TACHYON_STEP
  }
  float s = 0;
  for (auto& a : acc) s += _mm512_reduce_add_ps(a);
  return s;
}

TACHYON_AMX_TARGET float RunBatch4(Data* d, int64_t iters) {
  __m512 acc[16];
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (int64_t it = 0; it < iters; it += 4) {
    const int b = static_cast<int>(it % kBlocks);
    const int cur = static_cast<int>((it / 4) & 1);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, d->a[b], 32);
    _tile_loadd(6, d->b[b], 64);
    _tile_dpbssd(0, 4, 6);
    _tile_loadd(5, d->a[b + 1], 32);
    _tile_loadd(7, d->b[b + 1], 64);
    _tile_dpbssd(1, 5, 7);
    _tile_loadd(4, d->a[b + 2], 32);
    _tile_loadd(6, d->b[b + 2], 64);
    _tile_dpbssd(2, 4, 6);
    _tile_loadd(5, d->a[b + 3], 32);
    _tile_loadd(7, d->b[b + 3], 64);
    _tile_dpbssd(3, 5, 7);
    for (int u = 0; u < 4; ++u) {  // the previous batch, stored one batch ago
      const int pb = (b + u + kBlocks - 4) % kBlocks;
      Fold(acc, d->c[cur ^ 1][u], d->dx[pb], d->dw[pb]);
    }
    _tile_stored(0, d->c[cur][0], 64);
    _tile_stored(1, d->c[cur][1], 64);
    _tile_stored(2, d->c[cur][2], 64);
    _tile_stored(3, d->c[cur][3], 64);
  }
  float s = 0;
  for (auto& a : acc) s += _mm512_reduce_add_ps(a);
  return s;
}

template <typename Fn>
void Measure(benchmark::State& state, Fn fn) {
  if (!DetectedCpuFeatures().HasAmxSet()) {
    state.SkipWithError("needs AMX (amx-tile, amx-int8, OS tile state)");
    return;
  }
  Configure();
  constexpr int64_t kIters = 1 << 16;  // block-tiles per benchmark iteration
  for (auto _ : state) benchmark::DoNotOptimize(fn(Shared(), kIters));
  kernels::ReleaseTiles();
  state.counters["ns/block-tile"] = benchmark::Counter(
      static_cast<double>(kIters), benchmark::Counter::kIsIterationInvariantRate |
                                       benchmark::Counter::kInvert);
}

void BM_TileOnly(benchmark::State& s) { Measure(s, RunLag<0>); }
void BM_FoldOnly(benchmark::State& s) { Measure(s, RunLag<1>); }
void BM_Lag1(benchmark::State& s) { Measure(s, RunLag<2>); }
void BM_Lag2(benchmark::State& s) { Measure(s, RunLag<3>); }
void BM_Lag3(benchmark::State& s) { Measure(s, RunLag<4>); }
void BM_Batch4(benchmark::State& s) { Measure(s, RunBatch4); }
BENCHMARK(BM_TileOnly);
BENCHMARK(BM_FoldOnly);
BENCHMARK(BM_Lag1);
BENCHMARK(BM_Lag2);
BENCHMARK(BM_Lag3);
BENCHMARK(BM_Batch4);

}  // namespace
}  // namespace tachyon

BENCHMARK_MAIN();
