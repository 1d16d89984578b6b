// Speculative decoding through the engine over the strict fake executor: output with drafts
// equals output without them (greedy, and seeded sampling: one-hot drafts are verified by the
// request's own draw), with chunked prefill, prefix caching, preemption, n > 1, stop strings,
// EOS, max_tokens and logprobs; rejected drafts' KV is rolled back (blocks back in the pool,
// prefix-cache hashes only over accepted tokens).
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "engine/speculative_step.h"
#include "engine/testing/fake_grammar.h"
#include "engine/testing/oracle_drafter.h"
#include "engine/testing/spec_testing.h"
#include "engine/testing/test_harness.h"
#include "sampling/logits_processors.h"
#include "sampling/sampler.h"
#include "spec/ngram_drafter.h"

namespace tachyon::engine {
namespace {

using testing::ExpectSame;
using testing::FakeGrammar;
using testing::Greedy;
using testing::Harness;
using testing::HarnessOptions;
using testing::LetterDetokenizer;
using testing::MakePrompt;
using testing::MixedGreedy;
using testing::OracleDrafter;
using testing::RunAll;
using testing::StopAndLengthRequests;

// How each sequence (by seq_id, assigned in Add order, n per request) samples: the oracle
// replays the engine's sampler on the fake's logits.
struct SeqInfo {
  sampling::SamplingParams params;
  uint64_t seed = 0;
  int64_t prompt_len = 0;
};

std::function<std::unique_ptr<spec::Drafter>(const FakeModelExecutor&)> Oracle(
    const std::map<int64_t, SeqInfo>* seqs) {
  return [seqs](const FakeModelExecutor& exec) {
    return std::make_unique<OracleDrafter>(
        exec.n_vocab(), [&exec, seqs](int64_t seq_id, std::span<const int32_t> tokens) {
          std::vector<float> logits(exec.n_vocab());
          exec.LogitsFor(tokens, logits);
          if (seqs == nullptr || !seqs->count(seq_id)) return sampling::Argmax(logits);
          auto it = seqs->find(seq_id);
          sampling::SamplingInput in;
          in.prompt = tokens.first(it->second.prompt_len);
          in.output = tokens.subspan(it->second.prompt_len);
          in.seed = it->second.seed;
          return sampling::Sample(logits, it->second.params, in).token;
        });
  };
}

spec::SpeculativeConfig Spec(int k) {
  spec::SpeculativeConfig c;
  c.method = spec::SpecMethod::kNgram;
  c.num_speculative_tokens = k;
  c.disable_by_batch_size = 1 << 20;
  c.min_acceptance_rate = 0;  // never pause: every step verifies drafts
  return c;
}

void ExpectVerifiedBoth(const spec::SpecStats& s) {
  EXPECT_GT(s.num_drafts, 0);
  EXPECT_GT(s.num_accepted_tokens, 0);
  EXPECT_LT(s.num_accepted_tokens, s.num_draft_tokens);  // some rejected
  int64_t sum = 0;
  for (size_t i = 0; i < s.accepted_per_position.size(); ++i) {
    sum += s.accepted_per_position[i];
    if (i > 0) {
      EXPECT_LE(s.accepted_per_position[i], s.accepted_per_position[i - 1]);
    }
  }
  EXPECT_EQ(sum, s.num_accepted_tokens);
}

TEST(SpeculativeTest, GreedyWithDraftsEqualsWithout) {
  HarnessOptions off;
  off.max_batched_tokens = 24;  // chunked prefill; the drafts count against the budget
  Harness ref(off);
  const auto want = RunAll(&ref, MixedGreedy(12, 30));

  HarnessOptions on = off;
  on.speculative = Spec(4);
  on.drafter = Oracle(nullptr);
  Harness h(on);
  ExpectSame(want, RunAll(&h, MixedGreedy(12, 30)));
  const EngineMetrics m = h.engine().Metrics();
  ExpectVerifiedBoth(m.spec);
  EXPECT_EQ(m.generation_tokens, ref.engine().Metrics().generation_tokens);
  // Accepted drafts save forward passes.
  EXPECT_LT(m.num_steps, ref.engine().Metrics().num_steps);
}

TEST(SpeculativeTest, NgramDrafterGreedyEqualsWithout) {
  HarnessOptions off;
  off.n_vocab = 6;  // a tiny vocabulary: the fake's greedy output repeats n-grams often
  Harness ref(off);
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(Greedy(MakePrompt(5 + 3 * i, i, 6), 40));
  const auto want = RunAll(&ref, reqs);
  HarnessOptions on = off;
  on.speculative = Spec(3);
  Harness h(on);
  ExpectSame(want, RunAll(&h, reqs));
  EXPECT_GT(h.engine().Metrics().spec.num_accepted_tokens, 0);
}

TEST(SpeculativeTest, SuffixDrafterGreedyEqualsWithoutAndLearnsFromFinishedOutputs) {
  HarnessOptions off;
  off.n_vocab = 6;
  Harness ref(off);
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(Greedy(MakePrompt(5 + 3 * i, i, 6), 40));
  const auto want = RunAll(&ref, reqs);
  HarnessOptions on = off;
  on.speculative = Spec(4);
  on.speculative.method = spec::SpecMethod::kSuffix;
  on.speculative.suffix.min_token_prob = 0;
  Harness h(on);
  ExpectSame(want, RunAll(&h, reqs));
  const spec::SpecStats first = h.engine().Metrics().spec;
  EXPECT_GT(first.num_accepted_tokens, 0);
  // The same requests again: their outputs are in the global tree now, so more is accepted.
  ExpectSame(want, RunAll(&h, reqs, reqs.size()));
  const spec::SpecStats both = h.engine().Metrics().spec;
  EXPECT_GT(both.num_accepted_tokens - first.num_accepted_tokens, first.num_accepted_tokens);
}

TEST(SpeculativeTest, TightPoolPreemptsAndMatches) {
  HarnessOptions off;
  off.num_blocks = 24;  // 96 positions for 8 requests of ~50: preemption
  off.max_batched_tokens = 64;
  Harness ref(off);
  const auto want = RunAll(&ref, MixedGreedy(8, 30));
  EXPECT_GT(ref.engine().Metrics().num_preemptions, 0);
  HarnessOptions on = off;
  on.speculative = Spec(4);
  on.drafter = Oracle(nullptr);
  Harness h(on);
  ExpectSame(want, RunAll(&h, MixedGreedy(8, 30)));
  EXPECT_GT(h.engine().Metrics().num_preemptions, 0);
  ExpectVerifiedBoth(h.engine().Metrics().spec);
}

TEST(SpeculativeTest, SeededSamplingNGreaterThanOneEqualsWithout) {
  // Choices share prompt blocks; each has its own seed; penalties make the draw depend on the
  // whole output, logprobs come from each row.
  std::vector<EngineRequest> reqs;
  std::map<int64_t, SeqInfo> seqs;
  int64_t seq = 0;
  for (int i = 0; i < 4; ++i) {
    EngineRequest r;
    r.prompt_tokens = MakePrompt(9 + 4 * i, i);
    r.params.n = 3;
    r.params.temperature = 0.6f + 0.3f * i;
    r.params.top_k = i == 2 ? 5 : 0;
    r.params.presence_penalty = 0.5f;
    r.params.frequency_penalty = 0.2f;
    r.params.seed = 1000 + i;
    r.params.max_tokens = 25;
    r.params.logprobs = 2;
    for (int c = 0; c < r.params.n; ++c) {
      seqs[seq++] = {r.params, 1000 + static_cast<uint64_t>(i + c),
                     static_cast<int64_t>(r.prompt_tokens.size())};
    }
    reqs.push_back(r);
  }
  Harness ref;
  const auto want = RunAll(&ref, reqs);
  HarnessOptions on;
  on.speculative = Spec(5);
  on.drafter = Oracle(&seqs);
  Harness h(on);
  ExpectSame(want, RunAll(&h, reqs));
  ExpectVerifiedBoth(h.engine().Metrics().spec);
}

TEST(SpeculativeTest, StopStringEosAndMaxTokensInsideDrafts) {
  HarnessOptions off;
  off.detokenizer = LetterDetokenizer(off.n_vocab);
  // The greedy continuation of a probe: stop strings, EOS and limits placed inside it.
  Harness probe(off);
  const auto plain = RunAll(&probe, {Greedy(MakePrompt(9, 1), 20)});
  const std::string text = plain[0].at(0).text;
  ASSERT_EQ(text.size(), 20u);
  std::vector<EngineRequest> reqs = StopAndLengthRequests(text);
  EngineRequest stop_id = Greedy(MakePrompt(9, 1), 20);
  stop_id.params.stop_token_ids = {plain[0].at(0).tokens[7]};
  reqs.push_back(stop_id);
  Harness ref(off);
  const auto want = RunAll(&ref, reqs);

  HarnessOptions on = off;
  on.speculative = Spec(6);
  on.drafter = Oracle(nullptr);
  Harness h(on);
  ExpectSame(want, RunAll(&h, reqs));
  for (size_t i = 4; i < 9; ++i) EXPECT_EQ(want[i].at(0).finish, FinishReason::kLength);

  HarnessOptions eos = on;
  eos.eos = {plain[0].at(0).tokens[4]};
  HarnessOptions eos_off = off;
  eos_off.eos = eos.eos;
  Harness e_ref(eos_off), e(eos);
  ExpectSame(RunAll(&e_ref, {Greedy(MakePrompt(9, 1), 20)}),
             RunAll(&e, {Greedy(MakePrompt(9, 1), 20)}));
}

TEST(SpeculativeTest, PrefixCacheHoldsOnlyAcceptedTokens) {
  // A: prompt P. B: prompt P + A's output (shares A's full blocks, generated ones included,
  // when their hashes are right). A wrong hash (rejected drafts hashed) would hand B a block of
  // other tokens and change its output.
  HarnessOptions on;
  on.speculative = Spec(4);
  on.drafter = Oracle(nullptr);
  on.max_model_len = 200;
  Harness h(on);
  const std::vector<int32_t> p = MakePrompt(10, 3);
  ASSERT_TRUE(h.Add(1, Greedy(p, 33)).ok());
  h.RunToCompletion();
  std::vector<int32_t> p2 = p;
  const auto& out_a = h.result(1).tokens;
  p2.insert(p2.end(), out_a.begin(), out_a.end());
  ASSERT_TRUE(h.Add(2, Greedy(p2, 12)).ok());
  h.RunToCompletion();
  // (10 + 33 - 1) computed positions of A: 10 full blocks of 4.
  EXPECT_EQ(h.usage(2).cached_prompt_tokens, 40);
  Harness ref;
  ASSERT_TRUE(ref.Add(2, Greedy(p2, 12)).ok());
  ref.RunToCompletion();
  EXPECT_EQ(h.result(2).tokens, ref.result(2).tokens);
  EXPECT_EQ(h.engine().Metrics().kv.used_blocks, 0);
}

TEST(SpeculativeTest, RejectedDraftBlocksGoBackToThePool) {
  HarnessOptions on;
  on.speculative = Spec(8);
  on.drafter = Oracle(nullptr);
  on.prefix_caching = false;
  Harness h(on);
  ASSERT_TRUE(h.Add(1, Greedy(MakePrompt(6, 2), 60)).ok());
  const int bs = on.block_size;
  int64_t emitted = 6;
  while (h.engine().HasWork()) {
    for (const RequestOutput& o : h.engine().Step()) emitted += o.token_ids.size();
    if (!h.engine().HasWork()) break;
    // The request holds blocks for its tokens (the last one's KV pending), none for drafts.
    EXPECT_LE(h.engine().Metrics().kv.used_blocks, (emitted + bs - 1) / bs);
  }
  EXPECT_EQ(emitted, 66);
  EXPECT_EQ(h.engine().Metrics().kv.used_blocks, 0);
  EXPECT_EQ(h.engine().Metrics().kv.free_blocks, on.num_blocks);
}

// A drafter that is always wrong (greedy requests, no penalties).
class WrongDrafter : public spec::Drafter {
 public:
  explicit WrongDrafter(const FakeModelExecutor& exec) : exec_(exec) {}
  void Propose(int64_t, std::span<const int32_t> tokens, int64_t, int max_tokens,
               std::vector<int32_t>* draft) override {
    std::vector<float> logits(exec_.n_vocab());
    exec_.LogitsFor(tokens, logits);
    const int32_t wrong = (sampling::Argmax(logits) + 1) % exec_.n_vocab();
    for (int j = 0; j < max_tokens; ++j) draft->push_back(wrong);
  }

 private:
  const FakeModelExecutor& exec_;
};

TEST(SpeculativeTest, PoorAcceptancePausesDrafting) {
  HarnessOptions on;
  on.speculative = Spec(4);
  on.speculative.min_acceptance_rate = 0.3;
  on.drafter = [](const FakeModelExecutor& e) { return std::make_unique<WrongDrafter>(e); };
  Harness h(on);
  ASSERT_TRUE(h.Add(1, Greedy(MakePrompt(6, 2), 100)).ok());
  h.RunToCompletion();
  const spec::SpecStats s = h.engine().Metrics().spec;
  EXPECT_EQ(s.num_accepted_tokens, 0);
  // A first draft of up to 4 (as long as the measured step costs make pay at full acceptance),
  // then 1-token drafts: the warm-up, or probes after pauses of 16, 32 ... steps once nothing
  // is expected to be accepted.
  EXPECT_LE(s.num_drafts, 8);
  EXPECT_GT(s.num_drafts, 0);
  EXPECT_LE(s.num_draft_tokens, 4 + s.num_drafts - 1);  // at most 4 at first, then 1
}

// Counts the tokens the wrapped drafter proposes (before the engine cuts them) and, if
// `calls` is given, how often it is asked.
class CountingDrafter : public spec::Drafter {
 public:
  CountingDrafter(std::unique_ptr<spec::Drafter> inner, int64_t* proposed,
                  int64_t* calls = nullptr)
      : inner_(std::move(inner)), proposed_(proposed), calls_(calls) {}
  void Propose(int64_t seq_id, std::span<const int32_t> tokens, int64_t num_prompt_tokens,
               int max_tokens, std::vector<int32_t>* draft) override {
    if (calls_) ++*calls_;
    const size_t before = draft->size();
    inner_->Propose(seq_id, tokens, num_prompt_tokens, max_tokens, draft);
    *proposed_ += static_cast<int64_t>(draft->size() - before);
  }

 private:
  std::unique_ptr<spec::Drafter> inner_;
  int64_t* proposed_;
  int64_t* calls_;
};

// At a batch of disable_by_batch_size or more, speculation does no work at all: the drafter is
// not consulted and the engine runs exactly the steps it runs without speculation (so the
// sweep's spec-on / spec-off ratio there is the machine's noise around 1).
TEST(SpeculativeTest, LargeBatchRunsTheStepsOfNoSpeculation) {
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 4; ++i) reqs.push_back(Greedy(MakePrompt(5, i, 6), 12));
  HarnessOptions off;
  off.n_vocab = 6;  // the fake's greedy output repeats: n-gram drafts would be found
  Harness ref(off);
  const auto want = RunAll(&ref, reqs);

  HarnessOptions on = off;
  on.speculative = Spec(4);
  on.speculative.disable_by_batch_size = 4;
  int64_t calls = 0, proposed = 0;
  on.drafter = [&calls, &proposed](const FakeModelExecutor&) {
    return std::make_unique<CountingDrafter>(std::make_unique<spec::NgramDrafter>(1, 3),
                                             &proposed, &calls);
  };
  Harness h(on);
  ExpectSame(want, RunAll(&h, reqs));
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(h.engine().Metrics().spec.num_drafts, 0);
  EXPECT_EQ(h.engine().Metrics().num_steps, ref.engine().Metrics().num_steps);
  EXPECT_EQ(h.exec().num_calls(), ref.exec().num_calls());
  EXPECT_EQ(h.exec().num_tokens_computed(), ref.exec().num_tokens_computed());

  // Below the threshold the same requests draft (the check above can fail).
  on.speculative.disable_by_batch_size = 5;
  calls = 0;
  Harness small(on);
  ExpectSame(want, RunAll(&small, reqs));
  EXPECT_GT(calls, 0);
  EXPECT_GT(small.engine().Metrics().spec.num_drafts, 0);
}

TEST(SpeculativeTest, DraftsAreCutAtTheGrammarsFirstRefusedToken) {
  // The oracle drafts what greedy decoding under the grammar emits, spoiling one position of
  // some drafts and running on past the grammar's end: the spoiled token and everything after
  // it, and drafts past the end, are refused by the grammar and never verified; the output is
  // that without speculation.
  constexpr int32_t kGrammarEos = 63;
  constexpr int kPromptLen = 9;
  auto g = std::make_shared<FakeGrammar>(
      std::vector<std::vector<int32_t>>{{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12},
                                        {1, 2, 3, 40, 41, 42, 43, 44, 45, 46},
                                        {1, 2, 20, 21, 22, 23, 24, 25, 26, 27, 28},
                                        {30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42}},
      std::vector<int32_t>{kGrammarEos});
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 8; ++i) {
    reqs.push_back(Greedy(MakePrompt(kPromptLen, i), 40));
    reqs.back().grammar = g;
  }
  HarnessOptions off;
  off.eos = {kGrammarEos};
  Harness ref(off);
  const auto want = RunAll(&ref, reqs);
  for (const auto& r : want) {
    std::vector<int32_t> body = r.at(0).tokens;
    ASSERT_FALSE(body.empty());
    if (body.back() == kGrammarEos) body.pop_back();
    EXPECT_TRUE(g->IsSentence(body));
  }

  // Greedy under the grammar: the argmax over the tokens it allows after the output so far.
  auto truth = [g](const FakeModelExecutor& exec, std::span<const int32_t> tokens) {
    std::vector<float> logits(exec.n_vocab());
    exec.LogitsFor(tokens, logits);
    auto m = g->NewMatcher();
    bool ok = true;
    for (size_t i = kPromptLen; i < tokens.size() && ok; ++i) ok = m->AcceptToken(tokens[i]);
    if (ok) {
      std::vector<uint32_t> mask((static_cast<size_t>(exec.n_vocab()) + 31) / 32);
      m->FillNextTokenBitmask(mask);
      for (int32_t v = 0; v < exec.n_vocab(); ++v) {
        if (!(mask[static_cast<size_t>(v) / 32] >> (v % 32) & 1u)) logits[v] = -1e30f;
      }
    }
    return sampling::Argmax(logits);
  };
  int64_t proposed = 0;
  HarnessOptions on = off;
  on.speculative = Spec(6);
  on.drafter = [&](const FakeModelExecutor& exec) -> std::unique_ptr<spec::Drafter> {
    return std::make_unique<CountingDrafter>(
        std::make_unique<OracleDrafter>(
            exec.n_vocab(),
            [&exec, truth](int64_t, std::span<const int32_t> t) { return truth(exec, t); }),
        &proposed);
  };
  Harness h(on);
  ExpectSame(want, RunAll(&h, reqs));
  const spec::SpecStats s = h.engine().Metrics().spec;
  EXPECT_GT(s.num_accepted_tokens, 0);
  EXPECT_LT(s.num_draft_tokens, proposed);  // the cut dropped refused drafts
  // The oracle's only wrong tokens (spoiled ones, those past the grammar's end, where the
  // request finishes) are all cut: no choice branches into two tokens one apart, and none is a
  // prefix of another. So every draft token left is right.
  EXPECT_EQ(s.num_accepted_tokens, s.num_draft_tokens);
}

// The cost rule on a fake clock: one request whose n-gram drafts are always right (a prompt
// repeating a 7-token pattern), run step by step through the Speculator with step seconds from
// `seconds(rows, rows_seen)` (rows_seen: steps of that many rows so far, 0 for the first)
// instead of a clock. Returns the draft length of every step after the prefill.
std::vector<int> DraftLengthsOnFakeClock(const std::function<double(int64_t, int)>& seconds,
                                         int steps) {
  spec::SpeculativeConfig c = Spec(8);
  c.min_acceptance_rate = 0.25;  // the cost rule and pauses on
  auto sp = Speculator::Create(c, nullptr);
  EXPECT_TRUE(sp.ok());
  constexpr int kPeriod = 7;
  Request r;
  r.seq_id = 1;
  for (int i = 0; i < 4 * kPeriod; ++i) r.tokens.push_back(i % kPeriod);
  r.num_prompt_tokens = static_cast<int64_t>(r.tokens.size());
  r.max_tokens = 1 << 20;
  r.state = RequestState::kRunning;
  std::map<int64_t, int> seen;  // rows -> steps so far
  auto observe = [&](int64_t rows) { (*sp)->ObserveStep(rows, seconds(rows, seen[rows]++)); };
  observe(r.num_prompt_tokens);  // the prefill, which emits the first token
  r.tokens.push_back(static_cast<int32_t>(r.tokens.size() % kPeriod));
  std::vector<int> lengths;
  for (int step = 0; step < steps; ++step) {
    (*sp)->Propose(&r, 1, 1 << 22);
    (*sp)->Flush();
    const int k = static_cast<int>(r.draft_tokens.size());
    lengths.push_back(k);
    observe(1 + k);
    for (int32_t t : r.draft_tokens) {
      EXPECT_EQ(t, static_cast<int32_t>(r.tokens.size() % kPeriod));
      r.tokens.push_back(t);
    }
    r.tokens.push_back(static_cast<int32_t>(r.tokens.size() % kPeriod));  // the bonus token
    (*sp)->Verified(r, k, k);
  }
  return lengths;
}

// Memory-bound steps (9 rows cost 8% more than 1), where drafting always pays.
double MemoryBound(int64_t rows) {
  return 0.010 + 0.0001 * static_cast<double>(rows);
}

TEST(SpeculativeTest, OneSlowStepDoesNotSwitchDraftingOff) {
  // The first 9-row step (the first draft) takes 20x as long; then normal steps.
  const std::vector<int> lengths = DraftLengthsOnFakeClock(
      [](int64_t rows, int seen) { return MemoryBound(rows) * (rows == 9 && seen == 0 ? 20 : 1); },
      60);
  EXPECT_EQ(lengths[0], 0);  // a 1-row step measures what no drafts cost
  // The first draft is priced at alpha 0.5 (nothing verified yet): shorter than the cap.
  EXPECT_GT(lengths[1], 0);
  EXPECT_LT(lengths[1], 8);
  ASSERT_EQ(lengths[2], 8);  // the spike
  // The spike is measured again at once (one sample is not believed), and then outvoted.
  for (size_t i = 3; i < lengths.size(); ++i) EXPECT_EQ(lengths[i], 8) << i;
}

TEST(SpeculativeTest, TheFirstDraftIsShortWhereRowsAreExpensive) {
  // A small model (t(n) = 3 + 1.4 n ms): a first draft that missed every token would cost
  // several steps if it were long, so it is one token; once drafts are accepted they grow.
  const std::vector<int> lengths = DraftLengthsOnFakeClock(
      [](int64_t rows, int) { return 0.003 + 0.0014 * static_cast<double>(rows); }, 10);
  EXPECT_EQ(lengths[0], 0);
  EXPECT_EQ(lengths[1], 1);
  EXPECT_EQ(lengths.back(), 8);
}

TEST(SpeculativeTest, SustainedSlowStepsPauseDraftingUntilForgotten) {
  // The first two 9-row steps are 20x slow: that is believed, and drafting falls back to what
  // pays under it (drafts no longer than the first one, whose rows were measured as cheap as
  // 1), until those samples are forgotten and 9 rows are measured again.
  const int steps = static_cast<int>(spec::StepCostModel::kForgetAfter) + 60;
  const std::vector<int> lengths = DraftLengthsOnFakeClock(
      [](int64_t rows, int seen) { return MemoryBound(rows) * (rows == 9 && seen < 2 ? 20 : 1); },
      steps);
  ASSERT_LT(lengths[1], 8);  // the first draft (alpha 0.5)
  ASSERT_EQ(lengths[2], 8);
  ASSERT_EQ(lengths[3], 8);
  EXPECT_LT(lengths[4], 8);
  int short_drafts = 0;
  int resumed = -1;
  for (int i = 4; i < steps && resumed < 0; ++i) {
    if (lengths[i] == 8) resumed = i;
    if (lengths[i] > 0 && lengths[i] < 8) {
      EXPECT_LE(lengths[i], lengths[1]);
      ++short_drafts;
    }
  }
  EXPECT_GT(short_drafts, 0);
  ASSERT_GT(resumed, 0);
  // The spikes are forgotten kForgetAfter observations after they were taken (each step is one),
  // and the next probe then drafts the full length.
  EXPECT_LE(resumed, 4 + spec::StepCostModel::kForgetAfter +
                         2 * (spec::DraftLengthController::kCostPause + 2));
  // From then on full drafts, but for one step without (the 1-row time, last measured before
  // drafting took over, is forgotten too and measured again).
  int undrafted = 0;
  for (int i = resumed; i < steps; ++i) {
    if (lengths[i] == 0) {
      ++undrafted;
    } else {
      EXPECT_EQ(lengths[i], 8) << i;
    }
  }
  EXPECT_LE(undrafted, 1);
}

TEST(SpeculativeTest, DraftingThatCannotPayStaysOff) {
  // Compute-bound steps (seconds proportional to rows): even 8 accepted drafts emit 9 tokens in
  // the time of 9 steps, short of the 5% margin. The first draft, priced at alpha 0.5 on the
  // rows interpolated up to the prefill's, does not pay either: only one-token probes every
  // kCostPause + 1 steps.
  const std::vector<int> lengths = DraftLengthsOnFakeClock(
      [](int64_t rows, int) { return 0.01 * static_cast<double>(rows); }, 200);
  int drafted = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    EXPECT_LE(lengths[i], 1) << i;
    drafted += lengths[i];
  }
  EXPECT_LE(drafted, 200 / spec::DraftLengthController::kCostPause + 1);
}

TEST(SpeculativeTest, DraftsOfOneStepShareItsCost) {
  // Steps cost the same up to 10 rows and grow with the rows beyond: at batch 2 the 8 free
  // rows go to the two sequences' likeliest drafts (4 each at the first draft's acceptance);
  // more rows on top no longer pay.
  spec::SpeculativeConfig c = Spec(8);
  c.min_acceptance_rate = 0.25;
  auto sp = Speculator::Create(c, nullptr);
  ASSERT_TRUE(sp.ok());
  for (int64_t rows : {2, 10, 18, 26, 34}) {
    for (int i = 0; i < 2; ++i) (*sp)->ObserveStep(rows, std::max<double>(1, rows / 10.0));
  }
  std::vector<Request> reqs(2);
  for (int i = 0; i < 2; ++i) {
    reqs[i].seq_id = i;
    for (int j = 0; j < 29; ++j) reqs[i].tokens.push_back(j % 7);
    reqs[i].num_prompt_tokens = 28;
    reqs[i].max_tokens = 100;
    reqs[i].state = RequestState::kRunning;
  }
  (*sp)->Propose(&reqs[0], 2, 1 << 20);
  (*sp)->Propose(&reqs[1], 2, 1 << 20);
  (*sp)->Flush();
  EXPECT_EQ(reqs[0].draft_tokens.size(), 4u);
  EXPECT_EQ(reqs[1].draft_tokens.size(), 4u);
  // The next step starts afresh: one sequence alone drafting fills the free rows.
  reqs[0].draft_tokens.clear();
  (*sp)->Propose(&reqs[0], 2, 1 << 20);
  (*sp)->Flush();
  EXPECT_EQ(reqs[0].draft_tokens.size(), 8u);
}

TEST(SpeculativeTest, AWaitingPromptIsNotSlowedByDrafts) {
  // Steps cost the same up to 4 rows, then a tenth more per row. A sequence alone drafts 8;
  // with a prompt waiting for the next step, only the rows that do not slow that step.
  spec::SpeculativeConfig c = Spec(8);
  c.min_acceptance_rate = 0.25;
  auto sp = Speculator::Create(c, nullptr);
  ASSERT_TRUE(sp.ok());
  for (int64_t rows = 1; rows <= 16; ++rows) {
    for (int i = 0; i < 2; ++i) {
      (*sp)->ObserveStep(rows, rows <= 4 ? 1.0 : 1.0 + 0.1 * static_cast<double>(rows - 4));
    }
  }
  Request r;
  r.seq_id = 1;
  for (int j = 0; j < 29; ++j) r.tokens.push_back(j % 7);
  r.num_prompt_tokens = 28;
  r.max_tokens = 100;
  r.state = RequestState::kRunning;
  for (int i = 0; i < spec::DraftLengthController::kWarmupDrafts; ++i) {
    // Drafts accepted: priced at the highest acceptance.
    (*sp)->Propose(&r, 1, 1 << 20);
    (*sp)->Flush(/*num_waiting=*/0);
    const int k = static_cast<int>(r.draft_tokens.size());
    ASSERT_GT(k, 0);
    (*sp)->Verified(r, k, k);
  }
  (*sp)->Propose(&r, 1, 1 << 20);
  (*sp)->Flush(/*num_waiting=*/0);
  EXPECT_EQ(r.draft_tokens.size(), 8u);
  (*sp)->Propose(&r, 1, 1 << 20);
  (*sp)->Flush(/*num_waiting=*/1);
  EXPECT_EQ(r.draft_tokens.size(), 3u);
}

// A closed burst on a fake clock (step seconds = seconds(rows)): each stream is what one
// sequence emits after a 16-token prompt of its own; all start together and run to their end
// with n-gram drafts under the cost rule (verified against the stream), or without drafts.
// Returns the seconds until the last one finishes, the prefill not counted.
double BurstSeconds(const std::vector<std::vector<int32_t>>& streams,
                    const std::function<double(int64_t)>& seconds, bool speculate) {
  spec::SpeculativeConfig c = Spec(8);
  c.min_acceptance_rate = 0.25;  // the default cost rule and pauses
  c.disable_by_batch_size = 8;
  auto sp = Speculator::Create(c, nullptr);
  EXPECT_TRUE(sp.ok());
  const size_t n = streams.size();
  std::vector<Request> reqs(n);
  std::vector<size_t> pos(n, 0);
  for (size_t i = 0; i < n; ++i) {
    reqs[i].seq_id = static_cast<int64_t>(i);
    for (int j = 0; j < 16; ++j) reqs[i].tokens.push_back(static_cast<int32_t>(1000 + 16 * i + j));
    reqs[i].num_prompt_tokens = 16;
    reqs[i].max_tokens = static_cast<int64_t>(streams[i].size());
    reqs[i].state = RequestState::kRunning;
    reqs[i].tokens.push_back(streams[i][pos[i]++]);  // from the prefill
  }
  double total = 0;
  int running = static_cast<int>(n);
  while (running > 0) {
    if (speculate) {
      for (size_t i = 0; i < n; ++i) {
        if (pos[i] < streams[i].size()) (*sp)->Propose(&reqs[i], running, 1 << 20);
      }
      (*sp)->Flush();
    }
    int64_t rows = 0;
    for (size_t i = 0; i < n; ++i) {
      if (pos[i] < streams[i].size()) rows += 1 + static_cast<int64_t>(reqs[i].draft_tokens.size());
    }
    total += seconds(rows);
    (*sp)->ObserveStep(rows, seconds(rows));
    for (size_t i = 0; i < n; ++i) {
      if (pos[i] >= streams[i].size()) continue;
      const std::vector<int32_t> draft = std::exchange(reqs[i].draft_tokens, {});
      size_t accepted = 0;
      while (accepted < draft.size() && pos[i] + accepted < streams[i].size() &&
             draft[accepted] == streams[i][pos[i] + accepted]) {
        ++accepted;
      }
      for (size_t j = 0; j <= accepted && pos[i] < streams[i].size(); ++j) {
        reqs[i].tokens.push_back(streams[i][pos[i]++]);
      }
      if (!draft.empty()) {
        (*sp)->Verified(reqs[i], static_cast<int>(draft.size()), static_cast<int>(accepted));
      }
      if (pos[i] >= streams[i].size()) {
        --running;
        (*sp)->Release(reqs[i]);
      }
    }
  }
  return total;
}

// A stream that cycles with period `period` after `lead` tokens that do not repeat; tokens
// drawn from `alphabet` symbols by a fixed generator (a small alphabet: n-grams recur with
// other continuations, so drafts are often wrong).
std::vector<int32_t> Stream(int lead, int period, int alphabet, int length, uint32_t seed) {
  std::vector<int32_t> out;
  uint32_t x = seed;
  auto next = [&] {
    x = x * 1664525u + 1013904223u;
    return static_cast<int32_t>((x >> 16) % static_cast<uint32_t>(alphabet));
  };
  std::vector<int32_t> cycle;
  for (int i = 0; i < period; ++i) cycle.push_back(next());
  for (int i = 0; i < length; ++i) {
    out.push_back(i < lead ? next() : cycle[static_cast<size_t>((i - lead) % period)]);
  }
  return out;
}

TEST(SpeculativeTest, ExpensiveRowsNeverLose) {
  // A small model's steps (a 9-row step costs 3.6 one-row steps) and streams whose n-grams
  // recur with other continuations (6 symbols, no cycle): drafts are mostly wrong, and the
  // burst is no slower with speculation than without, alone or beside another sequence, and
  // beside one whose drafts are right (its drafts must not slow the other), but for what
  // finding that out costs: a request's first drafts and its probes, ever rarer (under 2% of
  // the time here, where one lucky token buys a long draft that fails).
  const auto small = [](int64_t rows) { return 0.00203 + 0.00097 * static_cast<double>(rows); };
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    const std::vector<int32_t> noisy = Stream(200, 1, 6, 200, seed);
    const std::vector<int32_t> noisy2 = Stream(200, 1, 6, 200, seed + 100);
    const std::vector<int32_t> cyclic = Stream(20, 9, 1000, 200, seed);
    for (const auto& streams : {std::vector<std::vector<int32_t>>{noisy},
                                std::vector<std::vector<int32_t>>{noisy, noisy2},
                                std::vector<std::vector<int32_t>>{noisy, cyclic}}) {
      const double off = BurstSeconds(streams, small, false);
      const double on = BurstSeconds(streams, small, true);
      EXPECT_LE(on, 1.02 * off) << "seed " << seed << ", " << streams.size() << " sequences";
    }
    // Alone, a cycling sequence gains.
    EXPECT_LT(BurstSeconds({cyclic}, small, true), 0.8 * BurstSeconds({cyclic}, small, false));
  }
}

TEST(SpeculativeTest, UnimplementedMethodIsAnError) {
  FakeModelExecutor exec(64, 16, 4);
  EngineConfig c;
  c.kv.num_blocks = 16;
  c.kv.block_size = 4;
  c.speculative = Spec(3);
  c.speculative.method = spec::SpecMethod::kDraftModel;
  c.speculative.model = "draft.gguf";
  auto e = Engine::Create(c, &exec);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("draft_model"), std::string::npos);
}

}  // namespace
}  // namespace tachyon::engine
