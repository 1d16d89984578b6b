// The sampler's stages, each a pure function on one request's logits (so each can be tested
// on a hand-written distribution). Sampler (sampler.h) chains them in this order:
//   penalties -> logit bias -> bans (min_tokens) -> [greedy argmax] or
//   temperature -> top-k -> softmax -> top-p -> min-p -> draw.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace tachyon::sampling {

// Repetition penalty (CTRL style: positive logits divided, negative multiplied) on every token
// seen in prompt or output; presence and frequency penalties (OpenAI: subtract
// presence + frequency * count) on output tokens. Out-of-range ids are ignored.
void ApplyPenalties(std::span<float> logits, std::span<const int32_t> prompt,
                    std::span<const int32_t> output, float repetition, float presence,
                    float frequency);

void ApplyLogitBias(std::span<float> logits, std::span<const std::pair<int32_t, float>> bias);

// Sets the listed tokens' logits to -infinity.
void BanTokens(std::span<float> logits, std::span<const int32_t> ids);

// Grammar masks: bit (t % 32) of allowed[t / 32] set = token t allowed. Sets every other
// token's logit to -infinity (tokens past the mask's bits included).
void ApplyAllowedMask(std::span<float> logits, std::span<const uint32_t> allowed);
// Whether `allowed` (as above) allows some token that is not in `ids`.
bool AllowsOtherThan(std::span<const uint32_t> allowed, std::span<const int32_t> ids);

// Index of the largest logit (lowest id on ties).
int32_t Argmax(std::span<const float> logits);

struct Candidate {
  int32_t token;
  float p;  // logit before Softmax(), probability after
};

// The k highest logits (all if k <= 0 or k >= size) sorted by logit descending, then id.
std::vector<Candidate> TopKCandidates(std::span<const float> logits, int k);

// In place: logits -> probabilities (stable softmax). REQUIRES: non-empty.
void Softmax(std::vector<Candidate>* c);

// Softmax over all of `logits`, then the smallest probability-sorted prefix whose mass reaches
// top_p: the same result as TopKCandidates(logits, 0) + Softmax + TopP, but it sorts only a
// growing head of the vocabulary (cheap for 100k-token vocabularies). Probabilities are those
// of the full softmax (not renormalized).
std::vector<Candidate> TopPCandidates(std::span<const float> logits, float top_p);

// Keeps the smallest prefix of probability-sorted candidates whose mass reaches top_p
// (always at least one). Does not renormalize.
void TopP(std::vector<Candidate>* c, float top_p);

// Keeps candidates with p >= min_p * (max p). Does not renormalize.
void MinP(std::vector<Candidate>* c, float min_p);

// Draws a candidate with probability proportional to p, using u in [0, 1).
int32_t Draw(const std::vector<Candidate>& c, double u);

// The token that Draw(c, u) picks for c = every logit as a candidate in id order, after
// Softmax(&c) and MinP(&c, min_p) (the same arithmetic, so the same token), computed in place
// without the candidate list: `logits` holds the (min-p zeroed) probabilities afterwards.
// REQUIRES: !logits.empty().
int32_t DrawFromAll(std::span<float> logits, float min_p, double u);

// log_softmax(logits)[token].
float LogProb(std::span<const float> logits, int32_t token, float log_sum_exp);
float LogSumExp(std::span<const float> logits);

}  // namespace tachyon::sampling
