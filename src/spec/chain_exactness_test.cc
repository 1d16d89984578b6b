// Exactness of speculative decoding per method, over chains of drafts: the first two tokens a
// request emits with speculation must follow the target's joint distribution
// p(x0 | c) p(x1 | x0) exactly, whatever was drafted, at two temperatures (10^6 requests per
// case, chi-square and total variation over the 64 cells of an 8-token vocabulary).
//
//  - ngram and suffix: the real drafters propose from the request's tokens, on contexts built so
//    that their first draft is adversarial (the target's mode chain, its least likely token,
//    a token outside its top-k support); drafts are one-hot and verified as the engine does
//    (VerifyDeterministicDraft with the request's sampler and the uniform of (seed, output
//    position)), and each seed must also emit exactly the tokens it emits without speculation.
//  - draft_model: stochastic drafts d0 ~ q(. | c), d1 ~ q(. | d0), verified by RejectionSample
//    position by position; the next step samples the target afresh after a rejection. Draft
//    distributions: another model, uniform, one-hot on the least likely token, disjoint support
//    and one-hot outside the support.
// The target is a toy bigram model (no model file): p(x | prev) = top-5 softmax(W[prev] / t).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "spec/ngram_drafter.h"
#include "spec/rejection_sampler.h"
#include "spec/suffix_drafter.h"
#include "spec/testing/distribution_fit.h"
#include "util/sanitizer.h"

namespace tachyon::spec {
namespace {

constexpr int kV = 8;
constexpr int kTopK = 5;
// The sanitizer build checks memory, on fewer draws.
constexpr int kRequests = kAddressSanitizer ? 100000 : 1000000;
const double kTvBound = 12.0 / std::sqrt(double(kRequests));  // ~3x the noise over 64 cells

using Table = std::array<std::vector<float>, kV>;  // [prev][x]

Table RandomLogits(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.0f, 2.0f);
  Table w;
  for (auto& row : w) {
    row.resize(kV);
    for (float& x : row) x = n(rng);
  }
  return w;
}

Table Probs(const Table& w, double t, int top_k) {
  Table p;
  for (int i = 0; i < kV; ++i) p[i] = testing::SoftmaxTopK(w[i], t, top_k);
  return p;
}

std::vector<double> Joint(const Table& p, int c) {
  std::vector<double> j(kV * kV);
  for (int a = 0; a < kV; ++a) {
    for (int b = 0; b < kV; ++b) j[a * kV + b] = double(p[c][a]) * p[a][b];
  }
  return j;
}

void ExpectJointFits(const std::vector<int64_t>& counts, const std::vector<double>& joint,
                     const std::string& what) {
  const testing::Fit f = testing::CompareCounts(counts, joint, kRequests);
  EXPECT_LT(f.chi2, f.Chi2Bound()) << what << " (df " << f.df << ")";
  EXPECT_LT(f.tv, kTvBound) << what;
  EXPECT_FALSE(f.impossible) << what;
}

// Drafts of a deterministic drafter, memoised per context (they depend on nothing else: the
// suffix drafter's global tree is off). Contexts are short sequences of 3-bit tokens.
class Drafts {
 public:
  explicit Drafts(std::unique_ptr<Drafter> d) : d_(std::move(d)) {}
  const std::vector<int32_t>& Get(const std::vector<int32_t>& tokens, int k) {
    uint64_t key = static_cast<uint64_t>(k) + 1;
    for (int32_t t : tokens) key = key << 4 | (static_cast<uint64_t>(t) + 1);
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    std::vector<int32_t> draft;
    d_->Propose(next_id_, tokens, 0, k, &draft);
    d_->Release(next_id_++, tokens, static_cast<int64_t>(tokens.size()));
    return memo_.emplace(key, std::move(draft)).first->second;
  }

 private:
  std::unique_ptr<Drafter> d_;
  std::unordered_map<uint64_t, std::vector<int32_t>> memo_;
  int64_t next_id_ = 0;
};

// The engine's loop for one request emitting `n` tokens after `prompt`: each step drafts up to
// what the room leaves (n - emitted - 1), verifies row by row, and stops at the first sample
// that differs from its draft. Returns the first `keep` tokens (rows after them are not
// sampled: they cannot change them); *accepted0 counts first drafts kept.
std::vector<int32_t> RunSpeculative(Drafts* drafts, const Table& w,
                                    const sampling::SamplingParams& params,
                                    const std::vector<int32_t>& prompt, uint64_t seed, int n,
                                    int keep, int k, int* accepted0, std::vector<float>* scratch) {
  std::vector<int32_t> tokens = prompt;
  const auto emitted = [&] { return static_cast<int>(tokens.size() - prompt.size()); };
  while (emitted() < keep) {
    const int room = n - emitted() - 1;
    const std::vector<int32_t> draft = drafts->Get(tokens, std::min(k, room));
    const bool first_step = tokens.size() == prompt.size();
    for (size_t j = 0; j <= draft.size() && emitted() < keep; ++j) {
      *scratch = w[tokens.back()];
      sampling::SamplingInput in;
      in.prompt = std::span(tokens).first(prompt.size());
      in.output = std::span(tokens).subspan(prompt.size());
      in.seed = seed;
      const DeterministicVerdict v =
          VerifyDeterministicDraft(*scratch, params, in, j < draft.size() ? draft[j] : -1);
      tokens.push_back(v.sample.token);
      if (first_step && j == 0) *accepted0 += v.accepted;
      if (!v.accepted) break;
    }
  }
  return {tokens.begin() + static_cast<std::ptrdiff_t>(prompt.size()), tokens.end()};
}

std::vector<int32_t> RunPlain(const Table& w, const sampling::SamplingParams& params,
                              const std::vector<int32_t>& prompt, uint64_t seed, int n,
                              std::vector<float>* scratch) {
  std::vector<int32_t> tokens = prompt;
  for (int i = 0; i < n; ++i) {
    *scratch = w[tokens.back()];
    sampling::SamplingInput in;
    in.prompt = std::span(tokens).first(prompt.size());
    in.output = std::span(tokens).subspan(prompt.size());
    in.seed = seed;
    tokens.push_back(sampling::Sample(*scratch, params, in).token);
  }
  return {tokens.begin() + static_cast<std::ptrdiff_t>(prompt.size()), tokens.end()};
}

std::unique_ptr<Drafter> MakeNgram() {
  return std::make_unique<NgramDrafter>(1, 3);
}
std::unique_ptr<Drafter> MakeSuffix() {
  SuffixConfig c;
  c.max_spec_factor = 2;  // a 1-token match drafts 2 tokens
  c.min_token_prob = 0;
  c.max_cached_requests = 0;
  return std::make_unique<SuffixDrafter>(c);
}

TEST(ChainExactnessTest, DeterministicDraftersEmitTheTargetJointDistribution) {
  const Table w = RandomLogits(11);
  // The support (top 5), the mode and the least likely token do not depend on the temperature.
  const Table p1 = Probs(w, 1.0, kTopK);
  auto argmax = [&](int prev) {
    int best = 0;
    for (int x = 1; x < kV; ++x) best = p1[prev][x] > p1[prev][best] ? x : best;
    return best;
  };
  // First drafts [a, b] after c: the mode chain, the least likely token, one outside the
  // support; c (every request's last prompt token) is one that none of them repeats.
  int c = -1;
  std::vector<std::array<int, 2>> first;
  for (int cand = 0; cand < kV && c < 0; ++cand) {
    int least = -1, outside = -1;
    for (int x = 0; x < kV; ++x) {
      if (p1[cand][x] > 0 && (least < 0 || p1[cand][x] < p1[cand][least])) least = x;
      if (p1[cand][x] <= 0 && outside < 0) outside = x;
    }
    first = {
        {argmax(cand), argmax(argmax(cand))}, {least, argmax(least)}, {outside, argmax(outside)}};
    bool clear = true;
    for (auto [a, b] : first) clear = clear && a != cand && b != cand;
    if (clear) c = cand;
  }
  ASSERT_GE(c, 0);
  for (auto [method, make] : {std::pair{"ngram", &MakeNgram}, std::pair{"suffix", &MakeSuffix}}) {
    for (double t : {0.7, 1.6}) {
      const Table p = Probs(w, t, kTopK);
      sampling::SamplingParams params;
      params.temperature = static_cast<float>(t);
      params.top_k = kTopK;
      std::vector<std::vector<int32_t>> prompts;
      for (auto [a, b] : first) {
        int sep = 0;  // a token that makes no other match
        while (sep == c || sep == a || sep == b) ++sep;
        prompts.push_back({c, a, b, sep, c});
      }
      Drafts drafts(make());
      for (size_t i = 0; i < prompts.size(); ++i) {
        const std::vector<int32_t> want = {first[i][0], first[i][1]};
        ASSERT_EQ(drafts.Get(prompts[i], 2), want) << method << " case " << i;
      }
      std::vector<int64_t> counts(kV * kV, 0);
      std::vector<int> accepted(prompts.size(), 0);
      std::vector<float> scratch(kV);
      for (int r = 0; r < kRequests; ++r) {
        const size_t i = static_cast<size_t>(r) % prompts.size();
        const uint64_t seed = static_cast<uint64_t>(r) * 0x9e3779b97f4a7c15ULL + 1;
        const std::vector<int32_t> out =
            RunSpeculative(&drafts, w, params, prompts[i], seed, 3, 2, 2, &accepted[i], &scratch);
        ++counts[out[0] * kV + out[1]];
        if (r % 64 == 0) {  // seeded: the very tokens of the request without speculation
          ASSERT_EQ(out, RunPlain(w, params, prompts[i], seed, 2, &scratch)) << method << " " << r;
        }
      }
      const std::string what = std::string(method) + " t=" + std::to_string(t);
      ExpectJointFits(counts, Joint(p, c), what);
      for (size_t i = 0; i < prompts.size(); ++i) {  // a one-hot draft d is kept with p(d)
        const double n = std::ceil(double(kRequests - i) / prompts.size());
        EXPECT_NEAR(accepted[i] / n, p[c][first[i][0]], 4 / std::sqrt(n)) << what << " " << i;
      }
    }
  }
}

// A draft model's distribution after a token: q[prev][x].
struct DraftCase {
  const char* name;
  Table q;
};

TEST(ChainExactnessTest, StochasticDraftsEmitTheTargetJointDistribution) {
  const Table w = RandomLogits(12), other = RandomLogits(13);
  const int c = 5;
  for (double t : {0.7, 1.6}) {
    const Table p = Probs(w, t, kTopK);
    auto per_prev = [&](auto row) {
      Table q;
      for (int prev = 0; prev < kV; ++prev) q[prev] = row(prev);
      return q;
    };
    auto one_hot = [](int x) {
      std::vector<float> v(kV, 0.0f);
      v[x] = 1.0f;
      return v;
    };
    const std::vector<DraftCase> cases = {
        {"another model", Probs(other, t, 0)},
        {"uniform", per_prev([](int) { return std::vector<float>(kV, 1.0f / kV); })},
        {"one-hot on the least likely", per_prev([&](int prev) {
           int least = -1;
           for (int x = 0; x < kV; ++x) {
             if (p[prev][x] > 0 && (least < 0 || p[prev][x] < p[prev][least])) least = x;
           }
           return one_hot(least);
         })},
        {"disjoint support", per_prev([&](int prev) {
           std::vector<float> v(kV, 0.0f);
           for (int x = 0; x < kV; ++x) v[x] = p[prev][x] > 0 ? 0.0f : 1.0f / (kV - kTopK);
           return v;
         })},
        {"one-hot outside the support", per_prev([&](int prev) {
           int x = 0;
           while (p[prev][x] > 0) ++x;
           return one_hot(x);
         })},
    };
    for (const DraftCase& dc : cases) {
      std::mt19937_64 rng(17);
      std::uniform_real_distribution<double> u(0.0, 1.0);
      std::vector<int64_t> counts(kV * kV, 0);
      int64_t accepted0 = 0;
      for (int r = 0; r < kRequests; ++r) {
        const uint64_t seed = static_cast<uint64_t>(r) * 0x9e3779b97f4a7c15ULL + 1;
        const int d0 = testing::DrawFrom(dc.q[c], u(rng));
        const int d1 = testing::DrawFrom(dc.q[d0], u(rng));
        const Verdict v0 = RejectionSample(p[c], dc.q[c], d0, AcceptUniform(seed, 0),
                                           sampling::UniformForStep(seed, 0));
        int x1;
        if (v0.accepted) {
          x1 = RejectionSample(p[d0], dc.q[d0], d1, AcceptUniform(seed, 1),
                               sampling::UniformForStep(seed, 1))
                   .token;
        } else {  // the next step samples the target after the corrected token
          x1 = testing::DrawFrom(p[v0.token], sampling::UniformForStep(seed, 1));
        }
        ASSERT_EQ(v0.accepted, v0.token == d0);
        accepted0 += v0.accepted;
        ++counts[v0.token * kV + x1];
      }
      const std::string what = std::string(dc.name) + " t=" + std::to_string(t);
      ExpectJointFits(counts, Joint(p, c), what);
      double overlap = 0;  // P(accept d0) = 1 - TV(p, q)
      for (int x = 0; x < kV; ++x) overlap += std::min(p[c][x], dc.q[c][x]);
      EXPECT_NEAR(double(accepted0) / kRequests, overlap, 4 / std::sqrt(double(kRequests))) << what;
    }
  }
}

TEST(ChainExactnessTest, TheJointTestCatchesAWrongChain) {
  // Continuing a rejected chain with the draft's second token (a classic bug) changes the
  // joint distribution; the bounds above must reject it.
  const Table w = RandomLogits(12), other = RandomLogits(13);
  const Table p = Probs(w, 1.0, kTopK), q = Probs(other, 1.0, 0);
  const int c = 5;
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<int64_t> counts(kV * kV, 0);
  for (int r = 0; r < kRequests; ++r) {
    const int d0 = testing::DrawFrom(q[c], u(rng));
    const int d1 = testing::DrawFrom(q[d0], u(rng));
    const Verdict v0 = RejectionSample(p[c], q[c], d0, u(rng), u(rng));
    const int x1 = v0.accepted ? RejectionSample(p[d0], q[d0], d1, u(rng), u(rng)).token : d1;
    ++counts[v0.token * kV + x1];
  }
  const testing::Fit f = testing::CompareCounts(counts, Joint(p, c), kRequests);
  EXPECT_TRUE(f.chi2 > f.Chi2Bound() || f.impossible);
  EXPECT_GT(f.tv, kTvBound);
}

}  // namespace
}  // namespace tachyon::spec
