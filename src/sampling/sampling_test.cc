#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "sampling/logits_processors.h"
#include "sampling/sampler.h"
#include "sampling/sampling_params.h"

namespace tachyon::sampling {
namespace {

SamplingInput In(std::span<const int32_t> output = {}, uint64_t seed = 0,
                 std::span<const int32_t> eos = {}) {
  SamplingInput in;
  in.output = output;
  in.seed = seed;
  in.eos_ids = eos;
  return in;
}

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<Candidate> Probs(std::vector<float> p) {
  std::vector<Candidate> c;
  for (size_t i = 0; i < p.size(); ++i) c.push_back({static_cast<int32_t>(i), p[i]});
  return c;
}
std::vector<int32_t> Tokens(const std::vector<Candidate>& c) {
  std::vector<int32_t> t;
  for (const auto& x : c) t.push_back(x.token);
  return t;
}

TEST(LogitsProcessorsTest, RepetitionPenaltyDividesPositiveMultipliesNegative) {
  std::vector<float> l = {2.0f, -2.0f, 1.0f, 4.0f};
  std::vector<int32_t> prompt = {0, 0};
  std::vector<int32_t> output = {1, 99};  // 99 out of range: ignored
  ApplyPenalties(l, prompt, output, 2.0f, 0, 0);
  EXPECT_FLOAT_EQ(l[0], 1.0f);  // once, although it appears twice
  EXPECT_FLOAT_EQ(l[1], -4.0f);
  EXPECT_FLOAT_EQ(l[2], 1.0f);
  EXPECT_FLOAT_EQ(l[3], 4.0f);
}

TEST(LogitsProcessorsTest, PresenceAndFrequencyUseOutputCountsOnly) {
  std::vector<float> l = {0, 0, 0};
  std::vector<int32_t> prompt = {2, 2};
  std::vector<int32_t> output = {0, 1, 1, 1};
  ApplyPenalties(l, prompt, output, 1.0f, 0.5f, 0.25f);
  EXPECT_FLOAT_EQ(l[0], -0.75f);
  EXPECT_FLOAT_EQ(l[1], -1.25f);
  EXPECT_FLOAT_EQ(l[2], 0.0f);
}

TEST(LogitsProcessorsTest, BiasAndBan) {
  std::vector<float> l = {1, 2, 3};
  std::vector<std::pair<int32_t, float>> bias = {{0, 5.0f}, {2, -1.0f}, {7, 1.0f}};
  ApplyLogitBias(l, bias);
  EXPECT_EQ(l, (std::vector<float>{6, 2, 2}));
  std::vector<int32_t> ban = {0};
  BanTokens(l, ban);
  EXPECT_EQ(l[0], -kInf);
  EXPECT_EQ(Argmax(l), 1);  // tie between 1 and 2: lowest id
}

// The lane-parallel Argmax against a plain scan, over sizes around its 8-wide lanes, with the
// maximum anywhere (tail included), ties (lowest id wins), -inf and NaN entries.
TEST(LogitsProcessorsTest, ArgmaxMatchesAPlainScan) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-3, 3);  // few distinct values: many ties
  for (size_t n : {1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 1000, 1003}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> l(n);
      for (float& x : l) x = static_cast<float>(small(rng));
      if (trial % 3 == 1) l[rng() % n] = -kInf;
      if (trial % 3 == 2) l[rng() % n] = std::numeric_limits<float>::quiet_NaN();
      if (trial % 4 == 3) l[n - 1] = 9;  // the maximum in the tail
      int32_t want = -1;
      for (size_t i = 0; i < n; ++i) {
        if (!std::isnan(l[i]) && (want < 0 || l[i] > l[want])) want = static_cast<int32_t>(i);
      }
      EXPECT_EQ(Argmax(l), std::max(want, 0)) << "n=" << n << " trial " << trial;
    }
  }
  std::vector<float> all_nan(5, std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(Argmax(all_nan), 0);
  std::vector<float> all_ninf(9, -kInf);
  EXPECT_EQ(Argmax(all_ninf), 0);
}

TEST(LogitsProcessorsTest, TopKKeepsHighestSorted) {
  std::vector<float> l = {0.1f, 3.0f, 2.0f, 3.0f, -1.0f};
  EXPECT_EQ(Tokens(TopKCandidates(l, 2)), (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(Tokens(TopKCandidates(l, 0)), (std::vector<int32_t>{1, 3, 2, 0, 4}));
  EXPECT_EQ(TopKCandidates(l, 99).size(), 5u);
}

TEST(LogitsProcessorsTest, SoftmaxMatchesHandComputed) {
  std::vector<Candidate> c = Probs({std::log(1.0f), std::log(3.0f), -kInf});
  Softmax(&c);
  EXPECT_NEAR(c[0].p, 0.25, 1e-6);
  EXPECT_NEAR(c[1].p, 0.75, 1e-6);
  EXPECT_EQ(c[2].p, 0.0f);
}

TEST(LogitsProcessorsTest, TopPKeepsSmallestPrefixReachingMass) {
  std::vector<Candidate> c = Probs({0.5f, 0.3f, 0.15f, 0.05f});
  TopP(&c, 0.8f);
  EXPECT_EQ(Tokens(c), (std::vector<int32_t>{0, 1}));
  c = Probs({0.5f, 0.3f, 0.15f, 0.05f});
  TopP(&c, 0.81f);
  EXPECT_EQ(c.size(), 3u);
  c = Probs({0.5f, 0.3f, 0.2f});
  TopP(&c, 0.01f);
  EXPECT_EQ(Tokens(c), (std::vector<int32_t>{0}));
}

TEST(LogitsProcessorsTest, TopPCandidatesMatchesFullSort) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> l(5000);
    for (float& x : l) x = normal(rng);
    for (float top_p : {0.1f, 0.5f, 0.9f, 0.99f, 0.9999f}) {
      std::vector<Candidate> ref = TopKCandidates(l, 0);
      Softmax(&ref);
      TopP(&ref, top_p);
      std::vector<Candidate> fast = TopPCandidates(l, top_p);
      ASSERT_EQ(Tokens(fast), Tokens(ref)) << "top_p " << top_p;
      for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(fast[i].p, ref[i].p, 1e-6);
    }
  }
}

TEST(LogitsProcessorsTest, MinPDropsBelowFractionOfMax) {
  std::vector<Candidate> c = Probs({0.5f, 0.3f, 0.15f, 0.05f});
  MinP(&c, 0.3f);  // threshold 0.15
  EXPECT_EQ(Tokens(c), (std::vector<int32_t>{0, 1, 2}));
}

TEST(LogitsProcessorsTest, DrawFollowsCumulativeMass) {
  std::vector<Candidate> c = Probs({0.2f, 0.0f, 0.8f});
  EXPECT_EQ(Draw(c, 0.0), 0);
  EXPECT_EQ(Draw(c, 0.19), 0);
  EXPECT_EQ(Draw(c, 0.21), 2);
  EXPECT_EQ(Draw(c, 0.999999), 2);
  // Unnormalized masses (after truncation) are renormalized.
  std::vector<Candidate> d = Probs({0.1f, 0.1f});
  EXPECT_EQ(Draw(d, 0.49), 0);
  EXPECT_EQ(Draw(d, 0.51), 1);
}

TEST(LogitsProcessorsTest, DrawFromAllPicksWhatTheCandidateListPicks) {
  // Every logit a candidate in id order, Softmax, MinP, Draw: the same token in place, for
  // uniforms at random and on every boundary of the cumulative mass (where a different sum
  // order or rounding would pick a neighbour).
  std::mt19937 rng(7);
  std::normal_distribution<float> logit(0.0f, 4.0f);
  for (int round = 0; round < 40; ++round) {
    std::vector<float> logits(round % 2 ? 50 : 3000);
    for (float& l : logits) l = logit(rng);
    if (round % 3 == 0) logits[round % logits.size()] = -std::numeric_limits<float>::infinity();
    for (float min_p : {0.0f, 0.05f, 0.4f}) {
      std::vector<Candidate> c;
      for (size_t i = 0; i < logits.size(); ++i) c.push_back({static_cast<int32_t>(i), logits[i]});
      Softmax(&c);
      MinP(&c, min_p);
      double total = 0;
      for (const Candidate& x : c) total += x.p;
      std::vector<double> us = {0.0, 0.999999};
      for (int k = 0; k < 200; ++k) us.push_back(std::uniform_real_distribution<double>(0, 1)(rng));
      double cum = 0;
      for (size_t k = 0; k < c.size() && k < 200; ++k) {
        cum += c[k].p;
        us.push_back(cum / total);
        us.push_back(std::nextafter(cum / total, 0.0));
      }
      for (double u : us) {
        if (u >= 1.0) continue;
        std::vector<float> in_place = logits;
        ASSERT_EQ(DrawFromAll(in_place, min_p, u), Draw(c, u))
            << "round " << round << " min_p " << min_p << " u " << u;
      }
    }
  }
}

TEST(LogitsProcessorsTest, LogProb) {
  std::vector<float> l = {std::log(1.0f), std::log(3.0f)};
  float lse = LogSumExp(l);
  EXPECT_NEAR(LogProb(l, 1, lse), std::log(0.75f), 1e-6);
}

TEST(SamplerTest, GreedyIsArgmaxAfterPenaltiesAndBias) {
  SamplingParams p;
  p.temperature = 0;
  std::vector<float> l = {1, 5, 3};
  EXPECT_EQ(Sample(l, p, {}).token, 1);
  p.logit_bias = {{2, 10.0f}};
  l = {1, 5, 3};
  EXPECT_EQ(Sample(l, p, {}).token, 2);
  p.logit_bias.clear();
  p.repetition_penalty = 10.0f;
  l = {1, 5, 3};
  std::vector<int32_t> out = {1};
  EXPECT_EQ(Sample(l, p, In(out)).token, 2);
}

// The API takes any repetition_penalty > 0: a tiny one pushes the seen tokens' logits to the
// float maximum, never to +inf (whose softmax would be NaN and draw nothing sensible).
TEST(SamplerTest, TinyRepetitionPenaltyStaysFinite) {
  SamplingParams p;
  p.repetition_penalty = 1.2e-38f;
  p.logprobs = 1;
  std::vector<int32_t> out = {2};
  for (float t : {1.0f, 0.5f, 0.0f}) {
    p.temperature = t;
    std::vector<float> l = {1, 0.5f, 5, -2};  // 5 / 1.2e-38 is past the float maximum
    SampleResult r = Sample(l, p, In(out));
    EXPECT_EQ(r.token, 2) << "temperature " << t;  // the only seen token, now at the maximum
    EXPECT_TRUE(std::isfinite(r.logprob));
    for (float x : l) EXPECT_TRUE(std::isfinite(x)) << x;
  }
}

TEST(SamplerTest, MinTokensBansEosAndStopIds) {
  SamplingParams p;
  p.temperature = 0;
  p.min_tokens = 2;
  p.stop_token_ids = {1};
  std::vector<int32_t> eos = {0};
  std::vector<int32_t> one = {2};
  std::vector<float> l = {9, 8, 1};
  EXPECT_EQ(Sample(l, p, In(one, 0, eos)).token, 2);
  std::vector<int32_t> two = {2, 2};
  l = {9, 8, 1};
  EXPECT_EQ(Sample(l, p, In(two, 0, eos)).token, 0);
}

TEST(SamplerTest, SeededSamplingIsReproducibleAndMatchesDistribution) {
  SamplingParams p;
  p.temperature = 1.0f;
  const std::vector<float> base = {std::log(0.1f), std::log(0.6f), std::log(0.3f)};
  std::map<int32_t, int> counts;
  std::vector<int32_t> out;
  const int kDraws = 3000;
  for (int i = 0; i < kDraws; ++i) {
    std::vector<float> l = base;
    std::vector<float> l2 = base;
    SampleResult a = Sample(l, p, In(out, 42));
    SampleResult b = Sample(l2, p, In(out, 42));
    ASSERT_EQ(a.token, b.token);
    ++counts[a.token];
    out.push_back(0);  // advances the draw index
  }
  // 3000 draws: generous 5-sigma bounds around the true probabilities.
  EXPECT_NEAR(counts[0] / double(kDraws), 0.1, 0.03);
  EXPECT_NEAR(counts[1] / double(kDraws), 0.6, 0.05);
  EXPECT_NEAR(counts[2] / double(kDraws), 0.3, 0.05);
}

TEST(SamplerTest, OutputOffsetContinuesTheDrawSequence) {
  // A continuation with output_offset k and no output yet draws as the original did after k
  // output tokens.
  std::vector<float> base(64, 0.0f);
  SamplingParams original;
  std::vector<int32_t> out;
  std::vector<int32_t> want;
  for (int i = 0; i < 40; ++i) {
    std::vector<float> l = base;
    want.push_back(Sample(l, original, In(out, 9)).token);
    out.push_back(want.back());
  }
  SamplingParams resumed;
  resumed.output_offset = 25;
  std::vector<int32_t> cont;
  for (int i = 25; i < 40; ++i) {
    std::vector<float> l = base;
    EXPECT_EQ(Sample(l, resumed, In(cont, 9)).token, want[i]) << i;
    cont.push_back(want[i]);
  }
}

// With presence / frequency penalties, a continuation (its prompt ends with the output_offset
// output tokens already delivered) draws from the distribution the original drew from: the
// penalties count the resumed tokens as output, not as prompt.
TEST(SamplerTest, ContinuationPenalisesResumedTokensAsOutput) {
  SamplingParams original;
  original.presence_penalty = 0.7f;
  original.frequency_penalty = 0.3f;
  original.repetition_penalty = 1.2f;
  const std::vector<float> logits = {0.5f, 0.1f, 1.0f, 0.8f, -0.2f};
  const std::vector<int32_t> prompt = {0, 1}, output = {2, 2, 3, 3};
  SamplingInput in;
  in.prompt = prompt;
  in.output = output;
  std::vector<float> want, l = logits;
  SamplingDistribution(l, original, in, &want);

  SamplingParams resumed = original;
  resumed.output_offset = 3;
  const std::vector<int32_t> cont_prompt = {0, 1, 2, 2, 3}, cont_output = {3};
  SamplingInput cin;
  cin.prompt = cont_prompt;
  cin.output = cont_output;
  std::vector<float> got;
  l = logits;
  SamplingDistribution(l, resumed, cin, &got);
  EXPECT_EQ(got, want);
  std::vector<float> as_prompt;  // the resumed tokens counted as prompt: another distribution
  l = logits;
  SamplingDistribution(l, original, cin, &as_prompt);
  EXPECT_NE(as_prompt, want);
}

TEST(SamplerTest, DifferentSeedsDiffer) {
  SamplingParams p;
  std::vector<float> base(64, 0.0f);
  int same = 0;
  std::vector<int32_t> out;
  for (int i = 0; i < 50; ++i) {
    std::vector<float> a = base, b = base;
    same += Sample(a, p, In(out, 1)).token == Sample(b, p, In(out, 2)).token;
    out.push_back(0);
  }
  EXPECT_LT(same, 10);
}

TEST(SamplerTest, TopKOneAndLowTopPAreGreedy) {
  SamplingParams p;
  p.top_k = 1;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    std::vector<float> l = {0.0f, 0.1f, 0.05f};
    EXPECT_EQ(Sample(l, p, In({}, seed)).token, 1);
  }
  p.top_k = 0;
  p.top_p = 0.01f;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    std::vector<float> l = {0.0f, 0.1f, 0.05f};
    EXPECT_EQ(Sample(l, p, In({}, seed)).token, 1);
  }
}

TEST(SamplerTest, MinPExcludesUnlikelyTokens) {
  SamplingParams p;
  p.min_p = 0.5f;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    // p = 0.45, 0.45, 0.1: token 2 is below 0.5 * 0.45.
    std::vector<float> l = {std::log(0.45f), std::log(0.45f), std::log(0.1f)};
    EXPECT_NE(Sample(l, p, In({}, seed)).token, 2);
  }
}

TEST(SamplerTest, LowTemperatureSharpens) {
  SamplingParams p;
  p.temperature = 0.05f;
  int hits = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    std::vector<float> l = {0.0f, 0.5f};
    hits += Sample(l, p, In({}, seed)).token == 1;
  }
  EXPECT_GE(hits, 199);  // p(token 0) = e^-10
}

TEST(SamplerTest, LogprobsAreOfRawDistribution) {
  SamplingParams p;
  p.temperature = 0;
  p.logprobs = 2;
  p.logit_bias = {{0, 100.0f}};
  std::vector<float> l = {std::log(0.2f), std::log(0.5f), std::log(0.3f)};
  SampleResult r = Sample(l, p, {});
  EXPECT_EQ(r.token, 0);
  EXPECT_NEAR(r.logprob, std::log(0.2f), 1e-5);
  ASSERT_EQ(r.top_logprobs.size(), 2u);
  EXPECT_EQ(r.top_logprobs[0].token, 1);
  EXPECT_NEAR(r.top_logprobs[0].logprob, std::log(0.5f), 1e-5);
  EXPECT_EQ(r.top_logprobs[1].token, 2);
}

TEST(SamplingParamsTest, Validate) {
  SamplingParams p;
  EXPECT_TRUE(p.Validate(10).ok());
  p.temperature = -1;
  EXPECT_EQ(p.Validate(10).code(), StatusCode::kInvalidArgument);
  p = {};
  p.top_p = 0;
  EXPECT_FALSE(p.Validate(10).ok());
  p = {};
  p.logit_bias = {{10, 1.0f}};
  EXPECT_FALSE(p.Validate(10).ok());
  p = {};
  p.n = 0;
  EXPECT_FALSE(p.Validate(10).ok());
  p = {};
  p.stop = {""};
  EXPECT_FALSE(p.Validate(10).ok());
  p = {};
  p.logprobs = kMaxLogprobs + 1;
  EXPECT_FALSE(p.Validate(10).ok());
}

}  // namespace
}  // namespace tachyon::sampling

namespace tachyon::sampling {
namespace {

std::vector<uint32_t> MaskOf(size_t n_vocab, std::vector<int32_t> allowed) {
  std::vector<uint32_t> m((n_vocab + 31) / 32, 0u);
  for (int32_t t : allowed) m[t / 32] |= 1u << (t % 32);
  return m;
}

TEST(GrammarMaskTest, DisallowedTokensBecomeMinusInfinity) {
  std::vector<float> logits(70);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i);
  const std::vector<uint32_t> mask = MaskOf(70, {0, 31, 32, 69});
  ApplyAllowedMask(logits, mask);
  for (size_t i = 0; i < logits.size(); ++i) {
    const bool allowed = i == 0 || i == 31 || i == 32 || i == 69;
    if (allowed) {
      EXPECT_EQ(logits[i], static_cast<float>(i)) << i;
    } else {
      EXPECT_TRUE(std::isinf(logits[i]) && logits[i] < 0) << i;
    }
  }
  // Tokens past a short mask are disallowed.
  std::vector<float> more(40, 1.0f);
  ApplyAllowedMask(more, MaskOf(32, {1}));
  EXPECT_EQ(more[1], 1.0f);
  EXPECT_TRUE(std::isinf(more[35]));
  EXPECT_TRUE(AllowsOtherThan(MaskOf(70, {5, 40}), std::vector<int32_t>{40}));
  EXPECT_FALSE(AllowsOtherThan(MaskOf(70, {40, 66}), std::vector<int32_t>{40, 66}));
  EXPECT_FALSE(AllowsOtherThan(MaskOf(70, {}), std::vector<int32_t>{}));
}

// The sampler picks only allowed tokens, keeps the raw logprobs, and lets the grammar end the
// output under min_tokens when it allows nothing but EOS.
TEST(GrammarMaskTest, SampleHonoursTheMask) {
  std::vector<float> raw(64);
  for (size_t i = 0; i < raw.size(); ++i) raw[i] = std::sin(static_cast<float>(i) * 1.7f) * 3;
  SamplingParams p;
  p.temperature = 0;
  p.logprobs = 1;
  p.min_tokens = 4;
  const std::vector<int32_t> eos = {60};
  const std::vector<uint32_t> mask = MaskOf(64, {7, 60});
  std::vector<float> l = raw;
  SamplingInput in;
  in.eos_ids = eos;
  in.allowed = mask;
  SampleResult r = Sample(l, p, in);
  EXPECT_EQ(r.token, 7);  // EOS banned by min_tokens, 7 is the only other allowed token
  float mx = raw[0];
  for (float v : raw) mx = std::max(mx, v);
  double sum = 0;
  for (float v : raw) sum += std::exp(v - mx);
  EXPECT_NEAR(r.logprob, raw[7] - mx - std::log(sum), 1e-4);

  const std::vector<uint32_t> only_eos = MaskOf(64, {60});
  l = raw;
  in.allowed = only_eos;
  EXPECT_EQ(Sample(l, p, in).token, 60);

  p.temperature = 1.0f;
  p.seed = 3;
  for (uint64_t step = 0; step < 20; ++step) {
    l = raw;
    in.allowed = mask;
    std::vector<int32_t> out(step, 1);
    in.output = out;
    const int32_t t = Sample(l, p, in).token;
    EXPECT_TRUE(t == 7 || (t == 60 && step >= 4)) << t << " at " << step;
  }
}

}  // namespace
}  // namespace tachyon::sampling
