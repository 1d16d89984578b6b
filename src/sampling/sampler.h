// Sampler: one request's next token (and logprobs) from one row of logits.
//
// Deterministic: the draw uses a uniform number derived only from (seed, number of output
// tokens so far + params.output_offset), so a seeded request yields the same tokens whatever else
// is in the batch and whether or not it was preempted and recomputed. Logprobs are those of the
// model's own distribution (log_softmax of the raw logits, before penalties, bias or temperature).
// Thread-safety: stateless; safe to call concurrently on different rows.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sampling/sampling_params.h"

namespace tachyon::sampling {

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
  bool operator==(const TokenLogprob&) const = default;
};

struct SampleResult {
  int32_t token = -1;
  float logprob = 0.0f;                    // set when params.logprobs >= 0
  std::vector<TokenLogprob> top_logprobs;  // params.logprobs entries, best first
};

struct SamplingInput {
  std::span<const int32_t> prompt;
  std::span<const int32_t> output;   // tokens generated so far
  uint64_t seed = 0;                 // params.seed if set, else the engine's per-request seed
  std::span<const int32_t> eos_ids;  // banned (with stop_token_ids) while output < min_tokens
  // Grammar mask (bit t % 32 of word t / 32 set = token t allowed); empty = no constraint.
  // Applied after the logprobs are taken (they stay the model's). Under min_tokens, EOS and
  // stop ids stay banned only while the mask allows some other token.
  std::span<const uint32_t> allowed;
};

// Samples from `logits` [n_vocab]; the buffer is used as scratch and modified.
SampleResult Sample(std::span<float> logits, const SamplingParams& params,
                    const SamplingInput& input);

// The distribution Sample draws from, over the whole vocabulary: `*probs` gets [n_vocab]
// probabilities summing to 1 (zero outside the candidates left by top-k / top-p / min-p);
// one-hot at the argmax when params.temperature == 0. Uses `logits` as scratch, as Sample.
// (Speculative decoding compares a draft model's distribution with the target's.)
void SamplingDistribution(std::span<float> logits, const SamplingParams& params,
                          const SamplingInput& input, std::vector<float>* probs);

// The uniform number in [0, 1) for draw number `step` of a request seeded with `seed`.
double UniformForStep(uint64_t seed, uint64_t step);

// The top n tokens of log_softmax(logits), best first (lowest id on ties).
std::vector<TokenLogprob> TopLogprobs(std::span<const float> logits, int n, float log_sum_exp);

}  // namespace tachyon::sampling
