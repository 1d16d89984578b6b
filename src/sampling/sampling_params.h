// SamplingParams: how one request turns logits into tokens and when it stops.
//
// Plain data, copied into each request. Validate() gives the caller (server) a clear
// InvalidArgument for out-of-range values before the request reaches the engine.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "util/status.h"

namespace tachyon::sampling {

struct SamplingParams {
  int n = 1;                        // completions per prompt (they share the prompt's KV blocks)
  float temperature = 1.0f;         // 0: greedy (argmax after penalties and bias)
  int top_k = 0;                    // <= 0: off
  float top_p = 1.0f;               // 1: off
  float min_p = 0.0f;               // 0: off; keeps tokens with p >= min_p * p_max
  float repetition_penalty = 1.0f;  // 1: off; applies to prompt and output tokens
  float presence_penalty = 0.0f;    // OpenAI semantics, output tokens only
  float frequency_penalty = 0.0f;   // OpenAI semantics, output tokens only
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token id, added to its logit)
  std::optional<uint64_t> seed;                       // unset: the engine picks one per request
  int max_tokens = -1;                                // < 0: until the context is full
  int min_tokens = 0;                   // EOS and stop token ids are banned before this many
  std::vector<std::string> stop;        // stop strings, excluded from the output text
  std::vector<int32_t> stop_token_ids;  // stop tokens (in addition to EOS), excluded from text
  bool ignore_eos = false;
  int logprobs = -1;  // < 0: none; N >= 0: the chosen token's logprob plus the top N
  // Output tokens of this choice generated before this request (a continuation that resumes
  // a stream elsewhere, whose prompt ends with them): draw i of this request is draw
  // output_offset + i of the choice, so a seeded continuation reproduces the original stream.
  int output_offset = 0;

  // How many of a prompt of `prompt_len` tokens are resumed output: output_offset, within it.
  size_t ResumedTokens(size_t prompt_len) const {
    return output_offset > 0 ? std::min(prompt_len, static_cast<size_t>(output_offset)) : 0;
  }

  // Checks ranges; n_vocab bounds the token ids in logit_bias / stop_token_ids.
  Status Validate(int n_vocab) const;
};

// Largest top-N logprobs a request may ask for.
inline constexpr int kMaxLogprobs = 20;

}  // namespace tachyon::sampling
