// Speculative method draft_model through the engine over strict fake executors (target and
// draft): drafts come from a second model with its own KV pool, k draft forwards per step for
// every speculating sequence at once; greedy output equals output without speculation; the
// draft's KV stays in sync (its drafts are exactly those of an oracle that knows the draft
// model's function), rejected drafts' KV is rolled back, and neither pool leaks a block;
// sampled drafts go to rejection sampling with their probabilities.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "engine/testing/spec_testing.h"
#include "engine/testing/test_harness.h"
#include "sampling/logits_processors.h"
#include "sampling/sampler.h"

namespace tachyon::engine {
namespace {

using testing::Completion;
using testing::ExpectSame;
using testing::Greedy;
using testing::Harness;
using testing::HarnessOptions;
using testing::LetterDetokenizer;
using testing::MakePrompt;
using testing::MixedGreedy;
using testing::Outputs;
using testing::RunAll;
using testing::StopAndLengthRequests;

// Whether the draft model disagrees with the target after a history of `len` tokens: the row
// at position len - 1 then ranks the target's argmax last.
bool Disagrees(size_t len, int every) {
  return every > 0 && (len - 1) % every == 0;
}

// The draft model: the target's fake (same function of the history it reads back from its own
// KV blocks), except that every `every`-th position's row demotes the argmax. Counts the
// forwards and their batch sizes, and fails the test on any executor error (a draft forward
// reading KV it never computed).
class DraftFake : public ModelExecutor {
 public:
  DraftFake(int32_t n_vocab, int num_blocks, int block_size, int every,
            std::vector<int64_t> group_windows = {})
      : fake_(n_vocab, num_blocks, block_size, std::move(group_windows)), every_(every) {}
  int32_t n_vocab() const override { return fake_.n_vocab(); }
  Status Execute(const model::Batch& batch, std::span<float> logits) override {
    Status st = fake_.Execute(batch, logits);
    EXPECT_TRUE(st.ok()) << st.ToString();
    RETURN_IF_ERROR(st);
    ++num_calls_;
    num_tokens_ += static_cast<int64_t>(batch.tokens.size());
    max_seqs_ = std::max(max_seqs_, batch.seqs.size());
    const size_t n = static_cast<size_t>(n_vocab());
    size_t row = 0;
    for (const model::SequenceSlice& s : batch.seqs) {
      for (int64_t r = 0; r < s.num_logits; ++r, ++row) {
        const int64_t pos = s.pos_start + s.n_tokens - s.num_logits + r;
        if (!Disagrees(static_cast<size_t>(pos) + 1, every_)) continue;
        std::span<float> l = logits.subspan(row * n, n);
        l[sampling::Argmax(l)] = -100.0f;
      }
    }
    return OkStatus();
  }
  int64_t num_calls() const { return num_calls_; }
  int64_t num_tokens() const { return num_tokens_; }  // tokens fed, all forwards
  size_t max_seqs() const { return max_seqs_; }

 private:
  FakeModelExecutor fake_;
  int every_;
  int64_t num_calls_ = 0;
  int64_t num_tokens_ = 0;
  size_t max_seqs_ = 0;
};

// A draft model whose logits cover tokens [0, n) of its inner executor's vocabulary only (a
// draft computing its frequent tokens, draft_vocab_size).
class PrefixDraft : public ModelExecutor {
 public:
  PrefixDraft(ModelExecutor* inner, int32_t n) : inner_(inner), n_(n) {}
  int32_t n_vocab() const override { return n_; }
  Status Execute(const model::Batch& batch, std::span<float> logits) override {
    const size_t full = static_cast<size_t>(inner_->n_vocab()), n = static_cast<size_t>(n_);
    const size_t rows = logits.size() / n;
    full_.resize(rows * full);
    RETURN_IF_ERROR(inner_->Execute(batch, full_));
    for (size_t r = 0; r < rows; ++r) {
      std::copy_n(full_.begin() + static_cast<ptrdiff_t>(r * full), n,
                  logits.begin() + static_cast<ptrdiff_t>(r * n));
    }
    return OkStatus();
  }

 private:
  ModelExecutor* inner_;
  int32_t n_;
  std::vector<float> full_;
};

// The draft model's probability of its argmax in `logits`.
double TopProb(std::span<const float> logits) {
  return std::exp(logits[sampling::Argmax(logits)] - sampling::LogSumExp(logits));
}

// What a correct draft model proposes (greedy): DraftFake's function of the true history,
// stopping before the first draft whose probability is below p_min.
class DraftOracle : public spec::Drafter {
 public:
  DraftOracle(const FakeModelExecutor& exec, int every, double p_min = 0)
      : exec_(exec), every_(every), p_min_(p_min) {}
  void Propose(int64_t, std::span<const int32_t> tokens, int64_t, int max_tokens,
               std::vector<int32_t>* draft) override {
    std::vector<int32_t> t(tokens.begin(), tokens.end());
    std::vector<float> l(exec_.n_vocab());
    for (int j = 0; j < max_tokens; ++j) {
      exec_.LogitsFor(t, l);
      if (Disagrees(t.size(), every_)) l[sampling::Argmax(l)] = -100.0f;
      if (TopProb(l) < p_min_) break;
      t.push_back(sampling::Argmax(l));
      draft->push_back(t.back());
    }
  }

 private:
  const FakeModelExecutor& exec_;
  int every_;
  double p_min_;
};

spec::SpeculativeConfig DraftSpec(int k, double p_min = 0) {
  spec::SpeculativeConfig c;
  c.method = spec::SpecMethod::kDraftModel;
  c.model = "draft";
  c.num_speculative_tokens = k;
  c.draft_p_min = p_min;
  c.disable_by_batch_size = 1 << 20;
  c.min_acceptance_rate = 0;  // never pause: every step drafts
  return c;
}

TEST(DraftModelTest, DraftsAreThoseOfTheDraftModelOverTheTrueHistory) {
  // Budget for every catch-up at once, so the draft model drafts exactly when the oracle does:
  // equal statistics mean each draft forward read exactly the KV of the true history (accepted
  // drafts kept, rejected ones rolled back and recomputed).
  HarnessOptions off;
  off.max_batched_tokens = 512;
  const auto reqs = MixedGreedy(12, 30);
  Harness ref(off);
  const Outputs want = RunAll(&ref, reqs);

  HarnessOptions oracle = off;
  oracle.speculative = DraftSpec(4);
  oracle.speculative.method = spec::SpecMethod::kNgram;  // any method: the drafter replaces it
  oracle.speculative.model.clear();
  oracle.drafter = [](const FakeModelExecutor& e) { return std::make_unique<DraftOracle>(e, 5); };
  Harness o(oracle);
  ExpectSame(want, RunAll(&o, reqs));

  DraftFake draft(off.n_vocab, off.num_blocks, off.block_size, 5);
  HarnessOptions on = off;
  on.speculative = DraftSpec(4);
  on.draft_executor = &draft;
  Harness h(on);
  ExpectSame(want, RunAll(&h, reqs));
  const spec::SpecStats got = h.engine().Metrics().spec, exp = o.engine().Metrics().spec;
  EXPECT_EQ(got.num_drafts, exp.num_drafts);
  EXPECT_EQ(got.num_draft_tokens, exp.num_draft_tokens);
  EXPECT_EQ(got.num_accepted_tokens, exp.num_accepted_tokens);
  EXPECT_EQ(got.accepted_per_position, exp.accepted_per_position);
  EXPECT_GT(got.num_accepted_tokens, 0);
  EXPECT_LT(got.num_accepted_tokens, got.num_draft_tokens);
  // Batched: one draft forward per draft position for all sequences of a step.
  EXPECT_GT(draft.max_seqs(), 1u);
  EXPECT_LE(draft.num_calls(), h.engine().Metrics().num_steps * 4);
}

TEST(DraftModelTest, DraftingStopsBelowPMin) {
  // p_min at the median of the fake's top probabilities: each sequence stops drafting at its
  // first unconfident draft, exactly where an oracle with the same rule stops.
  HarnessOptions off;
  off.max_batched_tokens = 512;
  const auto reqs = MixedGreedy(10, 30);
  Harness ref(off);
  const Outputs want = RunAll(&ref, reqs);
  std::vector<double> tops;
  std::vector<float> l(off.n_vocab);
  for (int i = 0; i < 200; ++i) {
    ref.exec().LogitsFor(MakePrompt(3 + i % 40, i), l);
    tops.push_back(TopProb(l));
  }
  std::nth_element(tops.begin(), tops.begin() + 100, tops.end());
  const double p_min = tops[100];

  HarnessOptions oracle = off;
  oracle.speculative = DraftSpec(6);
  oracle.speculative.method = spec::SpecMethod::kNgram;
  oracle.speculative.model.clear();
  oracle.drafter = [p_min](const FakeModelExecutor& e) {
    return std::make_unique<DraftOracle>(e, 5, p_min);
  };
  Harness o(oracle);
  ExpectSame(want, RunAll(&o, reqs));

  spec::SpecStats all;
  for (double p : {0.0, p_min}) {
    DraftFake draft(off.n_vocab, off.num_blocks, off.block_size, 5);
    HarnessOptions on = off;
    on.speculative = DraftSpec(6, p);
    on.draft_executor = &draft;
    Harness h(on);
    ExpectSame(want, RunAll(&h, reqs));
    const spec::SpecStats got = h.engine().Metrics().spec;
    if (p == 0) {
      all = got;
      continue;
    }
    const spec::SpecStats exp = o.engine().Metrics().spec;
    EXPECT_EQ(got.num_draft_tokens, exp.num_draft_tokens);
    EXPECT_EQ(got.num_accepted_tokens, exp.num_accepted_tokens);
    EXPECT_EQ(got.accepted_per_position, exp.accepted_per_position);
    EXPECT_GT(got.num_draft_tokens, 0);
    EXPECT_LT(got.num_draft_tokens, all.num_draft_tokens);
    EXPECT_GT(got.num_draft_forwards, 0);  // counted (shorter drafts need more steps, so not fewer)
  }
}

TEST(DraftModelTest, AgreeingDraftIsAlwaysAccepted) {
  HarnessOptions on;
  DraftFake draft(on.n_vocab, on.num_blocks, on.block_size, 0);
  on.speculative = DraftSpec(3);
  on.draft_executor = &draft;
  Harness h(on);
  RunAll(&h, MixedGreedy(6, 25));
  const spec::SpecStats s = h.engine().Metrics().spec;
  EXPECT_GT(s.num_draft_tokens, 0);
  EXPECT_EQ(s.num_accepted_tokens, s.num_draft_tokens);
}

TEST(DraftModelTest, PromptEntersTheDraftInTheStepThatComputedIt) {
  // With the cost rule on, the first step after the prompt runs without drafts (what a step of
  // one sequence costs is not known yet); the draft model still takes in the prompt in the
  // prompt's own step, all but the first generated token, so the next step's drafting round
  // only catches up on that token and the one after it.
  const std::vector<int32_t> prompt = MakePrompt(21, 3);
  HarnessOptions off;
  Harness ref(off);
  const Outputs want = RunAll(&ref, {Greedy(prompt, 30)});

  DraftFake draft(off.n_vocab, off.num_blocks, off.block_size, 0);
  HarnessOptions on = off;
  on.speculative = DraftSpec(4);
  on.speculative.min_acceptance_rate = 0.25;  // the cost rule on
  on.draft_executor = &draft;
  Harness h(on);
  ASSERT_TRUE(h.Add(0, Greedy(prompt, 30)).ok());
  h.Step();  // the prompt: 21 tokens in one step (budget 32)
  EXPECT_EQ(draft.num_calls(), 1);
  EXPECT_EQ(draft.num_tokens(), 21);
  EXPECT_EQ(h.result(0).tokens.size(), 1u);
  // One row without drafts (it measures one sequence's cost); then the drafting round for the
  // next step: its first forward catches up on the two generated tokens only.
  h.Step();
  EXPECT_EQ(h.result(0).tokens.size(), 2u);
  EXPECT_GT(draft.num_calls(), 1);
  EXPECT_EQ(draft.num_tokens(), 21 + 2 + (draft.num_calls() - 2));
  h.Step();
  EXPECT_GT(h.engine().Metrics().spec.num_draft_tokens, 0);
  h.RunToCompletion();
  EXPECT_EQ(h.result(0).tokens, want.at(0).at(0).tokens);
}

TEST(DraftModelTest, ChunkedCatchUpPreemptionAndSmallDraftPool) {
  // A small token budget chunks both prefills (and the draft's catch-up); a tight target pool
  // preempts (the draft KV is freed and recomputed); a tight draft pool only costs drafts.
  HarnessOptions off;
  off.max_batched_tokens = 10;
  off.num_blocks = 24;
  Harness ref(off);
  const auto reqs = MixedGreedy(8, 24, 14);
  const Outputs want = RunAll(&ref, reqs);
  ASSERT_GT(ref.engine().Metrics().num_preemptions, 0);
  for (int draft_blocks : {24, 9}) {
    DraftFake draft(off.n_vocab, draft_blocks, off.block_size, 3);
    HarnessOptions on = off;
    on.speculative = DraftSpec(3);
    on.draft_executor = &draft;
    on.draft_num_blocks = draft_blocks;
    Harness h(on);
    ExpectSame(want, RunAll(&h, reqs));
    const EngineMetrics m = h.engine().Metrics();
    EXPECT_GT(m.num_preemptions, 0) << draft_blocks;
    EXPECT_GT(m.spec.num_accepted_tokens, 0) << draft_blocks;
  }
}

TEST(DraftModelTest, EachModelKeepsItsOwnKvLayerGroups) {
  // A target with sliding-window groups beside a plain draft, and the reverse: each pool holds
  // its own model's layout (the strict fakes check every group's window), output unchanged.
  HarnessOptions off;
  off.max_batched_tokens = 24;
  const auto reqs = MixedGreedy(8, 30, 9);
  Harness ref(off);
  const Outputs want = RunAll(&ref, reqs);
  const std::vector<int64_t> kHybrid = {0, 8};
  for (bool target_hybrid : {true, false}) {
    HarnessOptions on = off;
    if (target_hybrid) on.kv_group_windows = kHybrid;
    on.draft_group_windows = target_hybrid ? std::vector<int64_t>{} : kHybrid;
    DraftFake draft(off.n_vocab, off.num_blocks, off.block_size, 4, on.draft_group_windows);
    on.speculative = DraftSpec(3);
    on.draft_executor = &draft;
    Harness h(on);
    ExpectSame(want, RunAll(&h, reqs));
    EXPECT_GT(h.engine().Metrics().spec.num_accepted_tokens, 0) << target_hybrid;
  }
}

TEST(DraftModelTest, StopStringsEosMaxTokensAndAbort) {
  HarnessOptions off;
  off.detokenizer = LetterDetokenizer(off.n_vocab);
  Harness probe(off);
  const Outputs plain = RunAll(&probe, {Greedy(MakePrompt(9, 1), 20)});
  const std::string text = plain[0].at(0).text;
  ASSERT_EQ(text.size(), 20u);
  std::vector<EngineRequest> reqs = StopAndLengthRequests(text);
  off.eos = {plain[0].at(0).tokens[15]};
  Harness ref(off);
  const Outputs want = RunAll(&ref, reqs);

  DraftFake draft(off.n_vocab, off.num_blocks, off.block_size, 4);
  HarnessOptions on = off;
  on.speculative = DraftSpec(5);
  on.draft_executor = &draft;
  Harness h(on);
  ExpectSame(want, RunAll(&h, reqs));

  // An abort while drafting frees both pools' blocks.
  Harness a(on);
  ASSERT_TRUE(a.Add(0, Greedy(MakePrompt(12, 2), 200)).ok());
  for (int i = 0; i < 6; ++i) a.Step();
  a.engine().Abort(0);
  a.RunToCompletion();
  EXPECT_EQ(a.engine().Metrics().kv.used_blocks, 0);
  EXPECT_EQ(a.engine().speculator()->draft_model()->kv().Stats().used_blocks, 0);
}

// Each emitted token's logprob is the target's after the prompt and the tokens before it.
void ExpectTargetLogprobs(const FakeModelExecutor& target, std::vector<int32_t> hist,
                          const Completion& out) {
  ASSERT_EQ(out.logprobs.size(), out.tokens.size());
  std::vector<float> l(target.n_vocab());
  for (size_t t = 0; t < out.tokens.size(); ++t) {
    target.LogitsFor(hist, l);
    EXPECT_FLOAT_EQ(out.logprobs[t].logprob,
                    sampling::LogProb(l, out.tokens[t], sampling::LogSumExp(l)));
    hist.push_back(out.tokens[t]);
  }
}

// Sampled requests: drafts are drawn from the draft's distribution and verified with it. A
// draft model equal to the target is then always accepted (p = q), which a one-hot
// verification would not do; outputs are reproducible, logprobs are the target's.
TEST(DraftModelTest, SampledDraftsGoToRejectionSampling) {
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 4; ++i) {
    EngineRequest r = Greedy(MakePrompt(6 + i, i), 30);
    r.params.temperature = 0.9f;
    r.params.top_k = 20;
    r.params.presence_penalty = 0.5f;
    r.params.seed = 100 + i;
    r.params.n = 2;
    r.params.logprobs = 2;
    reqs.push_back(r);
  }
  for (int every : {0, 3}) {
    Outputs first;
    for (int rep = 0; rep < 2; ++rep) {
      HarnessOptions on;
      DraftFake draft(on.n_vocab, on.num_blocks, on.block_size, every);
      on.speculative = DraftSpec(4);
      on.draft_executor = &draft;
      Harness h(on);
      const Outputs got = RunAll(&h, reqs);
      const spec::SpecStats s = h.engine().Metrics().spec;
      EXPECT_GT(s.num_draft_tokens, 0);
      if (every == 0) {
        EXPECT_EQ(s.num_accepted_tokens, s.num_draft_tokens);
      } else {
        EXPECT_LT(s.num_accepted_tokens, s.num_draft_tokens);
      }
      if (rep == 0) first = got;
      if (rep == 1) ExpectSame(first, got);  // seeded: reproducible
      for (size_t i = 0; i < reqs.size(); ++i) {
        for (int c = 0; c < 2; ++c) {
          const Completion& out = got[i].at(c);
          ASSERT_EQ(out.tokens.size(), 30u);
          ASSERT_EQ(out.logprobs.size(), out.tokens.size());
          ExpectTargetLogprobs(h.exec(), reqs[i].prompt_tokens, out);
        }
      }
    }
  }
}

// A draft over a prefix of the vocabulary (draft_vocab_size): greedy output is unchanged, the
// target's tokens past the prefix are never drafted (the draft equal to the target otherwise,
// so every rejection is one of those); sampled drafts carry q over the whole vocabulary, zero
// past the prefix, and stay reproducible with the target's logprobs.
TEST(DraftModelTest, DraftVocabularyPrefix) {
  HarnessOptions off;
  off.max_batched_tokens = 512;
  const auto reqs = MixedGreedy(12, 30);
  Harness ref(off);
  const Outputs want = RunAll(&ref, reqs);
  DraftFake same(off.n_vocab, off.num_blocks, off.block_size, 0);
  PrefixDraft draft(&same, off.n_vocab / 2);
  HarnessOptions on = off;
  on.speculative = DraftSpec(4);
  on.draft_executor = &draft;
  Harness h(on);
  ExpectSame(want, RunAll(&h, reqs));
  const spec::SpecStats s = h.engine().Metrics().spec;
  EXPECT_GT(s.num_accepted_tokens, 0);
  EXPECT_LT(s.num_accepted_tokens, s.num_draft_tokens);
  int64_t past = 0;  // emitted tokens past the prefix: each one rejected a draft
  for (const auto& r : want) {
    for (const auto& [c, out] : r) {
      for (int32_t t : out.tokens) past += t >= off.n_vocab / 2;
    }
  }
  EXPECT_GT(past, 0);

  std::vector<EngineRequest> sampled;
  for (int i = 0; i < 4; ++i) {
    EngineRequest r = Greedy(MakePrompt(6 + i, i), 30);
    r.params.temperature = 0.9f;
    r.params.seed = 200 + i;
    r.params.logprobs = 1;
    sampled.push_back(r);
  }
  Outputs first;
  for (int rep = 0; rep < 2; ++rep) {
    HarnessOptions son;
    DraftFake inner(son.n_vocab, son.num_blocks, son.block_size, 0);
    PrefixDraft prefix(&inner, son.n_vocab / 2);
    son.speculative = DraftSpec(4);
    son.draft_executor = &prefix;
    Harness sh(son);
    const Outputs got = RunAll(&sh, sampled);
    EXPECT_GT(sh.engine().Metrics().spec.num_accepted_tokens, 0);
    if (rep == 0) first = got;
    if (rep == 1) ExpectSame(first, got);
    for (size_t i = 0; i < sampled.size(); ++i) {
      const Completion& out = got[i].at(0);
      ASSERT_EQ(out.tokens.size(), 30u);
      ExpectTargetLogprobs(sh.exec(), sampled[i].prompt_tokens, out);
    }
  }
}

TEST(DraftModelTest, ConfigErrors) {
  FakeModelExecutor exec(64, 16, 4);
  EngineConfig c;
  c.kv.num_blocks = 16;
  c.kv.block_size = 4;
  c.speculative = DraftSpec(3);
  auto none = Engine::Create(c, &exec);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no draft model"), std::string::npos);
  FakeModelExecutor other_vocab(128, 16, 4);  // a prefix of the target's would do
  auto mismatch = Engine::Create(c, &exec, nullptr, &other_vocab);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("vocabulary"), std::string::npos);
}

}  // namespace
}  // namespace tachyon::engine
