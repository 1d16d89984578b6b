// The router's routing decision (ReplicaPool::Place: prefix index match + scoring) with the
// index full: 1M block hashes (--index-blocks default) over 8 replicas, fed as KV events.
// Prompts of 64 blocks (1024 tokens) that share a cached prefix of 0..64 blocks with one of
// the replicas. Reports the mean (Google Benchmark) and p50 / p99 of Placement's own
// decision_seconds as counters. Target (issue 19): p99 <= 100 us.
//
//   build/router_decision_bench [--benchmark_min_time=2s]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <vector>

#include "router/replica_pool.h"

namespace tachyon::router {
namespace {

constexpr int kReplicas = 8;
constexpr int kChainBlocks = 64;
constexpr size_t kIndexBlocks = size_t{1} << 20;

std::vector<kv::BlockHash> Chain(uint32_t id, int n_blocks) {
  std::vector<int32_t> tokens(static_cast<size_t>(16 * n_blocks));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(id * 7919 + i);
  std::vector<kv::BlockHash> hashes;
  kv::ExtendBlockHashes(tokens, 16, kv::RootHash(""), tokens.size(), &hashes);
  return hashes;
}

void BM_PlaceWithFullIndex(benchmark::State& state) {
  std::vector<Endpoint> endpoints;
  for (int i = 0; i < kReplicas; ++i) {
    endpoints.push_back(*ParseReplicaUrl("http://127.0.0.1:" + std::to_string(9000 + i)));
  }
  PoolOptions o;
  o.picker.policy = Policy::kKv;
  o.index_blocks = kIndexBlocks;
  ReplicaPool pool(endpoints, o);
  const uint32_t chains = kIndexBlocks / kChainBlocks;
  std::vector<BlockEvent> events;
  for (uint32_t c = 0; c < chains; ++c) {
    events.clear();
    for (const kv::BlockHash& h : Chain(c, kChainBlocks)) events.push_back(BlockEvent{h, true});
    pool.ApplyBlockEvents(static_cast<int>(c % kReplicas), events);
  }
  for (int i = 0; i < kReplicas; ++i) pool.SetProbeResult(i, true, "");
  // Prompts: a cached chain's first k blocks, then blocks no replica holds.
  std::mt19937 rng(1);
  std::vector<std::vector<kv::BlockHash>> prompts;
  for (int p = 0; p < 256; ++p) {
    const uint32_t c = rng() % chains;
    const int k = static_cast<int>(rng() % (kChainBlocks + 1));
    std::vector<kv::BlockHash> prompt = Chain(c, kChainBlocks);
    const std::vector<kv::BlockHash> fresh = Chain(chains + static_cast<uint32_t>(p), kChainBlocks);
    std::copy(fresh.begin() + k, fresh.end(), prompt.begin() + k);
    prompts.push_back(std::move(prompt));
  }
  std::vector<double> seconds;
  size_t i = 0;
  for (auto _ : state) {
    auto placed = pool.Place(prompts[i++ % prompts.size()], 16 * kChainBlocks, 0);
    const Placement& p = std::get<Placement>(placed);
    seconds.push_back(p.decision_seconds);
    pool.Release(p.replica);
  }
  std::sort(seconds.begin(), seconds.end());
  auto at = [&seconds](double q) {
    return seconds.empty() ? 0.0 : seconds[static_cast<size_t>(q * (seconds.size() - 1))];
  };
  state.counters["p50_us"] = at(0.50) * 1e6;
  state.counters["p99_us"] = at(0.99) * 1e6;
  state.counters["indexed_blocks"] = static_cast<double>(pool.IndexedBlocks());
}
BENCHMARK(BM_PlaceWithFullIndex)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tachyon::router

BENCHMARK_MAIN();
