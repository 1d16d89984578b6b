// Anthropic's Messages API (POST /v1/messages, POST /v1/messages/count_tokens), text only,
// mapped onto the chat path: the request becomes a /v1/chat/completions body (OpenAiApi::
// StartChat runs it: validation, chat template, tool calls, sampling), and AnthropicAdapter turns
// the chat job's output into a Message or Anthropic's event stream.
//
//   model, max_tokens (required), system (a string or text blocks), messages (user / assistant;
//   content a string or blocks: text, tool_use, tool_result), stop_sequences, temperature [0, 1],
//   top_p, top_k, tools ({"name", "description", "input_schema"}), tool_choice (auto / any /
//   tool / none, disable_parallel_tool_use), stream, metadata (ignored); the sampling extensions
//
// Stream events (SSE "event: <type>"): message_start, ping, per content block
// content_block_start, content_block_delta (text_delta, or input_json_delta for a tool_use
// block), content_block_stop; then message_delta (stop_reason, usage.output_tokens) and
// message_stop; or an "error" event. Errors on these routes have Anthropic's shape:
// {"type": "error", "error": {"type", "message"}}.
// Parsing is pure; an AnthropicAdapter serves one request (executor only, see ChatOutputAdapter).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/generation_job.h"
#include "server/protocol.h"

namespace tachyon::server {

// True for the paths whose errors take Anthropic's shape (/v1/messages and below).
bool IsAnthropicPath(std::string_view path);

// {"type": "error", "error": {"type": <Anthropic's type for the status>, "message"}}.
std::string AnthropicErrorBody(const ApiError& error);

// The /v1/chat/completions body for a Messages request. `count_tokens`: the body of
// /v1/messages/count_tokens (no max_tokens, no sampling). Errors name the Messages field.
ApiResult<nlohmann::ordered_json> ParseMessagesRequest(const nlohmann::ordered_json& body,
                                                       bool count_tokens = false);

// Renames the parameter of an error from the chat path to the Messages field it came from.
void ToMessagesParam(ApiError& error);

class AnthropicAdapter : public ChatOutputAdapter {
 public:
  void Begin(const JobSpec& spec) override;
  bool Chunk(const nlohmann::json& chunk, ResponseChannel& channel) override;
  void End(ResponseChannel& channel) override;
  void Complete(const nlohmann::json& completion, ResponseChannel& channel) override;
  void Error(const ApiError& error, bool stream_started, ResponseChannel& channel) override;

 private:
  bool Emit(const char* type, nlohmann::json event, ResponseChannel& channel);
  bool StopBlock(ResponseChannel& channel);
  nlohmann::json Usage(const nlohmann::json& chat_usage) const;

  std::string id_;
  std::string model_;
  int input_tokens_ = 0;
  int block_ = -1;          // index of the open content block; -1: none open
  int next_block_ = 0;      // index of the next block
  bool text_open_ = false;  // the open block is a text block
  std::string finish_reason_ = "stop";
  nlohmann::json usage_ = nullptr;
};

}  // namespace tachyon::server
