// Attention micro-benchmarks at Llama-3.2-1B's attention shape (32 query heads, 8 KV heads,
// head_dim 64, 16-token blocks), per KV dtype and SIMD level, one thread (CPU time, robust
// on a shared machine):
//   Prefill/<dtype>/<level>   a 512-token prompt from position 0 (pp512, one layer)
//   Decode/<dtype>/<level>/ctx:N   one token at context N
//   Chunk/<dtype>/<level>/rows:R   R new tokens after 512 cached positions (chunked prefill,
//                                  speculative decoding): R * 4 query vectors per tile job
// Levels: scalar, avx2, avx512, amx (AMX tiles for jobs UseAmxTile accepts, else AVX-512).
//
//   cmake --build build -j2 --target attention_bench
//   build/attention_bench [--benchmark_filter='Prefill/f16'] [--benchmark_min_time=0.3s]
//
// Counters: GFLOP/s = 4 * heads * head_dim * (visible positions) per second (QK and PV);
// KVGB/s (decode) = KV bytes read per second.
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "util/cpu_features.h"

namespace tachyon::kernels {
namespace {

constexpr int64_t kHeads = 32, kKvHeads = 8, kHeadDim = 64, kBlock = 16;

struct Setup {
  std::vector<uint8_t> k, v;
  std::vector<int32_t> table;
  std::vector<float> q, out;
  PagedKv kv;
  Setup(KvDtype dtype, int64_t n_pos, int64_t n_q) {
    const int64_t n_blocks = (n_pos + kBlock - 1) / kBlock;
    const size_t row = KvRowBytes(dtype, kHeadDim);
    const int64_t rows = n_blocks * kBlock * kKvHeads;
    k.resize(rows * row);
    v.resize(rows * row);
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(kHeadDim);
    for (int64_t r = 0; r < rows; ++r) {
      for (auto* buf : {&k, &v}) {
        for (float& e : x) e = nd(rng);
        StoreKvRow(dtype, x.data(), buf->data() + r * row, kHeadDim);
      }
    }
    for (int64_t b = 0; b < n_blocks; ++b) table.push_back(static_cast<int32_t>(n_blocks - 1 - b));
    q.resize(n_q * kHeads * kHeadDim);
    for (float& e : q) e = nd(rng);
    out.resize(q.size());
    kv = {k.data(), v.data(), dtype, n_blocks, kBlock, kKvHeads, kHeadDim};
  }
};

void Run(benchmark::State& state, KvDtype dtype, SimdLevel level, int64_t pos_start,
         int64_t n_tokens) {
  if (level > BestSimdLevel()) {
    state.SkipWithError("CPU lacks this SIMD level");
    return;
  }
  Setup s(dtype, pos_start + n_tokens, n_tokens);
  AttentionSeq seq{s.table.data(), pos_start, n_tokens, s.q.data(), s.out.data()};
  AttentionParams params{kHeads, 1.0f / std::sqrt(float(kHeadDim)), 0};
  AttentionScratch scratch;
  for (auto _ : state) {
    PagedAttentionAtLevel(level, s.kv, params, &seq, 1, nullptr, &scratch);
    benchmark::DoNotOptimize(s.out.data());
  }
  double visible = 0;
  for (int64_t i = 0; i < n_tokens; ++i) visible += pos_start + i + 1;
  state.counters["GFLOP/s"] = benchmark::Counter(4.0 * kHeads * kHeadDim * visible * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
  if (n_tokens == 1) {
    const double bytes = 2.0 * (pos_start + 1) * kKvHeads * KvRowBytes(dtype, kHeadDim);
    state.counters["KVGB/s"] =
        benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  }
}

void Register() {
  for (KvDtype d : {KvDtype::kF32, KvDtype::kF16, KvDtype::kBf16, KvDtype::kQ8_0}) {
    for (SimdLevel l :
         {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512, SimdLevel::kAmx}) {
      const std::string tag = std::string(KvDtypeName(d)) + "/" + SimdLevelName(l);
      benchmark::RegisterBenchmark(("Prefill/" + tag).c_str(),
                                   [=](benchmark::State& st) { Run(st, d, l, 0, 512); })
          ->Unit(benchmark::kMillisecond)
          ->MeasureProcessCPUTime();
      for (int64_t ctx : {128, 4096}) {
        benchmark::RegisterBenchmark(("Decode/" + tag + "/ctx:" + std::to_string(ctx)).c_str(),
                                     [=](benchmark::State& st) { Run(st, d, l, ctx - 1, 1); })
            ->Unit(benchmark::kMicrosecond)
            ->MeasureProcessCPUTime();
      }
      for (int64_t rows : {1, 2, 4, 8, 16}) {
        benchmark::RegisterBenchmark(("Chunk/" + tag + "/rows:" + std::to_string(rows)).c_str(),
                                     [=](benchmark::State& st) { Run(st, d, l, 512, rows); })
            ->Unit(benchmark::kMicrosecond)
            ->MeasureProcessCPUTime();
      }
    }
  }
}

}  // namespace
}  // namespace tachyon::kernels

int main(int argc, char** argv) {
  tachyon::kernels::Register();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
