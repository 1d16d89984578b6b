// Bursts of requests with one prefix on the strict fake model: the prefix is computed once
// (later requests share the blocks the first one completes in the same step, or wait for those
// it completes later), never across cache salts, and preemption of the request computing it
// changes no output and leaks no block. Also where their time to first token went (step
// counts), and the fake's same-step contract.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/pd_export.h"
#include "engine/testing/fake_executor.h"
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
    const TtftBreakdown& first = h.result(0).ttft;
    EXPECT_EQ(first.prefix_wait_seconds, 0.0);
    EXPECT_EQ(first.prefill_tokens, kPrefix + kSuffix);
    EXPECT_EQ(first.prefill_steps, first.steps);
    EXPECT_EQ(first.prefill_steps, budget == 256 ? 1 : 3);  // 43 tokens in chunks of 16
    for (int i = 1; i < 8; ++i) {
      EXPECT_EQ(h.usage(i).cached_prompt_tokens, kPrefix) << "request " << i;
      const TtftBreakdown& t = h.result(i).ttft;
      EXPECT_EQ(t.stalled_seconds, 0.0) << "request " << i;
      EXPECT_EQ(t.prefill_tokens, kSuffix) << "request " << i;
      EXPECT_GE(t.first_token_seconds, 0.0);
      if (budget == 256) {
        // Its suffix ran in the step that computed the prefix, on the prefix's blocks.
        EXPECT_EQ(t.steps, 1) << "request " << i;
        EXPECT_EQ(t.prefill_steps, 1) << "request " << i;
        EXPECT_EQ(t.prefix_wait_seconds, 0.0) << "request " << i;
        EXPECT_EQ(t.queued_seconds, 0.0) << "request " << i;
      }
    }
    // Chunked: the first follower waits for the prefix's first chunks, then runs in the step of
    // its last chunk (never queued for room); the budget's rest goes to the next followers.
    EXPECT_EQ(h.result(1).ttft.steps, first.steps);
    EXPECT_EQ(h.result(1).ttft.queued_seconds, 0.0);
    if (budget == 16) EXPECT_GT(h.result(1).ttft.prefix_wait_seconds, 0.0);
  }
}

// Priority policy, 10 blocks of 4: low-priority request 0 (a 26-token prompt) takes one step;
// then request 1 (the same prompt) and request 2 (important, 12 tokens, needing 3 blocks)
// arrive, and in the next step request 2 preempts request 0, and request 1 (which shares
// request 0's blocks in that step) with it. Every output equals the oracle's and no block leaks.
void ExpectPreemptedWithItsSharer(int max_batched_tokens, int prompt_seed, int other_seed) {
  HarnessOptions opts;
  opts.policy = SchedulePolicy::kPriority;
  opts.max_batched_tokens = max_batched_tokens;
  opts.num_blocks = 10;
  Harness h(opts);
  const std::vector<int32_t> prompt = MakePrompt(26, prompt_seed);
  const std::vector<int32_t> other = MakePrompt(12, other_seed);
  EngineRequest low = Greedy(prompt, kNewTokens);
  low.priority = 5;
  ASSERT_TRUE(h.Add(0, std::move(low)).ok());
  h.Step();
  ASSERT_TRUE(h.Add(1, Greedy(prompt, kNewTokens)).ok());
  ASSERT_TRUE(h.Add(2, Greedy(other, kNewTokens)).ok());
  h.Step();
  EXPECT_EQ(h.engine().Metrics().num_preemptions, 2);  // request 0, and 1 with it
  EXPECT_TRUE(h.result(1).tokens.empty());
  h.RunToCompletion();
  EXPECT_EQ(h.result(0).tokens, OracleGreedy(h.exec(), prompt, kNewTokens));
  EXPECT_EQ(h.result(1).tokens, OracleGreedy(h.exec(), prompt, kNewTokens));
  EXPECT_EQ(h.result(2).tokens, OracleGreedy(h.exec(), other, kNewTokens));
  EXPECT_EQ(h.engine().Metrics().kv.used_blocks, 0) << "blocks leaked";
}

TEST(PrefixAttachTest, WriterPreemptedInTheStepOfTheAttachment) {
  // Priority policy, 10 blocks of 4: low-priority request 0 has computed 20 of its 26 tokens
  // when request 1 (the same prompt) and request 2 (important, needing 3 blocks) arrive;
  // request 1 attaches to the block that request 0 completes in the next step, then request 2
  // preempts request 0 in that same step. Request 1 must not read the block nobody writes
  // (the strict fake fails the step if it does), and nothing leaks.
  ExpectPreemptedWithItsSharer(/*max_batched_tokens=*/20, 19, 23);
}

// Counts the blocks an export hands (engine/pd_export.h).
class CountingSink : public KvExportSink {
 public:
  void OnLayer(uint32_t, uint32_t, const kv::BlockHash&, uint32_t,
               std::span<const std::span<uint8_t>>, std::span<const uint64_t>) override {
    ++handed;
  }
  void OnEnd(Status s) override { ok = s.ok(); }
  int handed = 0;
  bool ok = false;
};

TEST(PrefixAttachTest, KvExportWaitsForTheBlocksInstead) {
  // An export hands the blocks before its step as computed: a request with one never attaches
  // to blocks written in its step, it waits for them and starts from the cache.
  HarnessOptions opts;
  opts.max_batched_tokens = 256;
  Harness h(opts);
  const std::vector<int32_t> prefix = MakePrompt(kPrefix, 31);
  ASSERT_TRUE(h.Add(0, Greedy(Prompt(prefix, 0), kNewTokens)).ok());
  auto sink = std::make_shared<CountingSink>();
  EngineRequest r = Greedy(Prompt(prefix, 1), kNewTokens);
  r.kv_export = sink;
  ASSERT_TRUE(h.Add(1, std::move(r)).ok());
  h.RunToCompletion();
  EXPECT_EQ(h.result(1).ttft.steps, 2);
  EXPECT_GT(h.result(1).ttft.prefix_wait_seconds, 0.0);
  EXPECT_EQ(h.usage(1).cached_prompt_tokens, kPrefix);
  EXPECT_EQ(h.result(1).tokens, OracleGreedy(h.exec(), Prompt(prefix, 1), kNewTokens));
  EXPECT_EQ(sink->handed, (kPrefix + kSuffix) / 4);
  EXPECT_TRUE(sink->ok);
}

TEST(PrefixAttachTest, PartialLastBlockIsCopiedNotRecomputed) {
  // A 42-token prefix: 10 full blocks of 4 and 2 tokens of the next block, which the followers
  // copy from request 0's block instead of computing them, whether they arrive with it
  // (same step) or one step later (its block then holds them already).
  for (bool later : {false, true}) {
    HarnessOptions opts;
    opts.max_batched_tokens = 256;
    Harness h(opts);
    const std::vector<int32_t> prefix = MakePrompt(42, 37);
    ASSERT_TRUE(h.Add(0, Greedy(Prompt(prefix, 0), kNewTokens)).ok());
    if (later) h.Step();
    for (int i = 1; i < 8; ++i) ASSERT_TRUE(h.Add(i, Greedy(Prompt(prefix, i), kNewTokens)).ok());
    h.RunToCompletion();
    EXPECT_EQ(h.exec().num_tokens_computed(), 42 + 8 * kSuffix + 8 * (kNewTokens - 1));
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(h.result(i).tokens, OracleGreedy(h.exec(), Prompt(prefix, i), kNewTokens))
          << "request " << i;
      EXPECT_EQ(h.usage(i).cached_prompt_tokens, i == 0 ? 0 : 42) << "request " << i;
      EXPECT_EQ(h.result(i).ttft.steps, 1) << "request " << i;
    }
    EXPECT_EQ(h.engine().Metrics().kv.used_blocks, 0);
  }
}

TEST(PrefixAttachTest, CopySourcePreemptedInTheStepOfTheCopy) {
  // Priority policy, 10 blocks of 4: low-priority request 0 (26 tokens) decodes when request 1
  // (its prompt) arrives and copies position 24 from request 0's block 6; request 2, important,
  // then preempts request 0 in that step, freeing the block (maybe taking it). Request 1 must
  // not copy from it.
  ExpectPreemptedWithItsSharer(/*max_batched_tokens=*/64, 41, 43);
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

// The fake's same-step contract, on hand-made batches (blocks of 4): sequence 0 writes a
// prompt's positions [from, 8) into blocks {0, 1}, sequence 1 reads positions [0, 8) from them as
// its cached prefix and writes 2 more into block 2.
Status RunPair(FakeModelExecutor& exec, int64_t writer_from, std::vector<float>* logits) {
  const std::vector<int32_t> prompt = MakePrompt(10, 29);
  model::Batch b;
  b.tokens.assign(prompt.begin() + writer_from, prompt.begin() + 8);
  b.tokens.insert(b.tokens.end(), prompt.begin() + 8, prompt.end());
  model::SequenceSlice writer;
  writer.n_tokens = 8 - writer_from;
  writer.pos_start = writer_from;
  writer.block_table = {0, 1};
  model::SequenceSlice reader;
  reader.token_start = writer.n_tokens;
  reader.n_tokens = 2;
  reader.pos_start = 8;
  reader.block_table = {0, 1, 2};
  b.seqs = {writer, reader};
  logits->assign(2 * static_cast<size_t>(exec.n_vocab()), 0.0f);
  return exec.Execute(b, *logits);
}

TEST(FakeExecutorContractTest, ReadsBlocksAnotherSequenceCompletesInTheStep) {
  FakeModelExecutor exec(64, 8, 4);
  std::vector<float> logits;
  ASSERT_TRUE(RunPair(exec, 0, &logits).ok());
  std::vector<float> want(64);
  exec.LogitsFor(MakePrompt(10, 29), want);
  EXPECT_TRUE(std::equal(want.begin(), want.end(), logits.begin() + 64));
  // The writer computed [0, 4) before and completes block 1 now: still readable.
  FakeModelExecutor resumed(64, 8, 4);
  ASSERT_TRUE(RunPair(resumed, 0, &logits).ok());
  ASSERT_TRUE(RunPair(resumed, 4, &logits).ok());
}

TEST(FakeExecutorContractTest, RejectsABlockTheWriterDoesNotComplete) {
  FakeModelExecutor exec(64, 8, 4);
  std::vector<float> logits;
  ASSERT_TRUE(RunPair(exec, 0, &logits).ok());  // every slot holds its position now
  const std::vector<int32_t> prompt = MakePrompt(10, 29);
  // The writer writes only [4, 6) of block 1: positions 6-7 are left over from before.
  model::Batch b;
  b.tokens = {prompt[4], prompt[5], prompt[8], prompt[9]};
  model::SequenceSlice writer;
  writer.n_tokens = 2;
  writer.pos_start = 4;
  writer.block_table = {0, 1};
  model::SequenceSlice reader;
  reader.token_start = 2;
  reader.n_tokens = 2;
  reader.pos_start = 8;
  reader.block_table = {0, 1, 2};
  b.seqs = {writer, reader};
  Status s = exec.Execute(b, logits);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("does not complete"), std::string::npos) << s.ToString();
  // Two sequences writing one slot in a step.
  reader.pos_start = 4;
  reader.block_table = {0, 1};
  b.tokens = {prompt[4], prompt[5], prompt[4], prompt[5]};
  b.seqs = {writer, reader};
  s = exec.Execute(b, logits);
  EXPECT_NE(s.ToString().find("written twice"), std::string::npos) << s.ToString();
}

TEST(FakeExecutorContractTest, CopiesSlotsAfterTheWrites) {
  FakeModelExecutor exec(64, 8, 4);
  std::vector<float> logits;
  const std::vector<int32_t> prompt = MakePrompt(10, 29);
  // Sequence 0 writes [0, 6) (blocks 0, 1); sequence 1 shares block 0, copies positions 4-5
  // from block 1 into its block 2 and computes [6, 10) in blocks 2 and 3.
  model::Batch b;
  b.tokens.assign(prompt.begin(), prompt.begin() + 6);
  b.tokens.insert(b.tokens.end(), prompt.begin() + 6, prompt.end());
  model::SequenceSlice writer;
  writer.n_tokens = 6;
  writer.block_table = {0, 1};
  model::SequenceSlice reader;
  reader.token_start = 6;
  reader.n_tokens = 4;
  reader.pos_start = 6;
  reader.block_table = {0, 2, 3};
  reader.copy_src = 1;
  b.seqs = {writer, reader};
  logits.assign(2 * 64, 0.0f);
  Status s = exec.Execute(b, logits);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::vector<float> want(64);
  exec.LogitsFor(prompt, want);
  EXPECT_TRUE(std::equal(want.begin(), want.end(), logits.begin() + 64));
  // From a block that does not hold those positions: an error.
  reader.copy_src = 3;
  b.seqs = {writer, reader};
  s = exec.Execute(b, logits);
  EXPECT_NE(s.ToString().find("does not hold position"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace tachyon::engine
