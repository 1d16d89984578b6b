#include "spec/draft_sampling.h"

#include <algorithm>
#include <vector>

#include "sampling/logits_processors.h"

namespace tachyon::spec {

double DraftUniform(uint64_t seed, uint64_t step) {
  return sampling::UniformForStep(seed ^ 0x8ebc6af09c88c6e3ULL, step ^ 0x589965cc75374cc3ULL);
}

void DraftDistribution(std::span<float> row, const sampling::SamplingParams& params,
                       const sampling::SamplingInput& input, size_t n_vocab,
                       std::vector<float>* q) {
  sampling::SamplingDistribution(row, params, input, q);
  q->resize(std::max(n_vocab, q->size()), 0.0f);
}

int32_t DrawFrom(std::span<const float> q, double u) {
  double cum = 0;
  int32_t last = -1;
  for (size_t i = 0; i < q.size(); ++i) {
    if (q[i] <= 0) continue;
    last = static_cast<int32_t>(i);
    cum += q[i];
    if (u < cum) return last;
  }
  return last;
}

DeterministicVerdict VerifyStochasticDraft(std::span<float> logits,
                                           const sampling::SamplingParams& params,
                                           const sampling::SamplingInput& input, int32_t d,
                                           std::span<const float> q) {
  DeterministicVerdict v;
  if (params.logprobs >= 0) {
    const float lse = sampling::LogSumExp(logits);
    v.sample.top_logprobs = sampling::TopLogprobs(logits, params.logprobs, lse);
    v.sample.logprob = lse;  // the draw's own logprob is filled in below, once it is known
  }
  std::vector<float> raw;
  if (params.logprobs >= 0) raw.assign(logits.begin(), logits.end());
  std::vector<float> p;
  sampling::SamplingDistribution(logits, params, input, &p);
  const uint64_t step = static_cast<uint64_t>(params.output_offset) + input.output.size();
  const Verdict r = RejectionSample(p, q, d, AcceptUniform(input.seed, step),
                                    sampling::UniformForStep(input.seed, step));
  v.sample.token = r.token;
  v.accepted = r.accepted;
  if (params.logprobs >= 0) v.sample.logprob = sampling::LogProb(raw, r.token, v.sample.logprob);
  return v;
}

}  // namespace tachyon::spec
