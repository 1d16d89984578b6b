// Verification of drafted tokens: the rule that decides which drafted tokens the target
// model keeps, such that the emitted tokens follow the target's distribution exactly
// (Leviathan et al. / Chen et al., "speculative sampling").
//
// For a drafted token d drawn from a draft distribution q, with p the target's distribution at
// that position (after every logits processor and the request's temperature / top-k / top-p /
// min-p): accept d with probability min(1, p(d) / q(d)); on rejection emit a token drawn from
// norm(max(0, p - q)). The emitted token is then distributed as p, whatever q is.
//
// Deterministic drafters (n-gram, suffix) have a one-hot q at d. The residual is then p without
// d, renormalised, and the rule is the same as drawing the target token t ~ p and accepting iff
// t == d: P(accept) = p(d), and a rejected draw is p conditioned on t != d. The engine verifies
// such drafts that way (VerifyDeterministicDraft), drawing t with the request's sampler and its
// uniform for (seed, output position): a seeded request then emits exactly the tokens it emits
// without speculation, at any temperature, and greedy requests (t = argmax) are unchanged.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>

#include "sampling/sampler.h"
#include "sampling/sampling_params.h"

namespace tachyon::spec {

struct Verdict {
  int32_t token = -1;     // the token emitted at this position
  bool accepted = false;  // token is the drafted one
};

// The general rule for a stochastic draft. p and q: probabilities over the vocabulary
// (each sums to 1; q(draft) > 0 as draft was drawn from q). u_accept and u_resample: uniforms in
// [0, 1), independent (AcceptUniform / sampling::UniformForStep of the output position).
// REQUIRES: p.size() == q.size(), 0 <= draft < p.size().
Verdict RejectionSample(std::span<const float> p, std::span<const float> q, int32_t draft,
                        double u_accept, double u_resample);

// The acceptance uniform of output position `step` of a request seeded with `seed`
// (independent of sampling::UniformForStep(seed, step), which draws the resampled token).
double AcceptUniform(uint64_t seed, uint64_t step);

// One-hot draft d: samples the target token from `logits` exactly as sampling::Sample does
// (params, input: the position's logits processors, uniform and logprobs) and accepts iff it is
// d. `logits` is scratch, as for Sample. d < 0: no draft (a plain sample, never accepted).
struct DeterministicVerdict {
  sampling::SampleResult sample;  // the emitted token (sample.token) and its logprobs
  bool accepted = false;
};
DeterministicVerdict VerifyDeterministicDraft(std::span<float> logits,
                                              const sampling::SamplingParams& params,
                                              const sampling::SamplingInput& input, int32_t d);

}  // namespace tachyon::spec
