// The OpenAI Responses API (POST /v1/responses), text only, mapped onto the chat path: the
// request becomes a /v1/chat/completions body (OpenAiApi::StartChat runs it: validation, chat
// template, tool calls, sampling), and ResponsesAdapter turns the chat job's output into a
// Response object or the Responses event stream.
//
//   input                  a string (one user message) or a list of items: messages
//                          ({"role", "content"}, content a string or input_text / output_text
//                          parts), function_call items and function_call_output items
//   instructions           a system message before the input (not carried to later turns)
//   previous_response_id   continues a stored conversation (server/response_store.h)
//   max_output_tokens, temperature, top_p, tools (function tools), tool_choice,
//   parallel_tool_calls, stream, store, text.format {"type": "text"}; the sampling extensions
//
// Stream events (each with "type" and "sequence_number", as SSE "event: <type>"):
// response.created, response.in_progress, then per output item response.output_item.added,
// for a message response.content_part.added, response.output_text.delta..., response.output_text
// .done, response.content_part.done, for a function call response.function_call_arguments.delta
// and .done, then response.output_item.done; last response.completed (response.incomplete when
// max_output_tokens cut the reply), or an "error" event.
// Parsing is pure; a ResponsesAdapter serves one request (executor only, see ChatOutputAdapter).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/generation_job.h"
#include "server/protocol.h"
#include "server/response_store.h"

namespace tachyon::server {

struct ResponsesRequest {
  nlohmann::ordered_json chat_body;  // the /v1/chat/completions body the request runs as
  // The conversation as chat messages, this turn's input included, instructions excluded: what
  // the store keeps for a later previous_response_id (the reply is appended then).
  nlohmann::ordered_json history;
  // The request fields a Response object echoes (instructions, tools, temperature, ...).
  nlohmann::ordered_json echo;
  bool store = true;
};

// Errors name the Responses field ("input[1].content"). `store` resolves previous_response_id.
ApiResult<ResponsesRequest> ParseResponsesRequest(const nlohmann::ordered_json& body,
                                                  ResponseStore& store);

// Renames the parameter of an error from the chat path to the Responses field it came from
// (messages -> input, max_completion_tokens -> max_output_tokens).
void ToResponsesParam(ApiError& error);

class ResponsesAdapter : public ChatOutputAdapter {
 public:
  // `store` must outlive the adapter; the conversation is stored there when request.store.
  ResponsesAdapter(ResponsesRequest request, ResponseStore* store);

  void Begin(const JobSpec& spec) override;
  bool Chunk(const nlohmann::json& chunk, ResponseChannel& channel) override;
  void End(ResponseChannel& channel) override;
  void Complete(const nlohmann::json& completion, ResponseChannel& channel) override;
  void Error(const ApiError& error, bool stream_started, ResponseChannel& channel) override;

 private:
  // The Response object with this status, output and usage (null usage: not yet known).
  nlohmann::json ResponseJson(const char* status, const nlohmann::json& usage) const;
  bool Emit(const char* type, nlohmann::json event, ResponseChannel& channel);
  bool OpenMessage(ResponseChannel& channel);
  bool CloseMessage(ResponseChannel& channel);
  void SetFinish(const std::string& finish_reason);
  void Store(const std::string& text, const nlohmann::json& tool_calls);
  static nlohmann::json Usage(const nlohmann::json& chat_usage);

  ResponsesRequest request_;
  ResponseStore* store_;
  std::string id_;
  std::string model_;
  int64_t created_ = 0;
  int sequence_ = 0;
  // Output items so far; the open message item (streaming) is output_[message_index_].
  nlohmann::json output_ = nlohmann::json::array();
  int message_index_ = -1;
  std::string text_;                                     // the open message's text
  nlohmann::json tool_calls_ = nlohmann::json::array();  // chat-form calls, for the store
  std::string all_text_;
  std::string status_ = "completed";
  nlohmann::json incomplete_ = nullptr;
  nlohmann::json usage_ = nullptr;
  int item_counter_ = 0;
};

}  // namespace tachyon::server
