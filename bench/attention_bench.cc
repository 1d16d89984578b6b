// Attention micro-benchmarks at Llama-3.2-1B's attention shape (32 query heads, 8 KV heads,
// head_dim 64, 16-token blocks), per KV dtype and SIMD level, one thread (CPU time, robust
// on a shared machine):
//   Prefill/<dtype>/<level>   a 512-token prompt from position 0 (pp512, one layer)
//   Prefill/<dtype>/<level>/len:2048   a 2048-token prompt (f16, q8_0; avx512, amx)
//   Decode/<dtype>/<level>/ctx:N   one token at context N (the KV stays in L2 / L3 between
//                                  iterations)
//   DecodeBatch/<dtype>/<level>/seqs:16/ctx:160   a batched decode step: one token for each
//                                  of 16 sequences at context 160, a different layer's KV per
//                                  iteration (16 layers, 84 MB at f16: read from L3, as in
//                                  `tachyon profile --batch 16`)
//   DecodeCold/<dtype>/<level>/ctx:4096   one token at context 4096, cycling over 512 MB of
//                                  layers' KV (read from DRAM)
//   Chunk/<dtype>/<level>/rows:R   R new tokens after 512 cached positions (chunked prefill,
//                                  speculative decoding): R * 4 query vectors per tile job
//   DecodeThreads/<model>/ctx:N/slices:S   one token at context N on a 2-thread pool at
//                                  SmolLM2's or Gemma 3 270M's shape, f16, with head slices
//                                  off (0) and on (1); wall time
// Levels: scalar, avx2, avx512, amx (AMX tiles for jobs UseAmxTile accepts, else AVX-512).
//
//   cmake --build build -j2 --target attention_bench
//   build/attention_bench [--benchmark_filter='Prefill/f16'] [--benchmark_min_time=0.3s]
//
// Counters: GFLOP/s = 4 * heads * head_dim * (visible positions) per second (QK and PV);
// KVGB/s (decode) = KV bytes read per second.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/pack.h"
#include "util/cpu_features.h"
#include "util/thread_pool.h"

namespace tachyon::kernels {
namespace {

constexpr int64_t kBlock = 16;

// An attention shape: query heads, KV heads, head_dim.
struct Shape {
  int64_t heads = 32, kv_heads = 8, head_dim = 64;  // Llama-3.2-1B
};
constexpr Shape kLlama1b, kSmolLm2{9, 3, 64}, kGemma3{4, 1, 256};

// n_seqs sequences of n_pos positions (n_q new tokens each) with disjoint blocks, and n_layers
// copies of the KV (one layer's random rows copied).
struct Setup {
  AlignedBuffer k, v;  // [n_layers][layer_bytes]
  std::vector<std::vector<int32_t>> tables;
  std::vector<float> q, out;  // [n_seqs][n_q][heads * head_dim]
  std::vector<PagedKv> kv;    // per layer
  size_t layer_bytes = 0;
  Setup(KvDtype dtype, const Shape& sh, int64_t n_pos, int64_t n_q, int64_t n_seqs,
        int64_t n_layers) {
    const int64_t seq_blocks = (n_pos + kBlock - 1) / kBlock, n_blocks = seq_blocks * n_seqs;
    const size_t row = KvRowBytes(dtype, sh.head_dim);
    const int64_t rows = n_blocks * kBlock * sh.kv_heads;
    layer_bytes = rows * row;
    k = AllocateAligned(n_layers * layer_bytes);  // huge pages where allowed, as KvCache
    v = AllocateAligned(n_layers * layer_bytes);
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(sh.head_dim);
    for (int64_t r = 0; r < rows; ++r) {
      for (auto* buf : {&k, &v}) {
        for (float& e : x) e = nd(rng);
        StoreKvRow(dtype, x.data(), buf->get() + r * row, sh.head_dim);
      }
    }
    for (int64_t l = 1; l < n_layers; ++l) {
      std::copy(k.get(), k.get() + layer_bytes, k.get() + l * layer_bytes);
      std::copy(v.get(), v.get() + layer_bytes, v.get() + l * layer_bytes);
    }
    for (int64_t s = 0; s < n_seqs; ++s) {  // each sequence's blocks in reverse order
      tables.emplace_back();
      for (int64_t b = 0; b < seq_blocks; ++b) {
        tables.back().push_back(static_cast<int32_t>((s + 1) * seq_blocks - 1 - b));
      }
    }
    q.resize(n_seqs * n_q * sh.heads * sh.head_dim);
    for (float& e : q) e = nd(rng);
    out.resize(q.size());
    for (int64_t l = 0; l < n_layers; ++l) {
      kv.push_back({k.get() + l * layer_bytes, v.get() + l * layer_bytes, dtype, n_blocks, kBlock,
                    sh.kv_heads, sh.head_dim});
    }
  }
};

// n_seqs sequences with the same pos_start / n_tokens; each iteration runs the next of
// n_layers layers (1: the same KV every time), on `pool` (null: the calling thread).
void Run(benchmark::State& state, KvDtype dtype, SimdLevel level, int64_t pos_start,
         int64_t n_tokens, int64_t n_seqs = 1, int64_t n_layers = 1, const Shape& sh = kLlama1b,
         ThreadPool* pool = nullptr) {
  if (level > BestSimdLevel()) {
    state.SkipWithError("CPU lacks this SIMD level");
    return;
  }
  Setup s(dtype, sh, pos_start + n_tokens, n_tokens, n_seqs, n_layers);
  std::vector<AttentionSeq> seqs;
  const int64_t q_seq = n_tokens * sh.heads * sh.head_dim;
  for (int64_t i = 0; i < n_seqs; ++i) {
    seqs.push_back({s.tables[i].data(), pos_start, n_tokens, s.q.data() + i * q_seq,
                    s.out.data() + i * q_seq});
  }
  AttentionParams params{sh.heads, 1.0f / std::sqrt(float(sh.head_dim)), 0};
  AttentionScratch scratch;
  int64_t layer = 0;
  for (auto _ : state) {
    PagedAttentionAtLevel(level, s.kv[layer], params, seqs.data(), n_seqs, pool, &scratch);
    benchmark::DoNotOptimize(s.out.data());
    layer = layer + 1 == n_layers ? 0 : layer + 1;
  }
  double visible = 0;
  for (int64_t i = 0; i < n_tokens; ++i) visible += n_seqs * (pos_start + i + 1);
  state.counters["GFLOP/s"] = benchmark::Counter(4.0 * sh.heads * sh.head_dim * visible * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
  if (n_tokens == 1) {
    const double bytes =
        2.0 * n_seqs * (pos_start + 1) * sh.kv_heads * KvRowBytes(dtype, sh.head_dim);
    state.counters["KVGB/s"] =
        benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  }
}

void Register() {
  for (KvDtype d : {KvDtype::kF32, KvDtype::kF16, KvDtype::kBf16, KvDtype::kQ8_0, KvDtype::kQ4_0,
                    KvDtype::kQ4_1}) {
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
      benchmark::RegisterBenchmark(("DecodeBatch/" + tag + "/seqs:16/ctx:160").c_str(),
                                   [=](benchmark::State& st) { Run(st, d, l, 159, 1, 16, 16); })
          ->Unit(benchmark::kMicrosecond)
          ->MeasureProcessCPUTime();
      benchmark::RegisterBenchmark(("DecodeCold/" + tag + "/ctx:4096").c_str(),
                                   [=](benchmark::State& st) {
                                     // Enough layers for 512 MB of K and V.
                                     const double layer = 2.0 * 4096 * kLlama1b.kv_heads *
                                                          KvRowBytes(d, kLlama1b.head_dim);
                                     const auto n = static_cast<int64_t>(512e6 / layer) + 1;
                                     Run(st, d, l, 4095, 1, 1, n);
                                   })
          ->Unit(benchmark::kMicrosecond)
          ->MeasureProcessCPUTime();
      for (int64_t rows : {1, 2, 4, 8, 16}) {
        benchmark::RegisterBenchmark(("Chunk/" + tag + "/rows:" + std::to_string(rows)).c_str(),
                                     [=](benchmark::State& st) { Run(st, d, l, 512, rows); })
            ->Unit(benchmark::kMicrosecond)
            ->MeasureProcessCPUTime();
      }
    }
  }
  // Long prompts (pp2048, one layer), where attention grows to a fifth of a prefill: the
  // vector levels and AMX.
  for (KvDtype d : {KvDtype::kF16, KvDtype::kQ8_0}) {
    for (SimdLevel l : {SimdLevel::kAvx512, SimdLevel::kAmx}) {
      const std::string name =
          "Prefill/" + std::string(KvDtypeName(d)) + "/" + SimdLevelName(l) + "/len:2048";
      benchmark::RegisterBenchmark(name.c_str(),
                                   [=](benchmark::State& st) { Run(st, d, l, 0, 2048); })
          ->Unit(benchmark::kMillisecond)
          ->MeasureProcessCPUTime();
    }
  }
  // A lone sequence's decode on two threads at small models' shapes, with and without head
  // slices (SmolLM2: 3 KV heads, the third job sliced; Gemma 3 270M: one KV head, both sliced),
  // cycling over their layers' f16 KV (30 and 18 layers: in L3 here, from DRAM in a model step,
  // whose weights stream through the cache). Wall time of the pooled call.
  struct Small {
    const char* name;
    Shape shape;
    int64_t layers;
  };
  for (const Small& m : {Small{"smollm2", kSmolLm2, 30}, Small{"gemma3", kGemma3, 18}}) {
    for (int64_t ctx : {64, 300}) {
      for (bool slices : {false, true}) {
        const std::string name = std::string("DecodeThreads/") + m.name +
                                 "/ctx:" + std::to_string(ctx) + "/slices:" + (slices ? "1" : "0");
        benchmark::RegisterBenchmark(name.c_str(),
                                     [=](benchmark::State& st) {
                                       ThreadPool pool(2);
                                       SetAttentionHeadSlices(slices);
                                       Run(st, KvDtype::kF16, BestSimdLevel(), ctx - 1, 1, 1,
                                           m.layers, m.shape, &pool);
                                       SetAttentionHeadSlices(true);
                                     })
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
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
