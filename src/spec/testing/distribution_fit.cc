#include "spec/testing/distribution_fit.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace tachyon::spec::testing {

std::vector<float> SoftmaxTopK(std::span<const float> logits, double t, int top_k) {
  std::vector<float> sorted(logits.begin(), logits.end());
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  const float cut = top_k > 0 ? sorted[static_cast<size_t>(top_k - 1)] : -INFINITY;
  std::vector<double> e(logits.size());
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    e[i] = logits[i] >= cut ? std::exp((logits[i] - sorted[0]) / t) : 0.0;
    sum += e[i];
  }
  std::vector<float> p(logits.size());
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<float>(e[i] / sum);
  return p;
}

int DrawFrom(std::span<const float> q, double u) {
  double acc = 0;
  int last = 0;
  for (size_t i = 0; i < q.size(); ++i) {
    if (q[i] <= 0) continue;
    last = static_cast<int>(i);
    acc += q[i];
    if (u < acc) return last;
  }
  return last;
}

double Fit::Chi2Bound() const {
  return df + 6 * std::sqrt(2.0 * std::max(df, 1));
}

Fit CompareCounts(std::span<const int64_t> counts, std::span<const double> p, int64_t n) {
  Fit f;
  for (size_t i = 0; i < p.size(); ++i) {
    const double freq = static_cast<double>(counts[i]) / static_cast<double>(n);
    f.tv += std::abs(freq - p[i]) / 2;
    if (p[i] <= 0) {
      f.impossible |= counts[i] > 0;
      continue;
    }
    const double expected = p[i] * static_cast<double>(n);
    f.chi2 += (static_cast<double>(counts[i]) - expected) *
              (static_cast<double>(counts[i]) - expected) / expected;
    ++f.df;
  }
  return f;
}

}  // namespace tachyon::spec::testing
