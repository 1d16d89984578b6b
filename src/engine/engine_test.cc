// Acceptance tests of the engine loop over the fake model.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <random>

#include "engine/testing/test_harness.h"

namespace tachyon::engine {
namespace {

using testing::Greedy;
using testing::Harness;
using testing::HarnessOptions;
using testing::MakePrompt;
using testing::OracleGreedy;

struct Workload {
  std::vector<int> prompt_lens = {1, 3, 4, 5, 9, 16, 17, 23, 31, 33, 40, 47, 52, 64, 70, 7};
  int MaxTokens(int i) const { return 3 + (i * 5) % 14; }
  EngineRequest Request(int i) const { return Greedy(MakePrompt(prompt_lens[i], i), MaxTokens(i)); }
};

TEST(EngineTest, ConcurrentGreedyEqualsAloneAndOracle) {
  Workload w;
  HarnessOptions opts;
  opts.max_batched_tokens = 16;  // prompts up to 70 tokens: chunked over several steps
  Harness batched(opts);
  for (int i = 0; i < 16; ++i) ASSERT_TRUE(batched.Add(i, w.Request(i)).ok());
  batched.RunToCompletion();
  EXPECT_GE(batched.exec().max_batch_seqs(), 5u);  // really ran concurrently

  for (int i = 0; i < 16; ++i) {
    Harness alone(opts);
    ASSERT_TRUE(alone.Add(0, w.Request(i)).ok());
    alone.RunToCompletion();
    const auto& b = batched.result(i);
    EXPECT_EQ(b.tokens, alone.result(0).tokens) << "request " << i;
    EXPECT_EQ(b.tokens,
              OracleGreedy(batched.exec(), MakePrompt(w.prompt_lens[i], i), w.MaxTokens(i)));
    EXPECT_EQ(b.finish, FinishReason::kLength);
    EXPECT_EQ(batched.usage(i).completion_tokens, w.MaxTokens(i));
    EXPECT_EQ(batched.usage(i).prompt_tokens, w.prompt_lens[i]);
  }
  EngineMetrics m = batched.engine().Metrics();
  EXPECT_EQ(m.kv.used_blocks, 0);
  EXPECT_EQ(m.num_running + m.num_waiting, 0);
  EXPECT_EQ(m.requests_finished, 16);
}

TEST(EngineTest, PrefixCacheOffGivesSameOutputs) {
  Workload w;
  HarnessOptions on_opts;
  on_opts.max_batched_tokens = 16;
  HarnessOptions off_opts = on_opts;
  off_opts.prefix_caching = false;
  Harness on(on_opts), off(off_opts);
  for (int i = 0; i < 16; ++i) {
    ASSERT_TRUE(on.Add(i, w.Request(i)).ok());
    ASSERT_TRUE(off.Add(i, w.Request(i)).ok());
  }
  on.RunToCompletion();
  off.RunToCompletion();
  for (int i = 0; i < 16; ++i) EXPECT_EQ(on.result(i).tokens, off.result(i).tokens);
  EXPECT_EQ(off.engine().Metrics().kv.cached_blocks, 0);
}

TEST(EngineTest, SharedPrefixReusesCachedBlocks) {
  HarnessOptions opts;
  std::vector<int32_t> shared = MakePrompt(40, 3);
  std::vector<int32_t> second = shared;
  for (int t : {5, 9, 11}) second.push_back(t);

  Harness h(opts);
  ASSERT_TRUE(h.Add(1, Greedy(shared, 6)).ok());
  h.RunToCompletion();
  const int64_t computed_before = h.exec().num_tokens_computed();
  ASSERT_TRUE(h.Add(2, Greedy(second, 6)).ok());
  h.RunToCompletion();
  // 40 prompt tokens = 10 full blocks of 4, all cached: only 3 prompt tokens + decode run.
  EXPECT_EQ(h.usage(2).cached_prompt_tokens, 40);
  EXPECT_EQ(h.exec().num_tokens_computed() - computed_before, 3 + 5);
  EXPECT_GT(h.engine().Metrics().kv.PrefixHitRate(), 0.3);

  HarnessOptions off = opts;
  off.prefix_caching = false;
  Harness ref(off);
  ASSERT_TRUE(ref.Add(2, Greedy(second, 6)).ok());
  ref.RunToCompletion();
  EXPECT_EQ(h.result(2).tokens, ref.result(2).tokens);
  EXPECT_EQ(ref.usage(2).cached_prompt_tokens, 0);

  // The same prompt again: everything but the last token is reused.
  ASSERT_TRUE(h.Add(3, Greedy(shared, 6)).ok());
  h.RunToCompletion();
  EXPECT_EQ(h.usage(3).cached_prompt_tokens, 36);
  EXPECT_EQ(h.result(3).tokens, h.result(1).tokens);
}

TEST(EngineTest, PreemptionUnderPressureKeepsOutputs) {
  Workload w;
  HarnessOptions roomy;
  roomy.max_batched_tokens = 16;
  HarnessOptions tight = roomy;
  tight.num_blocks = 24;  // 96 tokens: the largest request (70 + 16) fits alone, few together
  for (bool caching : {true, false}) {
    roomy.prefix_caching = tight.prefix_caching = caching;
    Harness a(roomy), b(tight);
    for (int i = 0; i < 16; ++i) {
      ASSERT_TRUE(a.Add(i, w.Request(i)).ok());
      ASSERT_TRUE(b.Add(i, w.Request(i)).ok());
    }
    a.RunToCompletion();
    b.RunToCompletion();
    for (int i = 0; i < 16; ++i) {
      ASSERT_TRUE(b.finished(i)) << i;
      EXPECT_EQ(a.result(i).tokens, b.result(i).tokens) << "request " << i;
    }
    EngineMetrics m = b.engine().Metrics();
    EXPECT_GT(m.num_preemptions, 0);
    EXPECT_EQ(a.engine().Metrics().num_preemptions, 0);
    EXPECT_EQ(m.kv.used_blocks, 0);
    EXPECT_EQ(m.kv.free_blocks, tight.num_blocks);
  }
}

// Under the priority policy, important requests arriving while the pool is full preempt the
// least important running ones; every request still completes with its unpressured output,
// and the important ones finish first.
TEST(EngineTest, PriorityPreemptionKeepsOutputsAndServesImportantFirst) {
  Workload w;
  HarnessOptions roomy;
  roomy.max_batched_tokens = 16;
  roomy.policy = SchedulePolicy::kPriority;
  HarnessOptions tight = roomy;
  tight.num_blocks = 24;
  Harness a(roomy), b(tight);
  // Eight unimportant requests start; after a few steps eight important ones arrive.
  for (int i = 0; i < 8; ++i) {
    EngineRequest r = w.Request(i);
    r.priority = 10;
    ASSERT_TRUE(a.Add(i, r).ok());
    ASSERT_TRUE(b.Add(i, std::move(r)).ok());
  }
  for (int s = 0; s < 6; ++s) b.Step();
  const int64_t preemptions_before = b.engine().Metrics().num_preemptions;
  for (int i = 8; i < 16; ++i) {
    EngineRequest r = w.Request(i);
    r.priority = 0;
    ASSERT_TRUE(a.Add(i, r).ok());
    ASSERT_TRUE(b.Add(i, std::move(r)).ok());
  }
  a.RunToCompletion();
  std::vector<uint64_t> finish_order;
  for (int s = 0; s < 100000 && b.engine().HasWork(); ++s) {
    std::vector<RequestOutput> outs = b.engine().Step();
    for (const RequestOutput& o : outs) {
      if (o.finished) finish_order.push_back(o.request_id);
    }
    b.Collect(outs);
  }
  for (int i = 0; i < 16; ++i) {
    ASSERT_TRUE(b.finished(i)) << i;
    EXPECT_EQ(a.result(i).tokens, b.result(i).tokens) << "request " << i;
  }
  EXPECT_GT(b.engine().Metrics().num_preemptions, preemptions_before);
  // The last request to finish is an unimportant one (they waited for the important ones).
  ASSERT_FALSE(finish_order.empty());
  EXPECT_LT(finish_order.back(), 8u);
  EngineMetrics m = b.engine().Metrics();
  EXPECT_EQ(m.kv.used_blocks, 0);
  EXPECT_EQ(m.kv.free_blocks, tight.num_blocks);
}

TEST(EngineTest, RejectsRequestsThatCanNeverFit) {
  HarnessOptions opts;
  opts.num_blocks = 8;  // 32 tokens
  opts.max_model_len = 24;
  Harness h(opts);
  Status s = h.Add(1, Greedy(MakePrompt(24, 1), 1));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("context"), std::string::npos) << s.message();
  s = h.Add(2, Greedy(MakePrompt(20, 1), 5));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("max_tokens"), std::string::npos) << s.message();
  EXPECT_FALSE(h.Add(3, Greedy({}, 5)).ok());
  EXPECT_FALSE(h.Add(4, Greedy({1, 64}, 5)).ok());  // out of vocabulary
  ASSERT_TRUE(h.Add(5, Greedy(MakePrompt(20, 1), 4)).ok());
  EXPECT_FALSE(h.Add(5, Greedy(MakePrompt(20, 1), 4)).ok());  // duplicate id

  HarnessOptions small;
  small.num_blocks = 4;  // 16 tokens, context 512
  Harness p(small);
  s = p.Add(1, Greedy(MakePrompt(10, 1), 10));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("pool"), std::string::npos) << s.message();
  // Without max_tokens the limit is what the pool can hold.
  EngineRequest r = Greedy(MakePrompt(10, 1), -1);
  ASSERT_TRUE(p.Add(2, r).ok());
  p.RunToCompletion();
  EXPECT_EQ(p.result(2).tokens.size(), 6u);
  EXPECT_EQ(p.result(2).finish, FinishReason::kLength);
}

TEST(EngineTest, AbortFreesBlocksAndAddAbortCyclesLeakNothing) {
  HarnessOptions opts;
  opts.num_blocks = 64;
  Harness h(opts);
  ASSERT_TRUE(h.Add(1, Greedy(MakePrompt(30, 1), 50)).ok());
  for (int i = 0; i < 5; ++i) h.Step();
  EXPECT_GT(h.engine().Metrics().kv.used_blocks, 0);
  h.engine().Abort(1);
  h.Collect(h.engine().TakeOutputs());
  EXPECT_EQ(h.result(1).finish, FinishReason::kAbort);
  EXPECT_TRUE(h.finished(1));
  EXPECT_EQ(h.engine().Metrics().kv.used_blocks, 0);
  h.engine().Abort(1);  // unknown now: ignored

  std::mt19937 rng(5);
  for (uint64_t id = 100; id < 400; ++id) {
    EngineRequest r = Greedy(MakePrompt(1 + rng() % 40, id % 7), 1 + rng() % 30);
    r.params.n = 1 + rng() % 3;
    ASSERT_TRUE(h.Add(id, r).ok());
    for (int s = rng() % 4; s > 0; --s) h.Step();
    if (rng() % 3 != 0) h.engine().Abort(id - rng() % 3);
  }
  h.RunToCompletion();
  EngineMetrics m = h.engine().Metrics();
  EXPECT_EQ(m.kv.used_blocks, 0);
  EXPECT_EQ(m.kv.free_blocks, opts.num_blocks);
  EXPECT_EQ(m.num_running + m.num_waiting, 0);
  EXPECT_FALSE(h.engine().HasWork());
}

EngineRequest Seeded(std::vector<int32_t> prompt, uint64_t seed, int max_tokens) {
  EngineRequest r;
  r.prompt_tokens = std::move(prompt);
  r.params.temperature = 0.9f;
  r.params.top_p = 0.95f;
  r.params.top_k = 40;
  r.params.seed = seed;
  r.params.max_tokens = max_tokens;
  return r;
}

TEST(EngineTest, SeededSamplingIndependentOfBatch) {
  HarnessOptions opts;
  Harness alone(opts);
  ASSERT_TRUE(alone.Add(7, Seeded(MakePrompt(13, 2), 1234, 20)).ok());
  alone.RunToCompletion();

  HarnessOptions tight = opts;
  tight.num_blocks = 20;
  Harness crowd(tight);
  for (int i = 0; i < 6; ++i) {
    EngineRequest r = Seeded(MakePrompt(20 + i, 9 + i), 99 + i, 15);
    r.params.seed.reset();  // random seeds
    ASSERT_TRUE(crowd.Add(i, r).ok());
  }
  ASSERT_TRUE(crowd.Add(7, Seeded(MakePrompt(13, 2), 1234, 20)).ok());
  crowd.RunToCompletion();
  EXPECT_EQ(alone.result(7).tokens, crowd.result(7).tokens);
  EXPECT_GT(crowd.engine().Metrics().num_preemptions, 0);

  Harness other_seed(opts);
  ASSERT_TRUE(other_seed.Add(7, Seeded(MakePrompt(13, 2), 4321, 20)).ok());
  other_seed.RunToCompletion();
  EXPECT_NE(alone.result(7).tokens, other_seed.result(7).tokens);
}

TEST(EngineTest, NGreaterThanOneSharesPromptBlocks) {
  HarnessOptions opts;
  opts.prefix_caching = false;  // sharing must come from forking, not the cache
  Harness h(opts);
  EngineRequest r = Seeded(MakePrompt(41, 4), 500, 8);
  r.params.n = 4;
  ASSERT_TRUE(h.Add(1, r).ok());
  h.RunToCompletion();
  // Prompt of 41 = 10 full blocks + 1: the other choices fork the 10 blocks and compute 1.
  EXPECT_EQ(h.exec().num_tokens_computed(), 41 + 3 * 1 + 4 * 7);
  EXPECT_EQ(h.usage(1).completion_tokens, 32);
  EXPECT_EQ(h.usage(1).prompt_tokens, 41);
  for (int i = 0; i < 4; ++i) {
    Harness solo(opts);
    EngineRequest one = Seeded(MakePrompt(41, 4), 500 + i, 8);
    ASSERT_TRUE(solo.Add(1, one).ok());
    solo.RunToCompletion();
    EXPECT_EQ(h.result(1, i).tokens, solo.result(1).tokens) << "choice " << i;
    EXPECT_EQ(h.result(1, i).finish, FinishReason::kLength);
  }
  EXPECT_NE(h.result(1, 0).tokens, h.result(1, 1).tokens);
  EXPECT_EQ(h.engine().Metrics().kv.used_blocks, 0);
}

std::shared_ptr<FakeDetokenizer> TwoLetterVocab(int n) {
  std::vector<std::string> pieces;
  for (int i = 0; i < n; ++i) {
    pieces.push_back(std::string(1, char('a' + i % 26)) + char('A' + i / 26));
  }
  return std::make_shared<FakeDetokenizer>(pieces);
}

TEST(EngineTest, StopStringAcrossTokensIsExcluded) {
  HarnessOptions opts;
  opts.detokenizer = TwoLetterVocab(opts.n_vocab);
  Harness ref(opts);
  ASSERT_TRUE(ref.Add(1, Greedy(MakePrompt(9, 1), 12)).ok());
  ref.RunToCompletion();
  const std::string full = ref.result(1).text;
  ASSERT_EQ(full.size(), 24u);
  // A stop string made of the end of token 4 and the start of token 5.
  const std::string stop = full.substr(9, 2);
  const size_t at = full.find(stop);

  Harness h(opts);
  EngineRequest r = Greedy(MakePrompt(9, 1), 12);
  r.params.stop = {"zzzz", stop};
  ASSERT_TRUE(h.Add(1, r).ok());
  h.RunToCompletion();
  EXPECT_EQ(h.result(1).text, full.substr(0, at));
  EXPECT_EQ(h.result(1).finish, FinishReason::kStop);
  EXPECT_EQ(h.result(1).tokens.size(), (at + 2) / 2 + 1);
  EXPECT_EQ(h.engine().Metrics().kv.used_blocks, 0);
}

TEST(EngineTest, EosStopTokensIgnoreEosAndLogprobs) {
  HarnessOptions probe;
  Harness ref(probe);
  ASSERT_TRUE(ref.Add(1, Greedy(MakePrompt(9, 1), 10)).ok());
  ref.RunToCompletion();
  const std::vector<int32_t> toks = ref.result(1).tokens;

  HarnessOptions opts;
  opts.eos = {toks[3]};
  opts.detokenizer = TwoLetterVocab(opts.n_vocab);
  Harness h(opts);
  ASSERT_TRUE(h.Add(1, Greedy(MakePrompt(9, 1), 10)).ok());
  EngineRequest ign = Greedy(MakePrompt(9, 1), 10);
  ign.params.ignore_eos = true;
  ign.params.logprobs = 3;
  ASSERT_TRUE(h.Add(2, ign).ok());
  EngineRequest st = Greedy(MakePrompt(9, 1), 10);
  st.params.ignore_eos = true;
  st.params.stop_token_ids = {toks[5]};
  ASSERT_TRUE(h.Add(3, st).ok());
  h.RunToCompletion();

  const size_t first_eos = std::find(toks.begin(), toks.end(), toks[3]) - toks.begin();
  EXPECT_EQ(h.result(1).finish, FinishReason::kStop);
  EXPECT_EQ(h.result(1).tokens, std::vector<int32_t>(toks.begin(), toks.begin() + first_eos + 1));
  EXPECT_EQ(h.result(1).text.size(), 2 * first_eos);  // the EOS is not in the text
  EXPECT_EQ(h.result(2).tokens, toks);
  EXPECT_EQ(h.result(2).finish, FinishReason::kLength);
  ASSERT_EQ(h.result(2).logprobs.size(), toks.size());
  for (const TokenLogprobs& lp : h.result(2).logprobs) {
    ASSERT_EQ(lp.top.size(), 3u);
    EXPECT_EQ(lp.top[0].token, lp.token);  // greedy picks the most likely
    EXPECT_FLOAT_EQ(lp.top[0].logprob, lp.logprob);
    EXPECT_LT(lp.logprob, 0.0f);
  }
  EXPECT_EQ(h.result(3).finish, FinishReason::kStop);
  EXPECT_EQ(h.result(3).tokens.back(), toks[5]);
}

}  // namespace
}  // namespace tachyon::engine

namespace tachyon::engine {
namespace {

// Requests sharing a long prefix arrive while the first is still prefilling in chunks, so they
// hit blocks cached moments ago; outputs must match the oracle.
TEST(EngineTest, ConcurrentSharedPrefixesDuringChunkedPrefill) {
  HarnessOptions opts;
  opts.max_batched_tokens = 8;
  Harness h(opts);
  const std::vector<int32_t> common = MakePrompt(37, 11);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) {
    std::vector<int32_t> p = common;
    for (int j = 0; j <= i % 3; ++j) p.push_back((i * 3 + j) % 64);
    prompts.push_back(p);
    ASSERT_TRUE(h.Add(i, Greedy(p, 5)).ok());
    for (int s = 0; s < 2; ++s) h.Step();
  }
  h.RunToCompletion();
  int64_t cached = 0;
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(h.result(i).tokens, OracleGreedy(h.exec(), prompts[i], 5)) << "request " << i;
    cached += h.usage(i).cached_prompt_tokens;
  }
  EXPECT_GT(cached, 0);
}

}  // namespace
}  // namespace tachyon::engine
