// GenerationBackend: the narrow seam between the HTTP/OpenAI layers of server/ and whatever
// generates tokens (the real engine adapter, or FakeBackend in tests).
//
// The server parses and validates a request, renders the chat template and tokenizes the prompt
// through the backend, then Submit()s one GenerationRequest per prompt; a request asks for n
// choices (n > 1: sequences forked from the prompt, sharing its KV blocks). The backend reports
// progress through the OutputCallback: per choice (GenerationChunk::index in [0, n)), zero or
// more chunks with new tokens and text, then exactly one chunk with `finished` set (or with a
// non-OK `error`). After the final chunk of every choice the callback is never called again and
// is destroyed.
//
// Thread-safety: every method may be called from any thread concurrently. The callback runs
// on a backend-owned thread (possibly the engine loop): it must be cheap and must never block
// (the server only queues the chunk and hands it to an io thread).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace tachyon::server {

// Per-request sampling and stopping options (already validated by the server).
struct SamplingOptions {
  int max_tokens = 16;       // >= 1
  float temperature = 1.0f;  // 0 = greedy
  float top_p = 1.0f;
  int top_k = 0;  // <= 0: disabled
  float min_p = 0.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  std::map<int32_t, float> logit_bias;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;  // stop strings; the matched string is not part of the text
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int priority = 0;   // lower runs first under --scheduling-policy priority (as vLLM)
  int logprobs = -1;  // -1: none; k >= 0: logprob of the sampled token plus the top k
};

struct GenerationRequest {
  std::string request_id;
  std::vector<int32_t> prompt_ids;
  SamplingOptions sampling;
  int n = 1;  // choices; choice i samples with seed + i when a seed is set
};

enum class FinishReason { kStop, kLength, kAbort };
std::string_view FinishReasonName(FinishReason reason);  // "stop", "length", "abort"

struct TopLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
};

// The logprob of one generated token.
struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
  std::vector<TopLogprob> top;  // best first
};

// One progress report for one choice of a request.
struct GenerationChunk {
  int index = 0;                   // the choice, in [0, n)
  std::vector<int32_t> token_ids;  // new tokens since the previous chunk
  std::string text;  // new text: always valid, complete UTF-8 (partial sequences held back)
  std::vector<TokenLogprob> logprobs;  // one per token id when logprobs were requested
  bool finished = false;               // this choice is complete
  FinishReason finish_reason = FinishReason::kStop;
  Status error;  // non-OK: the choice failed; implies finished
  // Filled on each choice's final chunk (the request's prompt, shared by its choices).
  int prompt_tokens = 0;
  int cached_tokens = 0;      // prompt tokens served from the prefix cache
  double queue_seconds = -1;  // time from submission to first schedule; < 0 if unknown
};

using OutputCallback = std::function<void(GenerationChunk chunk)>;

// Snapshot of the backend's gauges and counters for /metrics.
struct BackendMetrics {
  int64_t num_running = 0;
  int64_t num_waiting = 0;
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_used = 0;
  int64_t prefix_cache_queries = 0;  // prompt tokens looked up in the prefix cache
  int64_t prefix_cache_hits = 0;     // of those, tokens found
  int64_t prompt_tokens_total = 0;
  int64_t generation_tokens_total = 0;
  int64_t preemptions_total = 0;
};

struct ModelInfo {
  std::string name;  // default served model name
  int context_length = 0;
  int vocab_size = 0;
  bool has_chat_template = false;
  int max_live_sequences = 0;  // > 0: a request with more choices than this can never be taken
};

class GenerationBackend {
 public:
  virtual ~GenerationBackend() = default;

  virtual const ModelInfo& Info() const = 0;
  // True when the model is loaded and the engine loop is alive.
  virtual bool Ready() const = 0;

  virtual Result<std::vector<int32_t>> Tokenize(std::string_view text, bool add_special) const = 0;
  // Decodes ids to text (invalid UTF-8 becomes U+FFFD). Ids out of range are InvalidArgument.
  virtual Result<std::string> Detokenize(std::span<const int32_t> ids) const = 0;
  // The raw bytes of one token's piece (may be a partial UTF-8 sequence).
  virtual std::string TokenBytes(int32_t id) const = 0;

  // Renders the conversation with the model's chat template. `context` holds `messages`,
  // `tools` (or null) and `add_generation_prompt`, plus any extra template variables.
  virtual Result<std::string> ApplyChatTemplate(const nlohmann::ordered_json& context) const = 0;

  // Queues a request (all n choices). Errors: ResourceExhausted when the queue is full,
  // Unavailable when shutting down, InvalidArgument for a request the engine cannot take. On
  // error the callback is never called. On success returns a handle for Cancel().
  virtual Result<uint64_t> Submit(GenerationRequest request, OutputCallback callback) = 0;
  // Aborts a request: its KV blocks are freed promptly and every unfinished choice receives a
  // final chunk with FinishReason::kAbort. Unknown handles are ignored.
  virtual void Cancel(uint64_t handle) = 0;

  virtual BackendMetrics Metrics() const = 0;
};

}  // namespace tachyon::server
