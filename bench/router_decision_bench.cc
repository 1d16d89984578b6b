// The router's routing decision (ReplicaPool::Place: prefix index match + scoring) with the
// index full: 1M block hashes (--index-blocks default) spread over R replicas, fed as KV
// events. Sweep: R in {8, 32} x prompts of B in {16, 32, 64, 128, 256, 512} blocks (B x 16
// tokens). The index holds chains of B blocks; each prompt shares a cached prefix of 0..B blocks
// (uniform) with one of them, the rest is blocks no replica holds (after the first round over
// the prompts every prompt is cached whole somewhere: each decision then matches all B blocks,
// the costly case). Reports the mean (Google Benchmark's time) and, from Placement's own
// decision_seconds (wall clock), the counters p50_us, p99_us and p99/target = p99 / 100 us (the
// target of issue 19; <= 1 meets it). On a busy machine the wall-clock p99 mostly measures the
// scheduler (a decision preempted for a time slice); cpu_p99_us, the thread's CPU time around
// each Place (clock_gettime, which adds about a microsecond), leaves the preemptions out and is
// the figure to read there.
//
//   build/router_decision_bench [--benchmark_min_time=2] [--benchmark_filter=replicas:8/]
#include <benchmark/benchmark.h>

#include <time.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "router/replica_pool.h"

namespace tachyon::router {
namespace {

constexpr size_t kIndexBlocks = size_t{1} << 20;
constexpr double kTargetSeconds = 100e-6;
constexpr int kPrompts = 256;

// The hash chain of chain `id` of `n_blocks` blocks: its tokens are a run of its own, so two
// chains share no block.
std::vector<kv::BlockHash> Chain(uint32_t id, int n_blocks) {
  std::vector<int32_t> tokens(static_cast<size_t>(16 * n_blocks));
  const int64_t first = static_cast<int64_t>(id) * (16 * n_blocks + 1);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(first + i);
  std::vector<kv::BlockHash> hashes;
  kv::ExtendBlockHashes(tokens, 16, kv::RootHash(""), tokens.size(), &hashes);
  return hashes;
}

// A pool with a full index of chains of `blocks` blocks over `replicas`, and the prompts.
struct Setup {
  Setup(int replicas, int blocks) : n_replicas(replicas), n_blocks(blocks) {
    std::vector<Endpoint> endpoints;
    for (int i = 0; i < replicas; ++i) {
      endpoints.push_back(*ParseReplicaUrl("http://127.0.0.1:" + std::to_string(9000 + i)));
    }
    PoolOptions o;
    o.picker.policy = Policy::kKv;
    o.index_blocks = kIndexBlocks;
    pool = std::make_unique<ReplicaPool>(endpoints, o);
    const uint32_t chains = static_cast<uint32_t>(kIndexBlocks / static_cast<size_t>(blocks));
    std::vector<BlockEvent> events;
    for (uint32_t c = 0; c < chains; ++c) {
      events.clear();
      for (const kv::BlockHash& h : Chain(c, blocks)) events.push_back(BlockEvent{h, true});
      pool->ApplyBlockEvents(static_cast<int>(c % static_cast<uint32_t>(replicas)), events);
    }
    for (int i = 0; i < replicas; ++i) pool->SetProbeResult(i, true, "");
    // Prompts: a cached chain's first k blocks, then blocks no replica holds.
    std::mt19937 rng(1);
    for (int p = 0; p < kPrompts; ++p) {
      const uint32_t c = rng() % chains;
      const int k = static_cast<int>(rng() % static_cast<uint32_t>(blocks + 1));
      std::vector<kv::BlockHash> prompt = Chain(c, blocks);
      const std::vector<kv::BlockHash> fresh = Chain(chains + static_cast<uint32_t>(p), blocks);
      std::copy(fresh.begin() + k, fresh.end(), prompt.begin() + k);
      prompts.push_back(std::move(prompt));
    }
  }
  int n_replicas;
  int n_blocks;
  std::unique_ptr<ReplicaPool> pool;
  std::vector<std::vector<kv::BlockHash>> prompts;
};

double ThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Google Benchmark calls a benchmark function several times (to size its iterations): the
// index of the current sweep point is built once and kept until the next point.
Setup& SetupFor(int replicas, int blocks) {
  static std::unique_ptr<Setup> current;
  if (!current || current->n_replicas != replicas || current->n_blocks != blocks) {
    current.reset();  // the previous index goes first: one full index in memory at a time
    current = std::make_unique<Setup>(replicas, blocks);
  }
  return *current;
}

void BM_PlaceWithFullIndex(benchmark::State& state) {
  const int blocks = static_cast<int>(state.range(1));
  Setup& s = SetupFor(static_cast<int>(state.range(0)), blocks);
  std::vector<double> seconds, cpu_seconds;
  size_t i = 0;
  for (auto _ : state) {
    const double cpu_start = ThreadCpuSeconds();
    auto placed = s.pool->Place(s.prompts[i++ % s.prompts.size()], 16 * blocks, 0);
    cpu_seconds.push_back(ThreadCpuSeconds() - cpu_start);
    const Placement& p = std::get<Placement>(placed);
    seconds.push_back(p.decision_seconds);
    s.pool->Release(p.replica);
  }
  auto at = [](std::vector<double>& v, double q) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[static_cast<size_t>(q * (v.size() - 1))];
  };
  state.counters["p50_us"] = at(seconds, 0.50) * 1e6;
  state.counters["p99_us"] = at(seconds, 0.99) * 1e6;
  state.counters["p99/target"] = at(seconds, 0.99) / kTargetSeconds;
  state.counters["cpu_p99_us"] = at(cpu_seconds, 0.99) * 1e6;
  state.counters["indexed_blocks"] = static_cast<double>(s.pool->IndexedBlocks());
}
BENCHMARK(BM_PlaceWithFullIndex)
    ->ArgsProduct({{8, 32}, {16, 32, 64, 128, 256, 512}})
    ->ArgNames({"replicas", "blocks"})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tachyon::router

BENCHMARK_MAIN();
