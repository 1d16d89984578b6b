// Stochastic drafts end to end: a draft token drawn from the draft's distribution q
// (DraftDistribution, over the whole vocabulary or a prefix, + DrawFrom with DraftUniform) and verified by VerifyStochasticDraft
// emits tokens distributed exactly as the target's sampler would (chi-square and total
// variation over 2 x 10^5 seeds), and accepts at rate 1 - TV(p, q).
#include "spec/draft_sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace tachyon::spec {
namespace {

constexpr int kVocab = 48;

std::vector<float> Logits(uint64_t salt, float scale) {
  std::vector<float> l(kVocab);
  for (int i = 0; i < kVocab; ++i) {
    l[i] = scale * static_cast<float>(sampling::UniformForStep(salt, static_cast<uint64_t>(i)));
  }
  return l;
}

std::vector<float> Distribution(std::vector<float> logits, const sampling::SamplingParams& p) {
  std::vector<float> out;
  sampling::SamplingDistribution(logits, p, sampling::SamplingInput{}, &out);
  return out;
}

// draft_vocab < kVocab: the draft's logits cover tokens [0, draft_vocab) only, and q is
// DraftDistribution's (renormalised over them, zero past them).
void ExpectExact(const std::vector<float>& target_logits, const std::vector<float>& draft_logits,
                 const sampling::SamplingParams& params, size_t draft_vocab = kVocab) {
  const std::vector<float> p = Distribution(target_logits, params);
  std::vector<float> row(draft_logits.begin(), draft_logits.begin() + draft_vocab), q;
  DraftDistribution(row, params, sampling::SamplingInput{}, kVocab, &q);
  ASSERT_EQ(q.size(), static_cast<size_t>(kVocab));
  for (size_t i = draft_vocab; i < q.size(); ++i) ASSERT_EQ(q[i], 0.0f);
  double tv_pq = 0;
  for (int i = 0; i < kVocab; ++i) tv_pq += 0.5 * std::abs(double(p[i]) - q[i]);
  constexpr int kDraws = 200000;
  std::vector<int64_t> counts(kVocab, 0);
  int64_t accepted = 0;
  for (uint64_t seed = 0; seed < kDraws; ++seed) {
    const int32_t d = DrawFrom(q, DraftUniform(seed, 0));
    ASSERT_GT(q[d], 0.0f);
    sampling::SamplingInput in;
    in.seed = seed;
    std::vector<float> l = target_logits;
    const DeterministicVerdict v = VerifyStochasticDraft(l, params, in, d, q);
    ASSERT_GE(v.sample.token, 0);
    ++counts[v.sample.token];
    accepted += v.accepted;
    if (v.accepted) ASSERT_EQ(v.sample.token, d);
  }
  double chi2 = 0, tv = 0;
  int df = -1;
  for (int i = 0; i < kVocab; ++i) {
    const double e = p[i] * kDraws;
    tv += 0.5 * std::abs(counts[i] / double(kDraws) - p[i]);
    if (p[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " is outside the target's support";
      continue;
    }
    if (e < 5) continue;
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
    ++df;
  }
  EXPECT_LT(chi2, df + 6 * std::sqrt(2.0 * df)) << "df " << df;
  EXPECT_LT(tv, 0.012);
  EXPECT_NEAR(accepted / double(kDraws), 1 - tv_pq, 0.006);
}

TEST(DraftSamplingTest, AnotherModelsDraftsKeepTheTargetDistribution) {
  sampling::SamplingParams params;
  params.temperature = 0.7f;
  ExpectExact(Logits(1, 6), Logits(2, 6), params);
}

TEST(DraftSamplingTest, DisjointTopKSupportsAtHighTemperature) {
  sampling::SamplingParams params;
  params.temperature = 1.6f;
  params.top_k = 8;
  std::vector<float> target = Logits(3, 4), draft = target;
  for (float& x : draft) x = -x;  // the draft's top 8 are the target's bottom 8
  ExpectExact(target, draft, params);
}

// A draft computing only the first tokens of the vocabulary (draft_vocab_size): q is zero on
// the rest, where the target may put most of its mass; still exact at two temperatures.
TEST(DraftSamplingTest, DraftOverAVocabularyPrefixKeepsTheTargetDistribution) {
  sampling::SamplingParams params;
  for (float temperature : {0.7f, 1.6f}) {
    params.temperature = temperature;
    ExpectExact(Logits(5, 6), Logits(6, 6), params, kVocab / 3);
    std::vector<float> target = Logits(7, 4);  // the target's mass mostly past the prefix
    for (int i = kVocab / 4; i < kVocab; ++i) target[i] += 3.0f;
    ExpectExact(target, Logits(8, 4), params, kVocab / 4);
  }
  params.top_k = 5;  // top-k within the prefix for q, over the whole vocabulary for p
  ExpectExact(Logits(9, 4), Logits(10, 4), params, kVocab / 2);
}

TEST(DraftSamplingTest, DrawFromFollowsTheCumulativeDistribution) {
  const std::vector<float> q = {0, 0.25f, 0, 0.5f, 0.25f, 0};
  EXPECT_EQ(DrawFrom(q, 0.0), 1);
  EXPECT_EQ(DrawFrom(q, 0.2499), 1);
  EXPECT_EQ(DrawFrom(q, 0.25), 3);
  EXPECT_EQ(DrawFrom(q, 0.7499), 3);
  EXPECT_EQ(DrawFrom(q, 0.75), 4);
  EXPECT_EQ(DrawFrom(q, 0.9999999), 4);
}

TEST(DraftSamplingTest, GreedyDistributionIsOneHot) {
  sampling::SamplingParams params;
  params.temperature = 0;
  const std::vector<float> p = Distribution({0.1f, 2.0f, -1.0f, 1.9f}, params);
  EXPECT_EQ(p, (std::vector<float>{0, 1, 0, 0}));
}

}  // namespace
}  // namespace tachyon::spec
