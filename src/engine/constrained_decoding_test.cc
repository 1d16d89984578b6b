// Grammar-constrained decoding in the engine loop, over the fake model and a fake grammar.
#include "engine/constrained_decoding.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine/testing/fake_grammar.h"
#include "engine/testing/test_harness.h"

namespace tachyon::engine {
namespace {

using testing::FakeGrammar;
using testing::Greedy;
using testing::Harness;
using testing::HarnessOptions;
using testing::MakePrompt;

constexpr int32_t kEos = 63;

HarnessOptions WithEos() {
  HarnessOptions o;
  o.eos = {kEos};
  return o;
}

std::shared_ptr<FakeGrammar> Choices(std::vector<std::vector<int32_t>> choices,
                                     int32_t reject = -1) {
  return std::make_shared<FakeGrammar>(std::move(choices), std::vector<int32_t>{kEos}, reject);
}

EngineRequest Sampled(std::vector<int32_t> prompt, uint64_t seed, int n, int max_tokens) {
  EngineRequest r;
  r.prompt_tokens = std::move(prompt);
  r.params.temperature = 1.5f;
  r.params.seed = seed;
  r.params.n = n;
  r.params.max_tokens = max_tokens;
  return r;
}

// The output without its final EOS.
std::vector<int32_t> Body(std::vector<int32_t> tokens) {
  if (!tokens.empty() && tokens.back() == kEos) tokens.pop_back();
  return tokens;
}

TEST(ConstrainedDecodingTest, GreedyOutputIsASentenceAndStops) {
  Harness h(WithEos());
  // Unconstrained greedy output first: the grammar must change it.
  ASSERT_TRUE(h.Add(0, Greedy(MakePrompt(9, 1), 4)).ok());
  h.RunToCompletion();
  const std::vector<int32_t> free_run = h.result(0).tokens;

  auto g = Choices({{5, 6, 7}, {5, 9}, {11}});
  EngineRequest req = Greedy(MakePrompt(9, 1), 20);
  req.grammar = g;
  ASSERT_TRUE(h.Add(1, req).ok());
  h.RunToCompletion();
  const auto& c = h.result(1);
  EXPECT_TRUE(g->IsSentence(Body(c.tokens))) << ::testing::PrintToString(c.tokens);
  EXPECT_NE(c.tokens, free_run);
  EXPECT_EQ(c.finish, FinishReason::kStop);
  EXPECT_EQ(g->stats().fills, static_cast<int64_t>(c.tokens.size()));
}

// Each of n sampled choices gets its own matcher; all outputs are sentences, EOS comes only
// where a sentence is complete, and concurrent requests do not disturb each other.
TEST(ConstrainedDecodingTest, SampledChoicesEachFollowTheGrammar) {
  auto g = Choices({{3}, {3, 4, 5}, {3, 4, 6, 7}, {8, 8, 8, 8, 8, 8}});
  Harness h(WithEos());
  for (int id = 0; id < 8; ++id) {
    EngineRequest r = Sampled(MakePrompt(5 + id, id), 100 + id, 4, 30);
    r.grammar = g;
    ASSERT_TRUE(h.Add(id, r).ok());
    ASSERT_TRUE(h.Add(100 + id, Sampled(MakePrompt(5 + id, id), 100 + id, 2, 6)).ok());
  }
  h.RunToCompletion();
  std::set<std::vector<int32_t>> seen;
  for (int id = 0; id < 8; ++id) {
    for (int i = 0; i < 4; ++i) {
      const auto& c = h.result(id, i);
      EXPECT_TRUE(g->IsSentence(Body(c.tokens))) << ::testing::PrintToString(c.tokens);
      EXPECT_EQ(c.finish, FinishReason::kStop);
      seen.insert(Body(c.tokens));
    }
    EXPECT_FALSE(g->IsSentence(Body(h.result(100 + id, 0).tokens)));  // unconstrained: free
  }
  EXPECT_GE(seen.size(), 2u);  // sampling explored the grammar
}

// The masks are filled on the worker thread, not the engine's.
TEST(ConstrainedDecodingTest, MasksAreFilledOffTheEngineThread) {
  auto g = Choices({{1, 2, 3, 4, 5, 6}});
  Harness h(WithEos());
  EngineRequest r = Greedy(MakePrompt(4, 2), 20);
  r.grammar = g;
  ASSERT_TRUE(h.Add(0, r).ok());
  h.RunToCompletion();
  EXPECT_EQ(h.result(0).tokens, (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  std::lock_guard<std::mutex> lock(g->stats().mu);
  ASSERT_EQ(g->stats().fill_threads.size(), 1u);
  EXPECT_NE(*g->stats().fill_threads.begin(), std::this_thread::get_id());
}

// Logprobs are the model's own (raw logits), not those of the masked distribution.
TEST(ConstrainedDecodingTest, LogprobsStayTheModels) {
  auto g = Choices({{20, 21, 22}});
  Harness h(WithEos());
  const std::vector<int32_t> prompt = MakePrompt(6, 3);
  EngineRequest r = Greedy(prompt, 10);
  r.params.logprobs = 2;
  r.grammar = g;
  ASSERT_TRUE(h.Add(0, r).ok());
  h.RunToCompletion();
  const auto& c = h.result(0);
  ASSERT_EQ(c.tokens, (std::vector<int32_t>{20, 21, 22}));
  ASSERT_EQ(c.logprobs.size(), 3u);
  std::vector<int32_t> history = prompt;
  std::vector<float> logits(64);
  for (size_t k = 0; k < 3; ++k) {
    h.exec().LogitsFor(history, logits);
    double mx = logits[0], sum = 0;
    for (float l : logits) mx = std::max<double>(mx, l);
    for (float l : logits) sum += std::exp(l - mx);
    const double expected = logits[c.tokens[k]] - mx - std::log(sum);
    EXPECT_NEAR(c.logprobs[k].logprob, expected, 1e-4) << k;
    history.push_back(c.tokens[k]);
  }
}

// Recomputing preempted requests keeps each matcher in step with its output.
TEST(ConstrainedDecodingTest, PreemptionKeepsMatchersConsistent) {
  auto g = Choices({{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12},
                    {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15},
                    {2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2}});
  HarnessOptions roomy = WithEos();
  roomy.max_batched_tokens = 16;
  HarnessOptions tight = roomy;
  tight.num_blocks = 24;
  Harness a(roomy), b(tight);
  for (int i = 0; i < 12; ++i) {
    EngineRequest r = Sampled(MakePrompt(20 + 2 * i, i), 7 + i, 1, 20);
    r.grammar = g;
    ASSERT_TRUE(a.Add(i, r).ok());
    ASSERT_TRUE(b.Add(i, r).ok());
  }
  a.RunToCompletion();
  b.RunToCompletion();
  EXPECT_GT(b.engine().Metrics().num_preemptions, 0);
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(b.result(i).finish, FinishReason::kStop) << i;
    EXPECT_EQ(a.result(i).tokens, b.result(i).tokens) << i;
    EXPECT_TRUE(g->IsSentence(Body(b.result(i).tokens)));
  }
}

// A matcher that refuses a token its own mask allowed fails that choice with an error, never
// a crash or an output outside the grammar.
TEST(ConstrainedDecodingTest, RejectedTokenFailsTheChoice) {
  auto g = Choices({{4, 5}}, /*reject=*/5);
  Harness h(WithEos());
  EngineRequest r = Greedy(MakePrompt(3, 4), 10);
  r.grammar = g;
  ASSERT_TRUE(h.Add(0, r).ok());
  h.RunToCompletion();
  EXPECT_EQ(h.result(0).finish, FinishReason::kError);
  EXPECT_EQ(h.result(0).tokens, (std::vector<int32_t>{4}));
  EXPECT_EQ(h.engine().kv().Stats().used_blocks, 0);
}

// max_tokens still bounds a constrained output (finish_reason length mid-sentence), and
// min_tokens never overrides the grammar's end.
TEST(ConstrainedDecodingTest, LengthAndMinTokens) {
  auto g = Choices({{8, 8, 8, 8, 8, 8}});
  Harness h(WithEos());
  EngineRequest r = Greedy(MakePrompt(3, 5), 3);
  r.grammar = g;
  ASSERT_TRUE(h.Add(0, r).ok());
  auto g2 = Choices({{9, 10}});
  EngineRequest m = Greedy(MakePrompt(3, 5), 10);
  m.params.min_tokens = 5;
  m.grammar = g2;
  ASSERT_TRUE(h.Add(1, m).ok());
  h.RunToCompletion();
  EXPECT_EQ(h.result(0).tokens, (std::vector<int32_t>{8, 8, 8}));
  EXPECT_EQ(h.result(0).finish, FinishReason::kLength);
  EXPECT_EQ(h.result(1).tokens, (std::vector<int32_t>{9, 10}));
  EXPECT_EQ(h.result(1).finish, FinishReason::kStop);
}

// ignore_eos: an accepted EOS still ends the grammar (the output cannot go on).
TEST(ConstrainedDecodingTest, IgnoreEosStillEndsAtTheGrammarsEnd) {
  auto g = Choices({{3}, {3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}});
  Harness h(WithEos());
  for (int id = 0; id < 6; ++id) {
    EngineRequest r = Sampled(MakePrompt(4, id), 50 + id, 1, 30);
    r.params.ignore_eos = true;
    r.grammar = g;
    ASSERT_TRUE(h.Add(id, r).ok());
  }
  h.RunToCompletion();
  for (int id = 0; id < 6; ++id) {
    EXPECT_EQ(h.result(id).finish, FinishReason::kStop) << id;
    EXPECT_TRUE(g->IsSentence(Body(h.result(id).tokens)));
  }
}

// A continuation (its prompt ends with output tokens already delivered, params.output_offset of
// them) replays them through its matcher: a seeded constrained choice cut after any token goes
// on with exactly the original's remaining tokens.
TEST(ConstrainedDecodingTest, ContinuationReplaysTheResumedTokens) {
  auto g = Choices({{3}, {3, 4, 5}, {3, 4, 6, 7}, {3, 4, 6, 9, 10}, {8, 8, 8, 8, 8, 8}, {8, 9}});
  Harness h(WithEos());
  int compared = 0;
  for (int seed = 0; seed < 12; ++seed) {
    const std::vector<int32_t> prompt = MakePrompt(6, seed);
    EngineRequest r = Sampled(prompt, 900 + seed, 1, 30);
    r.grammar = g;
    ASSERT_TRUE(h.Add(seed, r).ok());
    h.RunToCompletion();
    const std::vector<int32_t> full = h.result(seed).tokens;
    ASSERT_TRUE(g->IsSentence(Body(full))) << ::testing::PrintToString(full);
    for (size_t k = 1; k < full.size(); ++k) {
      EngineRequest c = r;
      c.prompt_tokens.insert(c.prompt_tokens.end(), full.begin(), full.begin() + k);
      c.params.output_offset = static_cast<int>(k);
      c.params.max_tokens = 30 - static_cast<int>(k);
      const uint64_t id = 1000 + seed * 100 + k;
      ASSERT_TRUE(h.Add(id, c).ok());
      h.RunToCompletion();
      EXPECT_EQ(h.result(id).tokens, std::vector<int32_t>(full.begin() + k, full.end()))
          << "seed " << seed << " cut after " << k;
      ++compared;
    }
  }
  EXPECT_GE(compared, 12);
}

// Resumed tokens the constraint refuses, or that already complete it, are the caller's error:
// Validate and Add fail and nothing of the request stays.
TEST(ConstrainedDecodingTest, ContinuationOutsideTheGrammarIsRefused) {
  auto g = Choices({{3, 4, 5}, {3, 4, 6, 7}});
  Harness h(WithEos());
  for (const std::vector<int32_t>& resumed :
       {std::vector<int32_t>{3, 9}, std::vector<int32_t>{4}, std::vector<int32_t>{3, 4, 5}}) {
    EngineRequest c = Greedy(MakePrompt(5, 1), 10);
    c.prompt_tokens.insert(c.prompt_tokens.end(), resumed.begin(), resumed.end());
    c.params.output_offset = static_cast<int>(resumed.size());
    c.grammar = g;
    // Validate (the caller's thread, before a stream's head) refuses it as Add does.
    EXPECT_EQ(h.engine().Validate(c).code(), StatusCode::kInvalidArgument);
    const Status st = h.Add(7, c);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  }
  EXPECT_EQ(h.engine().kv().Stats().used_blocks, 0);
  EngineRequest ok = Greedy(MakePrompt(5, 1), 10);  // the id is still free
  ok.prompt_tokens.push_back(3);
  ok.params.output_offset = 1;
  ok.grammar = g;
  ASSERT_TRUE(h.Add(7, ok).ok());
  h.RunToCompletion();
  EXPECT_TRUE(g->IsSentence(Body([&] {
    std::vector<int32_t> t = {3};
    for (int32_t x : h.result(7).tokens) t.push_back(x);
    return t;
  }())));
}

}  // namespace
}  // namespace tachyon::engine
