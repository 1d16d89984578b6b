// The engine over KV layer groups (kv/kv_groups.h) on the strict fake: one full-attention group
// and two sliding-window groups, every group storing every token in its own blocks; the fake
// checks that each sliding group still holds exactly the window its queries read, so a block
// released too early or reused by another sequence fails the step. Outputs must equal those of
// the plain (one-group) cache and of the oracle, blocks must be released as sequences advance,
// and nothing may leak (chunked prefill, prefix hits, salts, n > 1, preemption, speculative
// decoding, aborts).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "engine/engine.h"
#include "engine/testing/oracle_drafter.h"
#include "engine/testing/test_harness.h"
#include "sampling/logits_processors.h"

namespace tachyon::engine {
namespace {

using testing::Greedy;
using testing::Harness;
using testing::HarnessOptions;
using testing::MakePrompt;
using testing::OracleGreedy;

const std::vector<int64_t> kGroups = {0, 8, 8};  // window 8 = two blocks of 4

HarnessOptions Hybrid(HarnessOptions o = {}) {
  o.kv_group_windows = kGroups;
  return o;
}

const std::vector<int> kLens = {1, 3, 4, 5, 9, 16, 17, 23, 31, 33, 40, 47, 52, 64, 70, 7};
int MaxTokens(int i) {
  return 3 + (i * 5) % 14;
}
EngineRequest Request(int i) {
  return Greedy(MakePrompt(kLens[i], i), MaxTokens(i));
}

// Runs requests 0..15 at once; returns the peak of used blocks over the steps.
int RunWorkload(Harness* h) {
  for (int i = 0; i < 16; ++i) EXPECT_TRUE(h->Add(i, Request(i)).ok());
  int peak = 0;
  for (int s = 0; s < 100000 && h->engine().HasWork(); ++s) {
    h->Step();
    peak = std::max(peak, h->engine().Metrics().kv.used_blocks);
  }
  h->Collect(h->engine().TakeOutputs());
  return peak;
}

TEST(HybridKvTest, ConcurrentGreedyEqualsPlainCacheAndOracle) {
  HarnessOptions plain_opts;
  plain_opts.max_batched_tokens = 16;
  for (bool caching : {true, false}) {
    plain_opts.prefix_caching = caching;
    Harness plain(plain_opts), hybrid(Hybrid(plain_opts));
    RunWorkload(&plain);
    RunWorkload(&hybrid);
    for (int i = 0; i < 16; ++i) {
      EXPECT_EQ(hybrid.result(i).tokens, plain.result(i).tokens) << "request " << i;
      EXPECT_EQ(hybrid.result(i).tokens,
                OracleGreedy(hybrid.exec(), MakePrompt(kLens[i], i), MaxTokens(i)));
    }
    EXPECT_GE(hybrid.exec().max_batch_seqs(), 5u);
    const EngineMetrics m = hybrid.engine().Metrics();
    EXPECT_EQ(m.kv.used_blocks, 0);
    EXPECT_EQ(m.kv.free_blocks, plain_opts.num_blocks);
  }
}

TEST(HybridKvTest, SlidingBlocksAreReleasedAsTheSequenceAdvances) {
  HarnessOptions o = Hybrid();
  o.max_batched_tokens = 16;
  Harness h(o);
  const std::vector<int32_t> prompt = MakePrompt(200, 5);
  ASSERT_TRUE(h.Add(1, Greedy(prompt, 20)).ok());
  int peak = 0;
  while (h.engine().HasWork()) {
    h.Step();
    peak = std::max(peak, h.engine().Metrics().kv.used_blocks);
  }
  EXPECT_EQ(h.result(1).tokens, OracleGreedy(h.exec(), prompt, 20));
  // 220 positions: 55 blocks in the full group; each sliding group holds at most the blocks
  // that its window and one 16-token chunk touch (7), instead of 55.
  EXPECT_EQ(h.engine().kv().PeakBlocks(220, 16), 55 + 2 * 7);
  EXPECT_LE(peak, 55 + 2 * 7);
  EXPECT_GE(peak, 55);
  EXPECT_EQ(h.engine().Metrics().kv.used_blocks, 0);
}

TEST(HybridKvTest, PrefixHitsReuseTheWindowAndRespectTheSalt) {
  Harness h(Hybrid());
  const std::vector<int32_t> shared = MakePrompt(60, 3);
  std::vector<int32_t> second = shared;
  for (int t : {5, 9, 11}) second.push_back(t);
  ASSERT_TRUE(h.Add(1, Greedy(shared, 6)).ok());
  h.RunToCompletion();
  const int64_t before = h.exec().num_tokens_computed();
  ASSERT_TRUE(h.Add(2, Greedy(second, 6)).ok());
  h.RunToCompletion();
  // 60 prompt tokens = 15 full blocks, found with the sliding groups' last window.
  EXPECT_EQ(h.usage(2).cached_prompt_tokens, 60);
  EXPECT_EQ(h.exec().num_tokens_computed() - before, 3 + 5);
  EXPECT_EQ(h.result(2).tokens, OracleGreedy(h.exec(), second, 6));

  EngineRequest salted = Greedy(second, 6);
  salted.cache_salt = "tenant-b";
  ASSERT_TRUE(h.Add(3, salted).ok());
  h.RunToCompletion();
  EXPECT_EQ(h.usage(3).cached_prompt_tokens, 0);
  EXPECT_EQ(h.result(3).tokens, h.result(2).tokens);
  EXPECT_EQ(h.engine().Metrics().kv.used_blocks, 0);
}

TEST(HybridKvTest, ChoicesForkThePromptWindow) {
  HarnessOptions o;
  o.prefix_caching = false;  // sharing must come from forking, not the cache
  Harness plain(o), hybrid(Hybrid(o));
  for (Harness* h : {&plain, &hybrid}) {
    EngineRequest r = Greedy(MakePrompt(50, 2), 8);
    r.params.n = 3;
    r.params.temperature = 0.8f;
    r.params.seed = 11;
    ASSERT_TRUE(h->Add(7, r).ok());
    h->RunToCompletion();
  }
  for (int c = 0; c < 3; ++c) EXPECT_EQ(hybrid.result(7, c).tokens, plain.result(7, c).tokens);
  EXPECT_NE(hybrid.result(7, 0).tokens, hybrid.result(7, 1).tokens);
  // Choices 1 and 2 fork 12 full blocks (the sliding groups: the last window's 2) and
  // compute only the 2 tokens after them; with one group they copy the first of those from
  // choice 0's partial block instead (engine/scheduler.h).
  EXPECT_EQ(hybrid.exec().num_tokens_computed(), 50 + 2 * 2 + 3 * 7);
  EXPECT_EQ(plain.exec().num_tokens_computed(), 50 + 2 * 1 + 3 * 7);
  EXPECT_EQ(hybrid.engine().Metrics().kv.used_blocks, 0);
}

TEST(HybridKvTest, PreemptionUnderPressureKeepsOutputs) {
  HarnessOptions roomy = Hybrid();
  roomy.max_batched_tokens = 16;
  HarnessOptions tight = roomy;
  // The largest request (70 + 16 tokens) needs 22 + 2 * 7 blocks alone; a few fit together.
  tight.num_blocks = 40;
  for (bool caching : {true, false}) {
    roomy.prefix_caching = tight.prefix_caching = caching;
    Harness a(roomy), b(tight);
    RunWorkload(&a);
    RunWorkload(&b);
    for (int i = 0; i < 16; ++i) {
      ASSERT_TRUE(b.finished(i)) << i;
      EXPECT_EQ(a.result(i).tokens, b.result(i).tokens) << "request " << i;
    }
    EXPECT_GT(b.engine().Metrics().num_preemptions, 0);
    EXPECT_EQ(b.engine().Metrics().kv.used_blocks, 0);
    EXPECT_EQ(b.engine().Metrics().kv.free_blocks, tight.num_blocks);
  }
}

TEST(HybridKvTest, RequestsAreAdmittedByTheirWindowedNeed) {
  HarnessOptions o = Hybrid();
  o.num_blocks = 40;
  o.max_batched_tokens = 16;
  o.max_model_len = 4096;
  Harness h(o);
  // 100 positions need 25 + 2 * 7 = 39 blocks: fits, although 3 x 25 would not.
  ASSERT_TRUE(h.Add(1, Greedy(MakePrompt(90, 1), 10)).ok());
  // 108 positions need 27 + 14 = 41: refused, naming what the pool holds (104 tokens).
  Status st = h.Add(2, Greedy(MakePrompt(100, 1), 8));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("the whole pool holds 104"), std::string::npos) << st.message();
  h.RunToCompletion();
  EXPECT_EQ(h.result(1).tokens, OracleGreedy(h.exec(), MakePrompt(90, 1), 10));
  EXPECT_EQ(h.engine().Metrics().kv.used_blocks, 0);
}

TEST(HybridKvTest, SpeculativeRollbackKeepsOutputsAndLeaksNothing) {
  HarnessOptions off = Hybrid();
  off.max_batched_tokens = 24;
  HarnessOptions on = off;
  on.speculative.method = spec::SpecMethod::kNgram;
  on.speculative.num_speculative_tokens = 4;
  on.speculative.disable_by_batch_size = 1 << 20;
  on.speculative.min_acceptance_rate = 0;
  on.drafter = [](const FakeModelExecutor& exec) {
    return std::make_unique<testing::OracleDrafter>(
        exec.n_vocab(), [&exec](int64_t, std::span<const int32_t> tokens) {
          std::vector<float> logits(exec.n_vocab());
          exec.LogitsFor(tokens, logits);
          return sampling::Argmax(logits);
        });
  };
  Harness ref(off), h(on);
  for (Harness* x : {&ref, &h}) {
    for (int i = 0; i < 8; ++i) {
      ASSERT_TRUE(x->Add(i, Greedy(MakePrompt(5 + i * 9, i), 30)).ok());
    }
    x->RunToCompletion();
    EXPECT_EQ(x->engine().Metrics().kv.used_blocks, 0);
  }
  for (int i = 0; i < 8; ++i) EXPECT_EQ(h.result(i).tokens, ref.result(i).tokens) << i;
  EXPECT_GT(h.engine().Metrics().spec.num_accepted_tokens, 0);
  EXPECT_LT(h.engine().Metrics().spec.num_accepted_tokens,
            h.engine().Metrics().spec.num_draft_tokens);
}

TEST(HybridKvTest, AddAbortCyclesLeakNothing) {
  HarnessOptions o = Hybrid();
  o.num_blocks = 96;
  Harness h(o);
  std::mt19937 rng(9);
  for (uint64_t id = 0; id < 200; ++id) {
    EngineRequest r = Greedy(MakePrompt(1 + rng() % 50, id % 5), 1 + rng() % 30);
    r.params.n = 1 + rng() % 2;
    ASSERT_TRUE(h.Add(id, r).ok());
    for (int s = rng() % 5; s > 0; --s) h.Step();
    if (rng() % 3 == 0) h.engine().Abort(id - rng() % 3);
  }
  h.RunToCompletion();
  EXPECT_EQ(h.engine().Metrics().kv.used_blocks, 0);
  EXPECT_EQ(h.engine().Metrics().kv.free_blocks, o.num_blocks);
  EXPECT_FALSE(h.engine().HasWork());
}

}  // namespace
}  // namespace tachyon::engine
