// The engine's KV tiers on the strict fake executor: a prefix evicted from the pool comes back
// from a store instead of being recomputed, with identical output and no leaked blocks.
#include "engine/kv_offload.h"

#include <gtest/gtest.h>

#include "engine/testing/test_harness.h"
#include "kv/disk_tier.h"
#include "kv/host_tier.h"
#include "kv/testing/tier_test_util.h"

namespace tachyon::engine {
namespace {
using testing::Greedy;
using testing::Harness;
using testing::HarnessOptions;
using testing::MakePrompt;

// Wraps a store. Its load cost is `cost` seconds per block (default 0: the cost rule always
// loads, so no test depends on timings), and its Load fails from the `fail_at`-th call (0-based)
// on, or never (-1).
class TestStore : public kv::BlockStore {
 public:
  explicit TestStore(std::shared_ptr<kv::BlockStore> inner, int fail_at = -1, double cost = 0)
      : inner_(std::move(inner)), fail_at_(fail_at), cost_(cost) {}
  std::string_view name() const override { return inner_->name(); }
  size_t Lookup(std::span<const kv::BlockHash> keys) override { return inner_->Lookup(keys); }
  Status Load(const kv::BlockHash& key, kv::BlockChunks dst) override {
    if (fail_at_ >= 0 && loads_++ >= fail_at_) return DataLoss("injected load failure");
    return inner_->Load(key, dst);
  }
  void Store(const kv::BlockHash& key, kv::BlockChunks src) override { inner_->Store(key, src); }
  void Flush() override { inner_->Flush(); }
  double LoadSecondsPerBlock() const override { return cost_; }
  kv::BlockStoreStats Stats() const override { return inner_->Stats(); }

 private:
  std::shared_ptr<kv::BlockStore> inner_;
  int fail_at_;
  double cost_;
  int loads_ = 0;
};

std::shared_ptr<kv::BlockStore> Host(int fail_at = -1, double cost = 0) {
  return std::make_shared<TestStore>(std::make_shared<kv::HostTier>(1 << 20, nullptr), fail_at,
                                     cost);
}

HarnessOptions SmallPool(std::vector<std::shared_ptr<kv::BlockStore>> stores) {
  HarnessOptions o;
  o.num_blocks = 12;  // block_size 4: a 33-token prompt and its output take 10 blocks
  o.max_batched_tokens = 64;
  o.kv_stores = std::move(stores);
  return o;
}

const std::vector<int32_t> kPromptA = MakePrompt(33, 1);
const std::vector<int32_t> kPromptB = MakePrompt(33, 2);

// Runs A, then B (which evicts most of A's blocks from the pool), then A again as request 3;
// returns the tokens the fake computed for that last request.
int64_t RunReturningPrefix(Harness& h, const std::string& salt_again = "") {
  EXPECT_TRUE(h.Add(1, Greedy(kPromptA, 4)).ok());
  h.RunToCompletion();
  EXPECT_TRUE(h.Add(2, Greedy(kPromptB, 4)).ok());
  h.RunToCompletion();
  const int64_t before = h.exec().num_tokens_computed();
  EngineRequest again = Greedy(kPromptA, 4);
  again.cache_salt = salt_again;
  EXPECT_TRUE(h.Add(3, std::move(again)).ok());
  h.RunToCompletion();
  return h.exec().num_tokens_computed() - before;
}

// RunReturningPrefix on `pool` without stores and with a host tier: 32 of the 33 prompt tokens
// come back from the pool or the host tier (the last prompt token and the 3 decode steps are
// computed), with the tokens of the first run and of the run without the tier. The tiered
// engine's metrics.
using PoolOptions = HarnessOptions (*)(std::vector<std::shared_ptr<kv::BlockStore>>);
EngineMetrics ExpectPrefixLoaded(PoolOptions pool) {
  Harness plain(pool({}));
  const int64_t recomputed = RunReturningPrefix(plain);
  Harness tiered(pool({Host()}));
  const int64_t computed = RunReturningPrefix(tiered);
  EXPECT_EQ(computed, 4);
  EXPECT_GT(recomputed, computed);
  EXPECT_EQ(tiered.result(3).tokens, tiered.result(1).tokens);
  EXPECT_EQ(tiered.result(3).tokens, plain.result(3).tokens);
  EXPECT_EQ(tiered.usage(3).cached_prompt_tokens, 32);
  return tiered.engine().Metrics();
}

TEST(KvOffload, EvictedPrefixIsLoadedNotRecomputed) {
  const EngineMetrics m = ExpectPrefixLoaded(SmallPool);
  EXPECT_GT(m.kv_offload.loaded_blocks, 0);
  EXPECT_GT(m.kv_offload.offered_blocks, 0);
  ASSERT_EQ(m.kv_offload.tiers.size(), 1u);
  EXPECT_EQ(m.kv_offload.tiers[0].name, "host");
  EXPECT_EQ(m.kv_offload.tiers[0].store.hits, m.kv_offload.loaded_blocks);
  EXPECT_EQ(m.kv.used_blocks, 0);
}

TEST(KvOffload, AnotherSaltIsNeverServed) {
  Harness h(SmallPool({Host()}));
  EXPECT_EQ(RunReturningPrefix(h, "other"), 33 + 3);
  EXPECT_EQ(h.usage(3).cached_prompt_tokens, 0);
  EXPECT_EQ(h.result(3).tokens, h.result(1).tokens);
}

TEST(KvOffload, CostRuleSkipsTiersSlowerThanRecomputing) {
  Harness plain(SmallPool({}));
  const int64_t recomputed = RunReturningPrefix(plain);
  Harness h(SmallPool({Host(-1, /*cost=*/1e9)}));  // a block "takes" 1e9 s to load
  EXPECT_EQ(RunReturningPrefix(h), recomputed);
  EXPECT_EQ(h.result(3).tokens, h.result(1).tokens);
  const EngineMetrics m = h.engine().Metrics();
  EXPECT_EQ(m.kv_offload.loaded_blocks, 0);
  EXPECT_GT(m.kv_offload.skipped_by_cost, 0);
  EXPECT_GT(m.kv_offload.prefill_seconds_per_token, 0);
}

TEST(KvOffload, FailedLoadsAreRecomputedWithIdenticalOutput) {
  Harness h(SmallPool({Host(/*fail_at=*/1)}));  // the second load fails
  const int64_t computed = RunReturningPrefix(h);
  EXPECT_GT(computed, 4);
  EXPECT_EQ(h.result(3).tokens, h.result(1).tokens);
  const EngineMetrics m = h.engine().Metrics();
  EXPECT_EQ(m.kv_offload.loaded_blocks, 1);
  EXPECT_GT(m.kv_offload.failed_blocks, 0);
  EXPECT_EQ(m.kv.used_blocks, 0);
}

TEST(KvOffload, AbortWhileLoadingLeaksNothing) {
  Harness h(SmallPool({Host()}));
  ASSERT_TRUE(h.Add(1, Greedy(kPromptA, 4)).ok());
  h.RunToCompletion();
  ASSERT_TRUE(h.Add(2, Greedy(kPromptB, 4)).ok());
  h.RunToCompletion();
  ASSERT_TRUE(h.Add(3, Greedy(kPromptA, 4)).ok());
  h.Step();  // starts the loads; request 3 waits for them
  h.engine().Abort(3);
  h.RunToCompletion();  // the engine has work until the loads are back in the pool
  EXPECT_FALSE(h.engine().HasWork());
  EXPECT_EQ(h.result(3).finish, FinishReason::kAbort);
  EXPECT_EQ(h.engine().Metrics().kv.used_blocks, 0);
  // The loaded blocks stay cached: the same prompt now hits the pool.
  ASSERT_TRUE(h.Add(4, Greedy(kPromptA, 4)).ok());
  h.RunToCompletion();
  EXPECT_EQ(h.result(4).tokens, h.result(1).tokens);
  EXPECT_EQ(h.usage(4).cached_prompt_tokens, 32);
}

TEST(KvOffload, ChoicesShareLoadedPrefix) {
  Harness h(SmallPool({Host()}));
  ASSERT_TRUE(h.Add(1, Greedy(kPromptA, 4)).ok());
  h.RunToCompletion();
  ASSERT_TRUE(h.Add(2, Greedy(kPromptB, 4)).ok());
  h.RunToCompletion();
  EngineRequest two = Greedy(kPromptA, 2);
  two.params.n = 2;
  ASSERT_TRUE(h.Add(3, std::move(two)).ok());
  h.RunToCompletion();
  const std::vector<int32_t> want(h.result(1).tokens.begin(), h.result(1).tokens.begin() + 2);
  EXPECT_EQ(h.result(3, 0).tokens, want);
  EXPECT_EQ(h.result(3, 1).tokens, want);
  EXPECT_EQ(h.usage(3).cached_prompt_tokens, 32);
  EXPECT_EQ(h.engine().Metrics().kv.used_blocks, 0);
}

TEST(KvOffload, PreemptedRequestsFinishExactlyAndLeakNothing) {
  HarnessOptions o = SmallPool({Host()});
  o.num_blocks = 14;  // two requests of 12 + 30 tokens (11 blocks each) cannot both finish
  Harness h(o);
  const std::vector<int32_t> p1 = MakePrompt(12, 3), p2 = MakePrompt(12, 4);
  ASSERT_TRUE(h.Add(1, Greedy(p1, 30)).ok());
  ASSERT_TRUE(h.Add(2, Greedy(p2, 30)).ok());
  h.RunToCompletion();
  EXPECT_EQ(h.result(1).tokens, testing::OracleGreedy(h.exec(), p1, 30));
  EXPECT_EQ(h.result(2).tokens, testing::OracleGreedy(h.exec(), p2, 30));
  const EngineMetrics m = h.engine().Metrics();
  EXPECT_GT(m.num_preemptions, 0);
  EXPECT_EQ(m.kv.used_blocks, 0);
}

// Runs A with a disk tier in `dir`, flushes it as EngineCore does when it stops, then runs A on
// a fresh engine over the reopened tier: 32 of its 33 prompt tokens must come from the tier.
// `pool` gives the harness options for a store. Returns the blocks the reopened tier found.
int64_t RunAcrossARestart(const std::string& dir_name,
                          HarnessOptions (*pool)(std::vector<std::shared_ptr<kv::BlockStore>>)) {
  kv::testing::TempDir dir(dir_name);
  const kv::BlockHash model{7, 8};
  std::vector<int32_t> first;
  {
    auto disk = kv::DiskTier::Open(dir.path, 1 << 20, model);
    EXPECT_TRUE(disk.ok());
    if (!disk.ok()) return -1;
    Harness h(pool({std::make_shared<TestStore>(std::move(*disk))}));
    EXPECT_TRUE(h.Add(1, Greedy(kPromptA, 4)).ok());
    h.RunToCompletion();
    first = h.result(1).tokens;
    h.engine().FlushKvStores();
  }
  auto disk = kv::DiskTier::Open(dir.path, 1 << 20, model);
  EXPECT_TRUE(disk.ok());
  if (!disk.ok()) return -1;
  const int64_t scanned = (*disk)->scanned_blocks();
  Harness h(pool({std::make_shared<TestStore>(std::move(*disk))}));
  const int64_t before = h.exec().num_tokens_computed();
  EXPECT_TRUE(h.Add(1, Greedy(kPromptA, 4)).ok());
  h.RunToCompletion();
  EXPECT_EQ(h.exec().num_tokens_computed() - before, 4);
  EXPECT_EQ(h.result(1).tokens, first);
  EXPECT_EQ(h.usage(1).cached_prompt_tokens, 32);
  EXPECT_EQ(h.engine().Metrics().kv.used_blocks, 0);
  return scanned;
}

TEST(KvOffload, DiskTierServesAPrefixAfterARestart) {
  // Every full block of A's prompt and output.
  EXPECT_EQ(RunAcrossARestart("offload-restart", SmallPool), 9);
}

// Layer groups (one full-attention group, two sliding groups of window 8 = two blocks): every
// group's pages go to the store when evicted, and the returning prompt loads what its hit needs:
// the full group's blocks and each sliding group's last window, nothing recomputed but the tail.
HarnessOptions HybridPool(std::vector<std::shared_ptr<kv::BlockStore>> stores) {
  HarnessOptions o = SmallPool(std::move(stores));
  o.kv_group_windows = {0, 8, 8};
  o.max_batched_tokens = 8;
  o.num_blocks = 22;  // A alone peaks at 10 + 2 x 5 blocks; B evicts most of A's
  return o;
}

TEST(KvOffload, LayerGroupsLoadTheFullBlocksAndTheSlidingWindow) {
  const EngineMetrics m = ExpectPrefixLoaded(HybridPool);
  // At most the full group's 8 blocks and 2 x 2 sliding pages of the window before block 8.
  EXPECT_GT(m.kv_offload.loaded_blocks, 0);
  EXPECT_LE(m.kv_offload.loaded_blocks, 8 + 2 * 2);
  EXPECT_EQ(m.kv_offload.failed_blocks, 0);
  EXPECT_EQ(m.kv.used_blocks, 0);
}

TEST(KvOffload, LayerGroupsLoadPastAPartialHit) {
  // A 49-token prompt (12 blocks); B evicts A's last blocks first, so A comes back with a hit
  // of its leading blocks (sliding pages before the window absent) and loads the rest.
  const std::vector<int32_t> a = MakePrompt(49, 6), b = MakePrompt(21, 7);
  HarnessOptions o = HybridPool({Host()});
  o.num_blocks = 26;
  Harness h(o);
  ASSERT_TRUE(h.Add(1, Greedy(a, 4)).ok());
  h.RunToCompletion();
  ASSERT_TRUE(h.Add(2, Greedy(b, 4)).ok());
  h.RunToCompletion();
  const int64_t before = h.exec().num_tokens_computed();
  ASSERT_TRUE(h.Add(3, Greedy(a, 4)).ok());
  h.RunToCompletion();
  EXPECT_EQ(h.exec().num_tokens_computed() - before, 4);
  EXPECT_EQ(h.result(3).tokens, h.result(1).tokens);
  EXPECT_EQ(h.usage(3).cached_prompt_tokens, 48);
  const EngineMetrics m = h.engine().Metrics();
  EXPECT_GT(m.kv_offload.loaded_blocks, 0);
  EXPECT_LT(m.kv_offload.loaded_blocks, 12 + 2 * 2);  // the pool kept a leading part
  EXPECT_EQ(m.kv.used_blocks, 0);
}

TEST(KvOffload, LayerGroupsFailedLoadsAreRecomputed) {
  for (int fail_at : {0, 1, 5}) {
    SCOPED_TRACE(fail_at);
    Harness h(HybridPool({Host(fail_at)}));
    EXPECT_GT(RunReturningPrefix(h), 4);
    EXPECT_EQ(h.result(3).tokens, h.result(1).tokens);
    const EngineMetrics m = h.engine().Metrics();
    EXPECT_GT(m.kv_offload.failed_blocks, 0);
    EXPECT_EQ(m.kv.used_blocks, 0);
  }
}

TEST(KvOffload, LayerGroupsDiskTierServesAPrefixAfterARestart) {
  // Every group's pages of A's 9 full blocks that were cached when it stopped.
  EXPECT_GT(RunAcrossARestart("offload-groups-restart", HybridPool), 9);
}

}  // namespace
}  // namespace tachyon::engine
