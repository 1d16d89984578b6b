#include "spec/rejection_sampler.h"

#include <algorithm>

namespace tachyon::spec {

Verdict RejectionSample(std::span<const float> p, std::span<const float> q, int32_t draft,
                        double u_accept, double u_resample) {
  const double pd = p[draft], qd = q[draft];
  // u < p/q, written without the division (q(d) = 0 would mean d could not have been drawn;
  // accepting it then is only right if the target allows it).
  if (u_accept * qd < pd || (qd <= 0 && pd > 0)) return {draft, true};
  double mass = 0;
  for (size_t i = 0; i < p.size(); ++i) mass += std::max(0.0, double(p[i]) - double(q[i]));
  if (!(mass > 0)) {
    // Only reachable through rounding (p == q up to float error): draw from p itself.
    double total = 0;
    for (float x : p) total += x;
    double target = u_resample * total, acc = 0;
    int32_t last = -1;
    for (size_t i = 0; i < p.size(); ++i) {
      if (p[i] <= 0) continue;
      last = static_cast<int32_t>(i);
      acc += p[i];
      if (target < acc) return {last, last == draft};
    }
    return {last, last == draft};
  }
  const double target = u_resample * mass;
  double acc = 0;
  int32_t last = -1;
  for (size_t i = 0; i < p.size(); ++i) {
    const double r = std::max(0.0, double(p[i]) - double(q[i]));
    if (r <= 0) continue;
    last = static_cast<int32_t>(i);
    acc += r;
    if (target < acc) return {last, false};
  }
  return {last, false};  // target within rounding of the total: the last token with mass
}

double AcceptUniform(uint64_t seed, uint64_t step) {
  // A different stream from the sampler's draw of the same step.
  return sampling::UniformForStep(seed ^ 0xa0761d6478bd642fULL, step ^ 0xe7037ed1a0b428dbULL);
}

DeterministicVerdict VerifyDeterministicDraft(std::span<float> logits,
                                              const sampling::SamplingParams& params,
                                              const sampling::SamplingInput& input, int32_t d) {
  DeterministicVerdict v;
  v.sample = sampling::Sample(logits, params, input);
  v.accepted = d >= 0 && v.sample.token == d;
  return v;
}

}  // namespace tachyon::spec
