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

// Where a choice's time to first token went, measured on the engine thread, in seconds. From
// its arrival (EngineCore::AddRequest) to the end of the step that sampled its first token:
// inbox + queued + prefix_wait + prefill + stalled, plus the engine loop's few microseconds
// between steps. Every step is counted whole under one heading, although other requests'
// tokens share it (prefill_step_tokens says how many tokens those steps ran in all).
struct TtftBreakdown {
  double inbox_seconds = 0;        // arrival -> the engine loop took it (the step then running,
                                   // or an idle engine gathering a burst)
  double queued_seconds = 0;       // steps while not admitted: seats, budget, blocks, queue
                                   // order, or preempted back to the queue
  double prefix_wait_seconds = 0;  // steps while waiting for prefix blocks that another request
                                   // was computing (then taken from the cache)
  double prefill_seconds = 0;      // steps that computed some of its own prompt
  double stalled_seconds = 0;      // steps after admission that ran only others' tokens
  int steps = 0;                   // steps until the first token
  int prefill_steps = 0;
  int64_t prefill_tokens = 0;       // of its own prompt computed (cached tokens excluded)
  int64_t prefill_step_tokens = 0;  // all tokens of its prefill steps (its own + others')
  double first_token_seconds = -1;  // arrival -> first token; < 0 until it is sampled
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
  double queue_seconds = -1;  // from arrival to choice 0's first scheduling; < 0 until then
  TtftBreakdown ttft;         // this choice's, final once first_token_seconds >= 0
  Status error;               // set when finish_reason == kError
  // A continuation's first output (Engine::Add, params.output_offset > 0): the text the
  // original stream sent for the output tokens it resumes (not sent again), so that parsers
  // of the text (reasoning, tool calls) can go on from where the original's were.
  std::string resumed_text;
};

}  // namespace tachyon::engine
