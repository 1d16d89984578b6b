#include "sampling/sampler.h"

#include <algorithm>
#include <limits>

#include "sampling/logits_processors.h"
#include "util/splitmix.h"

namespace tachyon::sampling {
namespace {
// The ids min_tokens bans: EOS and the stop ids.
std::vector<int32_t> EndIds(const SamplingInput& input, const SamplingParams& params) {
  std::vector<int32_t> ids(input.eos_ids.begin(), input.eos_ids.end());
  ids.insert(ids.end(), params.stop_token_ids.begin(), params.stop_token_ids.end());
  return ids;
}
}  // namespace

double UniformForStep(uint64_t seed, uint64_t step) {
  const uint64_t r = SplitMix64(SplitMix64(seed) ^ SplitMix64(step + 0x632be59bd9b4e019ULL));
  return static_cast<double>(r >> 11) * (1.0 / 9007199254740992.0);  // 53 bits
}

std::vector<TokenLogprob> TopLogprobs(std::span<const float> logits, int n, float log_sum_exp) {
  std::vector<Candidate> c = TopKCandidates(logits, n);
  std::vector<TokenLogprob> out;
  out.reserve(std::min<size_t>(c.size(), n > 0 ? n : 0));
  for (int i = 0; i < n && i < static_cast<int>(c.size()); ++i) {
    out.push_back({c[i].token, c[i].p - log_sum_exp});
  }
  return out;
}

namespace {
// The stages before the draw: penalties, logit bias, grammar mask, min_tokens bans.
void PrepareLogits(std::span<float> logits, const SamplingParams& params,
                   const SamplingInput& input) {
  // A continuation's prompt ends with output_offset earlier output tokens of its choice: the
  // output penalties count them, as they did in the original stream.
  std::span<const int32_t> prompt = input.prompt, output = input.output;
  std::vector<int32_t> joined;
  const size_t resumed = params.ResumedTokens(prompt.size());
  if (resumed > 0 && (params.presence_penalty != 0.0f || params.frequency_penalty != 0.0f)) {
    joined.assign(prompt.end() - static_cast<ptrdiff_t>(resumed), prompt.end());
    joined.insert(joined.end(), output.begin(), output.end());
    prompt = prompt.first(prompt.size() - resumed);
    output = joined;
  }
  ApplyPenalties(logits, prompt, output, params.repetition_penalty, params.presence_penalty,
                 params.frequency_penalty);
  ApplyLogitBias(logits, params.logit_bias);
  if (!input.allowed.empty()) ApplyAllowedMask(logits, input.allowed);
  if (static_cast<int>(input.output.size()) < params.min_tokens &&
      (input.allowed.empty() || AllowsOtherThan(input.allowed, EndIds(input, params)))) {
    BanTokens(logits, input.eos_ids);
    BanTokens(logits, params.stop_token_ids);
  }
}

// Temperature, then top-k / top-p / min-p: the candidates a draw picks from (p not
// renormalised). REQUIRES: params.temperature > 0.
void ScaleByTemperature(std::span<float> logits, float temperature) {
  const float inv_t = 1.0f / temperature;
  // Finite after scaling (a logit near the float maximum over a temperature below 1 would be
  // +inf, and the softmax NaN); -inf (banned tokens) stays -inf.
  for (float& l : logits) l = std::min(l * inv_t, std::numeric_limits<float>::max());
}

// No truncation by rank (top_k off, top_p 1): every token is a candidate, in id order.
bool TakesAll(const SamplingParams& params) {
  return params.top_k <= 0 && params.top_p >= 1.0f;
}

std::vector<Candidate> TemperatureCandidates(std::span<float> logits,
                                             const SamplingParams& params) {
  ScaleByTemperature(logits, params.temperature);
  std::vector<Candidate> c;
  if (params.top_k <= 0 && params.top_p < 1.0f) {
    c = TopPCandidates(logits, params.top_p);  // sorts only the head it needs
  } else if (params.top_k > 0) {
    c = TopKCandidates(logits, params.top_k);  // sorted: top-p needs the order
    Softmax(&c);
    TopP(&c, params.top_p);
  } else {
    c.reserve(logits.size());  // no truncation by rank: skip the sort
    for (size_t i = 0; i < logits.size(); ++i) c.push_back({static_cast<int32_t>(i), logits[i]});
    Softmax(&c);
  }
  MinP(&c, params.min_p);
  return c;
}
}  // namespace

SampleResult Sample(std::span<float> logits, const SamplingParams& params,
                    const SamplingInput& input) {
  SampleResult result;
  float lse = 0;
  std::vector<TokenLogprob> top;
  if (params.logprobs >= 0) {
    lse = LogSumExp(logits);
    top = TopLogprobs(logits, params.logprobs, lse);
  }
  // Keep the raw logit of whichever token gets chosen: copy only if we need logprobs.
  std::vector<float> raw;
  if (params.logprobs >= 0) raw.assign(logits.begin(), logits.end());

  PrepareLogits(logits, params, input);
  const auto u = [&] {
    return UniformForStep(input.seed, params.output_offset + input.output.size());
  };
  if (params.temperature == 0.0f) {
    result.token = Argmax(logits);
  } else if (TakesAll(params)) {
    // The same draw as the candidate list's below, without building it (a vocabulary of 150k
    // costs ~2.7 ms that way, several per step in a batch).
    ScaleByTemperature(logits, params.temperature);
    result.token = DrawFromAll(logits, params.min_p, u());
  } else {
    std::vector<Candidate> c = TemperatureCandidates(logits, params);
    result.token = Draw(c, u());
  }
  if (params.logprobs >= 0) {
    result.logprob = LogProb(raw, result.token, lse);
    result.top_logprobs = std::move(top);
  }
  return result;
}

void SamplingDistribution(std::span<float> logits, const SamplingParams& params,
                          const SamplingInput& input, std::vector<float>* probs) {
  PrepareLogits(logits, params, input);
  probs->assign(logits.size(), 0.0f);
  if (params.temperature == 0.0f) {
    (*probs)[static_cast<size_t>(Argmax(logits))] = 1.0f;
    return;
  }
  const std::vector<Candidate> c = TemperatureCandidates(logits, params);
  double total = 0;
  for (const Candidate& x : c) total += x.p;
  if (!(total > 0)) {  // every candidate at zero (rounding): Draw falls back to the first
    (*probs)[static_cast<size_t>(c.front().token)] = 1.0f;
    return;
  }
  for (const Candidate& x : c) {
    (*probs)[static_cast<size_t>(x.token)] = static_cast<float>(x.p / total);
  }
}

}  // namespace tachyon::sampling
