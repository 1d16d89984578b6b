// Bursts of requests with one prefix on the strict fake model: the prefix is computed once
// (later requests wait for the blocks the first one is computing, then take them from the
// cache), never across cache salts, and preemption of the request computing it changes no
// output and leaks no block. Also where their time to first token went (step counts).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/testing/test_harness.h"

namespace tachyon::engine {
namespace {

using testing::Greedy;
using testing::Harness;
using testing::HarnessOptions;
using testing::MakePrompt;
using testing::OracleGreedy;

constexpr int kPrefix = 40;  // 10 full blocks of 4
constexpr int kSuffix = 3;
constexpr int kNewTokens = 5;

std::vector<int32_t> Prompt(const std::vector<int32_t>& prefix, int i) {
  std::vector<int32_t> p = prefix;
  for (int j = 0; j < kSuffix; ++j) p.push_back((i * 5 + j * 3 + 1) % 64);
  return p;
}

// n requests sharing `prefix`, all added before the first step, run to completion.
void RunBurst(Harness& h, const std::vector<int32_t>& prefix, int n,
              const std::vector<std::string>& salts = {}) {
  for (int i = 0; i < n; ++i) {
    EngineRequest r = Greedy(Prompt(prefix, i), kNewTokens);
    if (!salts.empty()) r.cache_salt = salts[i % salts.size()];
    ASSERT_TRUE(h.Add(i, std::move(r)).ok());
  }
  h.RunToCompletion();
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(h.result(i).tokens, OracleGreedy(h.exec(), Prompt(prefix, i), kNewTokens))
        << "request " << i;
  }
  EXPECT_EQ(h.engine().Metrics().kv.used_blocks, 0) << "blocks leaked";
}

TEST(PrefixAttachTest, BurstComputesTheSharedPrefixOnce) {
  for (int64_t budget : {256, 16}) {  // all admissible in one step; or the prefix chunked
    HarnessOptions opts;
    opts.max_batched_tokens = budget;
    Harness h(opts);
    const std::vector<int32_t> prefix = MakePrompt(kPrefix, 3);
    RunBurst(h, prefix, 8);
    // The prefix once, every suffix once, then the decode tokens.
    EXPECT_EQ(h.exec().num_tokens_computed(), kPrefix + 8 * kSuffix + 8 * (kNewTokens - 1))
        << "budget " << budget;
    EXPECT_EQ(h.usage(0).cached_prompt_tokens, 0);
    for (int i = 1; i < 8; ++i) {
      EXPECT_EQ(h.usage(i).cached_prompt_tokens, kPrefix) << "request " << i;
      const TtftBreakdown& t = h.result(i).ttft;
      EXPECT_EQ(t.stalled_seconds, 0.0) << "request " << i;
      EXPECT_EQ(t.prefill_tokens, kSuffix) << "request " << i;
      EXPECT_EQ(t.prefill_steps, 1) << "request " << i;
      EXPECT_GE(t.first_token_seconds, 0.0);
      // With room for all, it only waited for the prefix blocks, then ran its suffix.
      if (budget == 256) EXPECT_EQ(t.queued_seconds, 0.0) << "request " << i;
    }
    const TtftBreakdown& first = h.result(0).ttft;
    EXPECT_EQ(first.prefix_wait_seconds, 0.0);
    EXPECT_EQ(first.prefill_tokens, kPrefix + kSuffix);
    EXPECT_EQ(first.prefill_steps, first.steps);
    EXPECT_EQ(first.prefill_steps, budget == 256 ? 1 : 3);  // 43 tokens in chunks of 16
    // The first follower starts in the step after the prefix is complete, having waited for
    // it all along (never queued for room).
    EXPECT_EQ(h.result(1).ttft.steps, first.steps + 1);
    EXPECT_EQ(h.result(1).ttft.queued_seconds, 0.0);
  }
}

TEST(PrefixAttachTest, NoSharingAcrossCacheSalts) {
  Harness h;
  const std::vector<int32_t> prefix = MakePrompt(kPrefix, 5);
  RunBurst(h, prefix, 8, {"tenant-a", "tenant-b"});
  // Once per salt.
  EXPECT_EQ(h.exec().num_tokens_computed(), 2 * kPrefix + 8 * kSuffix + 8 * (kNewTokens - 1));
  EXPECT_EQ(h.usage(0).cached_prompt_tokens, 0);
  EXPECT_EQ(h.usage(1).cached_prompt_tokens, 0);
  for (int i = 2; i < 8; ++i) EXPECT_EQ(h.usage(i).cached_prompt_tokens, kPrefix);

  // A salted burst after an unsalted one shares nothing with it.
  Harness plain;
  RunBurst(plain, prefix, 2);
  const int64_t before = plain.exec().num_tokens_computed();
  EngineRequest r = Greedy(Prompt(prefix, 9), kNewTokens);
  r.cache_salt = "tenant-c";
  ASSERT_TRUE(plain.Add(9, std::move(r)).ok());
  plain.RunToCompletion();
  EXPECT_EQ(plain.exec().num_tokens_computed() - before, kPrefix + kSuffix + kNewTokens - 1);
  EXPECT_EQ(plain.usage(9).cached_prompt_tokens, 0);
}

TEST(PrefixAttachTest, PreemptingTheComputingRequestKeepsOutputsAndBlocks) {
  // Priority policy, chunks of 8: while a low-priority burst waits for request 0's 60-token
  // prefix, an important request arrives and outgrows the pool, so request 0 is preempted
  // with part of the prefix still in flight; the waiting ones must neither read blocks it never
  // finished nor leak any.
  HarnessOptions opts;
  opts.policy = SchedulePolicy::kPriority;
  opts.max_batched_tokens = 64;
  opts.long_prefill_token_threshold = 8;
  opts.num_blocks = 20;  // 80 slots: request 0 alone needs 17 blocks, the important one 10
  Harness h(opts);
  const std::vector<int32_t> prefix = MakePrompt(60, 7);
  for (int i = 0; i < 4; ++i) {
    EngineRequest r = Greedy(Prompt(prefix, i), kNewTokens);
    r.priority = 5;
    ASSERT_TRUE(h.Add(i, std::move(r)).ok());
  }
  h.Step();
  h.Step();  // request 0 has computed 16 of its prefix tokens; 1-3 wait for the rest
  const std::vector<int32_t> vip_prompt = MakePrompt(30, 11);
  EngineRequest vip = Greedy(vip_prompt, 10);
  vip.priority = 0;
  ASSERT_TRUE(h.Add(100, std::move(vip)).ok());
  h.RunToCompletion();
  EXPECT_GT(h.engine().Metrics().num_preemptions, 0);
  EXPECT_EQ(h.result(100).tokens, OracleGreedy(h.exec(), vip_prompt, 10));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(h.result(i).tokens, OracleGreedy(h.exec(), Prompt(prefix, i), kNewTokens))
        << "request " << i;
  }
  EXPECT_EQ(h.engine().Metrics().kv.used_blocks, 0) << "blocks leaked";
  EXPECT_EQ(h.engine().Metrics().num_running, 0);
}

TEST(PrefixAttachTest, ShortSuffixGoesAheadOfALongPrefill) {
  // A long prompt is being prefilled in chunks when a request whose prompt is cached but for a
  // few tokens arrives: with short_prefill_tokens it gets its first token in the next step.
  for (int64_t short_tokens : {0, 8}) {
    HarnessOptions opts;
    opts.max_batched_tokens = 16;
    opts.short_prefill_tokens = short_tokens;
    Harness h(opts);
    const std::vector<int32_t> prefix = MakePrompt(kPrefix, 13);
    RunBurst(h, prefix, 1);  // the prefix is cached now
    const std::vector<int32_t> long_prompt = MakePrompt(120, 17);
    ASSERT_TRUE(h.Add(50, Greedy(long_prompt, kNewTokens)).ok());
    h.Step();  // the long prompt takes the whole budget
    ASSERT_TRUE(h.Add(51, Greedy(Prompt(prefix, 4), kNewTokens)).ok());
    h.Step();
    const bool first_token = !h.result(51).tokens.empty();
    EXPECT_EQ(first_token, short_tokens > 0) << "short_prefill_tokens " << short_tokens;
    h.RunToCompletion();
    EXPECT_EQ(h.result(50).tokens, OracleGreedy(h.exec(), long_prompt, kNewTokens));
    EXPECT_EQ(h.result(51).tokens, OracleGreedy(h.exec(), Prompt(prefix, 4), kNewTokens));
    EXPECT_EQ(h.result(51).ttft.prefill_tokens, kSuffix);
  }
}

}  // namespace
}  // namespace tachyon::engine
