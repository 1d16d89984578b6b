// OpenAI protocol: request types for /v1/completions and /v1/chat/completions, their parsing and
// validation from JSON, and the OpenAI error shape.
//
// Parsing follows OpenAI: unknown fields are ignored, null means "not set", a field of the wrong
// type or out of range is an invalid_request_error (400) naming the parameter.
// All functions are pure and thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/sampling_defaults.h"
#include "grammar/grammar.h"
#include "sampling/sampling_params.h"
#include "server/backend.h"
#include "server/http.h"
#include "util/status.h"

namespace tachyon::server {

// An error as the client sees it: {"error": {"message", "type", "param", "code"}}.
struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;      // "" -> null
  std::string code;       // "" -> null
  int retry_after_s = 0;  // > 0: send a Retry-After header
  std::string allow;      // 405: the path's methods (the Allow header)

  nlohmann::json ToJson() const;
  std::string Body() const;  // ToJson() serialized
};

ApiError InvalidParam(std::string param, std::string message);
// 400 on `field`: "'FIELD' is not supported: WHY".
ApiError UnsupportedField(const std::string& field, const std::string& why);
// The HTTP answer for `error` with `body` (the error in the route's shape): its status, and its
// Retry-After / Allow headers.
HttpResponse ErrorResponse(const ApiError& error, std::string body);
// Maps a Status onto the error shape (code -> HTTP status and error type).
ApiError ApiErrorFromStatus(const Status& status);

// Value-or-ApiError.
template <typename T>
class ApiResult {
 public:
  ApiResult(T value) : v_(std::move(value)) {}         // NOLINT
  ApiResult(ApiError error) : v_(std::move(error)) {}  // NOLINT
  bool ok() const { return v_.index() == 0; }
  T& value() { return std::get<0>(v_); }
  const ApiError& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, ApiError> v_;
};

// Values the server uses for parameters a request leaves unset (OpenAI's defaults, or the
// model's generation_config.json): the engine's own struct.
using SamplingDefaults = engine::SamplingDefaults;

// Options shared by both endpoints.
// An output constraint (response_format, structured_outputs, grammar, json_schema; see
// server/constraint_fields.h) and the field it came from, which its compile errors name.
struct RequestedConstraint {
  grammar::ConstraintSpec spec;
  std::string param;
  // "complete_within_max_tokens" in response_format / structured_outputs; unset: the server's
  // default (ApiOptions::complete_within_max_tokens).
  std::optional<bool> complete_within_max_tokens;
};

struct CommonParams {
  std::string model;
  // The engine's sampling parameters (n is kept in `n` below until submission); max_tokens is
  // filled in by the server when unset.
  sampling::SamplingParams sampling;
  bool max_tokens_set = false;  // else the server fills in the rest of the context
  int priority = 0;             // lower runs first under --scheduling-policy priority (as vLLM)
  std::string cache_salt;       // prefix-cache namespace: only requests with equal salts share
  int n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::string user;
  // Extensions for resuming a stream on another replica (tachyon route's migration):
  // resume_token_ids are the output tokens of the (single) choice already delivered; the
  // server appends them to the prompt and generates what follows, with sampling.output_offset
  // = their count and max_tokens / min_tokens counting them (both already reduced here); the
  // engine replays them through the output constraint, the decoder and the stop strings, and
  // the penalties count them as output (engine/engine.h, Engine::Add).
  std::vector<int32_t> resume_token_ids;
  bool return_token_ids = false;  // stream chunks carry each choice's new "token_ids"
  std::optional<RequestedConstraint> constraint;  // none: unconstrained
  // kv_transfer_params {"address", "transfer_id"}: run as a prefill for a decode replica (a
  // router's extension, docs/pd.md).
  KvTransferTarget kv_transfer;
};

// One prompt: text (tokenized by the server) or token ids.
using PromptInput = std::variant<std::string, std::vector<int32_t>>;

struct CompletionRequest {
  CommonParams common;
  std::vector<PromptInput> prompts;  // at least one
  bool echo = false;
};

// tool_choice: "none", "auto", "required" or {"type": "function", "function": {"name": ...}}.
struct ToolChoice {
  enum class Mode { kNone, kAuto, kRequired, kFunction };
  Mode mode = Mode::kAuto;
  std::string function;  // kFunction: the named function (one of the request's tools)
};

struct ChatRequest {
  CommonParams common;
  std::vector<std::string> tool_names;  // names of the request's tools (empty: no tools)
  // Per tool: its function's parameters JSON Schema as JSON text ("" when it has none).
  std::vector<std::string> tool_parameters;
  ToolChoice tool_choice;
  bool parallel_tool_calls = true;
  // Template context: messages (content flattened to strings), tools (or null),
  // tool_choice, add_generation_prompt, plus chat_template_kwargs entries. Ordered: templates
  // print dicts (tojson) in the client's key order.
  nlohmann::ordered_json template_context;
  bool logprobs = false;
  int top_logprobs = 0;
};

inline constexpr int kMaxN = 16;
inline constexpr int kMaxLogprobs = 20;
inline constexpr int kMaxStopStrings = 16;
// A stop string's length: the engine holds back output that may start one and re-checks the
// held text's suffixes at every token (quadratic in this length).
inline constexpr size_t kMaxStopStringBytes = 4096;
inline constexpr int kMaxStopTokenIds = 64;
inline constexpr size_t kMaxCacheSaltBytes = 1024;
inline constexpr size_t kMaxResumeTokens = size_t{1} << 20;

// `vocab_size` bounds token ids in prompts and logit_bias keys.
// Ordered bodies: a JSON Schema's properties keep the client's order.
ApiResult<CompletionRequest> ParseCompletionRequest(const nlohmann::ordered_json& body,
                                                    int vocab_size,
                                                    const SamplingDefaults& defaults = {});
ApiResult<ChatRequest> ParseChatRequest(const nlohmann::ordered_json& body, int vocab_size,
                                        const SamplingDefaults& defaults = {});

// Parses shared fields; `is_chat` selects max_completion_tokens and the logprobs meaning.
ApiResult<CommonParams> ParseCommonParams(const nlohmann::json& body, int vocab_size, bool is_chat,
                                          const SamplingDefaults& defaults = {});

// Request bodies are parsed by ParseJsonBody / ParseOrderedJsonBody (server/json_limits.h),
// which bound their depth and size before building them.

// Serializes JSON; invalid UTF-8 in strings becomes U+FFFD instead of throwing.
std::string DumpJson(const nlohmann::json& j);

}  // namespace tachyon::server
