// Exactness of verification: the emitted token must follow the target distribution p for any
// draft distribution q (adversarial ones included), at two temperatures, over 10^6 draws per
// case, judged by chi-square and total variation.
#include "spec/rejection_sampler.h"

#include "sampling/logits_processors.h"
#include "spec/testing/distribution_fit.h"
#include "util/sanitizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace tachyon::spec {
namespace {

constexpr int kSamplerVocab = 48;
// 10^6 draws per case in the release build (the statistical test); the sanitizer build runs
// the same code for memory errors on fewer draws, with the bounds scaled to them.
constexpr int kDraws = kAddressSanitizer ? 100000 : 1000000;
// Sampling noise of the total variation over 48 tokens is ~3 / sqrt(draws).
const double kSamplerTvBound = 5.0 / std::sqrt(double(kDraws));
const double kRateBound = 3.0 / std::sqrt(double(kDraws));

std::vector<float> Logits(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.0f, 2.0f);
  std::vector<float> l(kSamplerVocab);
  for (float& x : l) x = n(rng);
  return l;
}

using testing::DrawFrom;
using testing::Fit;

std::vector<float> Probs(const std::vector<float>& logits, double t, int top_k = 0) {
  return testing::SoftmaxTopK(logits, t, top_k);
}

std::vector<float> OneHot(int i) {
  std::vector<float> q(kSamplerVocab, 0.0f);
  q[i] = 1.0f;
  return q;
}

Fit Compare(const std::vector<int64_t>& counts, const std::vector<float>& p, int64_t n) {
  return testing::CompareCounts(counts, std::vector<double>(p.begin(), p.end()), n);
}

void ExpectFits(const Fit& f, const std::string& what) {
  // df + 6 sd of the chi-square distribution: a false failure is far less likely than 1e-6;
  // the total variation bound is ~1.7x its sampling noise.
  EXPECT_LT(f.chi2, f.Chi2Bound()) << what << " (df " << f.df << ")";
  EXPECT_LT(f.tv, kSamplerTvBound) << what;
  EXPECT_FALSE(f.impossible) << what;
}

struct Case {
  const char* name;
  std::vector<float> q;
};

TEST(RejectionSampleTest, PreservesTheTargetForAnyDraft) {
  const std::vector<float> target = Logits(1), other = Logits(2);
  for (double t : {0.7, 1.6}) {
    const std::vector<float> p = Probs(target, t, /*top_k=*/12);  // zero outside the top 12
    int argmin_in = 0, argmax = 0, outside = -1;
    for (int i = 0; i < kSamplerVocab; ++i) {
      if (p[i] > p[argmax]) argmax = i;
      if (p[i] > 0 && (p[argmin_in] <= 0 || p[i] < p[argmin_in])) argmin_in = i;
      if (p[i] <= 0 && outside < 0) outside = i;
    }
    std::vector<float> disjoint(kSamplerVocab, 0.0f);  // all of q where p is 0
    for (int i = 0; i < kSamplerVocab; ++i)
      disjoint[i] = p[i] > 0 ? 0.0f : 1.0f / (kSamplerVocab - 12);
    const std::vector<Case> cases = {
        {"uniform", std::vector<float>(kSamplerVocab, 1.0f / kSamplerVocab)},
        {"another model", Probs(other, t)},
        {"disjoint support", disjoint},
        {"one-hot on p's least likely token", OneHot(argmin_in)},
        {"one-hot outside p's support", OneHot(outside)},
        {"one-hot on p's mode", OneHot(argmax)},
    };
    for (const Case& c : cases) {
      const std::string what = std::string(c.name) + " at t=" + std::to_string(t);
      std::mt19937_64 rng(7);
      std::uniform_real_distribution<double> u(0.0, 1.0);
      std::vector<int64_t> counts(kSamplerVocab, 0);
      int64_t accepted = 0;
      for (int n = 0; n < kDraws; ++n) {
        const int d = DrawFrom(c.q, u(rng));
        const Verdict v = RejectionSample(p, c.q, d, u(rng), u(rng));
        ASSERT_GE(v.token, 0);
        ++counts[v.token];
        accepted += v.accepted;
        ASSERT_EQ(v.accepted, v.token == d);
      }
      ExpectFits(Compare(counts, p, kDraws), what);
      // P(accept) = sum_x min(p(x), q(x)) = 1 - TV(p, q).
      double overlap = 0;
      for (int i = 0; i < kSamplerVocab; ++i) overlap += std::min(p[i], c.q[i]);
      EXPECT_NEAR(double(accepted) / kDraws, overlap, kRateBound) << what;
    }
  }
}

TEST(RejectionSampleTest, TheTestCatchesAWrongRule) {
  // Keeping every draft (no verification) emits q, not p: the bounds above must reject that.
  const std::vector<float> p = Probs(Logits(1), 1.0), q = Probs(Logits(2), 1.0);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<int64_t> counts(kSamplerVocab, 0);
  for (int n = 0; n < 100000; ++n) ++counts[DrawFrom(q, u(rng))];
  const Fit f = Compare(counts, p, 100000);
  EXPECT_GT(f.tv, 0.05);
  EXPECT_GT(f.chi2, 10 * f.df);
}

TEST(VerifyDeterministicDraftTest, EmitsTheTargetDistributionAndAcceptsWithPOfTheDraft) {
  // The engine's path for one-hot drafts: the request's own sampler (top-k 12 here) over 10^6
  // seeds. The emitted token follows p; the draft is kept with probability p(d), and one
  // outside the top k never is.
  const std::vector<float> target = Logits(3);
  for (double t : {0.7, 1.6}) {
    sampling::SamplingParams params;
    params.temperature = static_cast<float>(t);
    params.top_k = 12;
    const std::vector<float> p = Probs(target, t, 12);
    int d = 0, outside = 0;
    for (int i = 0; i < kSamplerVocab; ++i) {
      if (p[i] > 0 && (p[d] <= 0 || std::abs(p[i] - 0.1f) < std::abs(p[d] - 0.1f))) d = i;
      if (p[i] <= 0) outside = i;
    }
    std::vector<int64_t> counts(kSamplerVocab, 0);
    int64_t accepted = 0, accepted_outside = 0;
    std::vector<float> scratch(kSamplerVocab);
    for (int n = 0; n < kDraws; ++n) {
      sampling::SamplingInput in;
      in.seed = static_cast<uint64_t>(n) * 0x9e3779b97f4a7c15ULL;
      scratch = target;
      const DeterministicVerdict v =
          VerifyDeterministicDraft(scratch, params, in, n % 2 ? d : outside);
      ++counts[v.sample.token];
      if (n % 2) {
        accepted += v.accepted;
      } else {
        accepted_outside += v.accepted;
      }
    }
    const std::string what = "t=" + std::to_string(t);
    ExpectFits(Compare(counts, p, kDraws), what);
    EXPECT_NEAR(double(accepted) / (kDraws / 2), p[d], 2 * kRateBound) << what;
    EXPECT_EQ(accepted_outside, 0) << what;
  }
}

TEST(VerifyDeterministicDraftTest, GreedyAcceptsExactlyTheArgmax) {
  std::vector<float> logits = Logits(4);
  const int32_t best = sampling::Argmax(logits);
  sampling::SamplingParams greedy;
  greedy.temperature = 0;
  for (int32_t d = -1; d < kSamplerVocab; ++d) {
    std::vector<float> scratch = logits;
    const DeterministicVerdict v = VerifyDeterministicDraft(scratch, greedy, {}, d);
    EXPECT_EQ(v.sample.token, best);
    EXPECT_EQ(v.accepted, d == best);
  }
}

}  // namespace
}  // namespace tachyon::spec
