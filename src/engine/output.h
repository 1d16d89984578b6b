// What the engine reports per request, as it happens. Plain data.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sampling/sampler.h"
#include "util/status.h"

namespace tachyon::engine {

enum class FinishReason {
  kNone = 0,  // still generating
  kStop,      // EOS, a stop token id or a stop string
  kLength,    // max_tokens or the context length reached
  kAbort,     // aborted by the caller or by engine shutdown
  kError,     // the model failed (RequestOutput::error says why)
};

// "stop", "length", "abort", "error" ("" for kNone): the OpenAI spelling where one exists.
std::string_view FinishReasonName(FinishReason reason);

struct Usage {
  int64_t prompt_tokens = 0;         // once per request, whatever n is
  int64_t completion_tokens = 0;     // summed over the n choices
  int64_t cached_prompt_tokens = 0;  // prompt tokens whose KV came from the prefix cache
};

// Logprobs of one generated token.
struct TokenLogprobs {
  int32_t token = 0;
  float logprob = 0.0f;
  std::vector<sampling::TokenLogprob> top;  // best first
};

// One increment of one choice of a request. The concatenation of a choice's token_ids / text
// over its outputs is its whole completion.
struct RequestOutput {
  uint64_t request_id = 0;
  int index = 0;                        // choice index in [0, n)
  std::vector<int32_t> token_ids;       // new tokens (including a final EOS / stop token)
  std::string text;                     // new text (stop strings and stop tokens excluded)
  std::vector<TokenLogprobs> logprobs;  // one per new token when logprobs were requested
  FinishReason finish_reason = FinishReason::kNone;  // set on the choice's last output
  bool finished = false;      // the request's last output: every choice has finished
  Usage usage;                // totals so far
  double queue_seconds = -1;  // from Add to choice 0's first scheduling; < 0 until then
  Status error;               // set when finish_reason == kError
};

}  // namespace tachyon::engine
