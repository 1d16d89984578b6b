// Test-only helpers for the exactness tests of speculative decoding: target / draft
// distributions and the goodness-of-fit of observed counts (chi-square, total variation).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tachyon::spec::testing {

// softmax(logits / t), kept to the top_k largest logits (0: all) and renormalised.
std::vector<float> SoftmaxTopK(std::span<const float> logits, double t, int top_k = 0);

// The token whose cumulative probability first exceeds u (u in [0, 1)); the last token with
// mass when rounding leaves u past the total.
int DrawFrom(std::span<const float> q, double u);

struct Fit {
  double chi2 = 0;          // over the tokens with p > 0
  int df = -1;              // their number - 1
  double tv = 0;            // total variation between the counts' frequencies and p
  bool impossible = false;  // some token with p = 0 was counted
  // df + 6 standard deviations of the chi-square distribution: a false alarm is far rarer than
  // one in a million runs.
  double Chi2Bound() const;
};

// counts[i]: how often i was emitted in n draws; p: the distribution they should follow.
// REQUIRES: counts.size() == p.size().
Fit CompareCounts(std::span<const int64_t> counts, std::span<const double> p, int64_t n);

}  // namespace tachyon::spec::testing
