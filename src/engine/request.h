// Request: one sequence being generated (one choice of a user request), as the scheduler and
// the engine see it. There is no prefill or decode phase: num_computed_tokens (tokens whose KV
// is in the cache) catches up with tokens.size() (prompt + generated so far); a step that
// brings it level samples the next token.
//
// Owned by Engine (engine.h); the scheduler holds non-owning pointers. Engine thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/detokenizer.h"
#include "engine/output.h"
#include "engine/stop_string_matcher.h"
#include "grammar/matcher.h"
#include "kv/block_hash.h"
#include "sampling/sampling_params.h"

namespace tachyon::engine {

class KvExportSink;  // engine/pd_export.h

enum class RequestState { kWaiting, kRunning, kFinished };

struct Request {
  int64_t seq_id = 0;         // unique per sequence; names its KV blocks
  uint64_t request_id = 0;    // the user-visible request (shared by its n choices)
  int index = 0;              // choice index
  int priority = 0;           // lower runs first (under the priority policy)
  uint64_t arrival = 0;       // admission order; earlier runs first
  Request* leader = nullptr;  // choice 0 of the same request (n > 1), whose prompt blocks
                              // this choice shares; null for choice 0. Outlives this.

  std::vector<int32_t> tokens;  // prompt followed by the generated tokens
  int64_t num_prompt_tokens = 0;
  int64_t num_computed_tokens = 0;
  int64_t max_tokens = 0;  // resolved limit on generated tokens
  sampling::SamplingParams params;
  uint64_t seed = 0;
  std::string cache_salt;
  // Speculative decoding: tokens proposed to follow `tokens`, verified by the next step that
  // schedules this sequence's last token (they join its batch; see speculative_step.h).
  // Always a guess about the current `tokens`: cleared whenever tokens change.
  std::vector<int32_t> draft_tokens;

  RequestState state = RequestState::kWaiting;
  FinishReason finish_reason = FinishReason::kNone;
  int64_t num_cached_prompt_tokens = -1;  // set at first admission
  int num_preemptions = 0;
  std::chrono::steady_clock::time_point add_time;  // its arrival (EngineRequest::arrival)
  std::chrono::steady_clock::time_point first_scheduled_time;  // set with num_cached_prompt_tokens
  TtftBreakdown ttft;           // filled step by step until the first token (Scheduler)
  int64_t deferred_step = -1;   // scheduler: the last step it waited for in-flight prefix blocks
  int64_t scheduled_step = -1;  // scheduler: the last step that ran some of its tokens

  // Output side: detokenizer state, stop strings, not-yet-delivered increments.
  std::unique_ptr<TextDecoder> decoder;
  StopStringMatcher stop_matcher{{}};
  std::string resumed_text;  // a continuation's, until its first output carries it
  // Constrained output: every output token so far accepted (engine/constrained_decoding.h).
  std::unique_ptr<grammar::TokenMatcher> matcher;  // null: unconstrained

  // KV export (prefill/decode disaggregation, engine/pd_export.h), choice 0 only: the sink,
  // the prompt blocks handed to it so far, their prefix-cache keys and the pool blocks pinned
  // for it.
  std::shared_ptr<KvExportSink> kv_export;
  int64_t kv_exported_blocks = 0;
  std::vector<kv::BlockHash> kv_export_hashes;
  std::vector<int32_t> kv_export_pins;

  int64_t num_output_tokens() const {
    return static_cast<int64_t>(tokens.size()) - num_prompt_tokens;
  }
  bool prompt_computed() const { return num_computed_tokens >= num_prompt_tokens; }
};

}  // namespace tachyon::engine
