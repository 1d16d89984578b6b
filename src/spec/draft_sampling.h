// Stochastic drafts (method draft_model): how a draft model's token is drawn and how the target
// verifies it, so that the emitted tokens follow the target's distribution exactly.
//
// At temperature > 0 the draft token d is drawn from q, the draft model's distribution after
// the request's own sampling stages (sampling::SamplingDistribution over the draft's logits,
// with the request's penalties, bias, min_tokens bans, temperature, top-k / top-p / min-p), with
// a uniform of its own (DraftUniform). The target then applies spec::RejectionSample to p (its
// distribution at that position, the same stages plus the grammar mask) and q. At temperature
// 0 drafts are the draft's argmax (one-hot q) and verification is VerifyDeterministicDraft, so
// greedy output is unchanged by speculation.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sampling/sampler.h"
#include "sampling/sampling_params.h"
#include "spec/rejection_sampler.h"

namespace tachyon::spec {

// The uniform that draws the draft token of output position `step` of a request seeded with
// `seed` (independent of the target's UniformForStep and AcceptUniform of that step).
double DraftUniform(uint64_t seed, uint64_t step);

// q over the target's vocabulary [0, n_vocab) for a draft whose logits `row` cover tokens
// [0, row.size()) only (row.size() <= n_vocab; a draft model computing its frequent tokens,
// draft_vocab_size): sampling::SamplingDistribution over the row (so renormalised over that
// prefix), zero past it. This is the distribution the draft token is drawn from, so it is the
// q that VerifyStochasticDraft must be given. Uses `row` as scratch.
void DraftDistribution(std::span<float> row, const sampling::SamplingParams& params,
                       const sampling::SamplingInput& input, size_t n_vocab,
                       std::vector<float>* q);

// The token of q [n_vocab] (probabilities summing to 1) at uniform u in [0, 1): the first whose
// cumulative probability exceeds u (the last with non-zero probability under rounding).
// REQUIRES: q has some non-zero entry.
int32_t DrawFrom(std::span<const float> q, double u);

// Verifies draft d, drawn from q, against the target's `logits` (scratch) for the request
// (params, input: as sampling::Sample takes them): accepts d with probability min(1, p(d)/q(d)),
// else emits a token from norm(max(0, p - q)); the uniforms are AcceptUniform and
// sampling::UniformForStep of the output position (params.output_offset + input.output.size()).
// The result's logprobs (params.logprobs >= 0) are the target model's, as Sample reports them.
// REQUIRES: params.temperature > 0, q.size() == logits.size(), 0 <= d < q.size().
DeterministicVerdict VerifyStochasticDraft(std::span<float> logits,
                                           const sampling::SamplingParams& params,
                                           const sampling::SamplingInput& input, int32_t d,
                                           std::span<const float> q);

}  // namespace tachyon::spec
