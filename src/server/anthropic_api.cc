#include "server/anthropic_api.h"

#include "server/chat_mapping.h"
#include "server/json_limits.h"
#include "server/sse.h"

namespace tachyon::server {

using nlohmann::json;
using nlohmann::ordered_json;

bool IsAnthropicPath(std::string_view path) {
  constexpr std::string_view kPrefix = "/v1/messages";
  return path.substr(0, kPrefix.size()) == kPrefix &&
         (path.size() == kPrefix.size() || path[kPrefix.size()] == '/');
}

namespace {

const char* AnthropicErrorType(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

json ErrorJson(const ApiError& error) {
  std::string message = error.message;
  // Anthropic's errors have no param field: name it in the message.
  if (!error.param.empty() && message.find(error.param) == std::string::npos) {
    message = error.param + ": " + message;
  }
  return {{"type", "error"},
          {"error", {{"type", AnthropicErrorType(error.http_status)}, {"message", message}}}};
}

ApiError Invalid(const std::string& param, const std::string& what) {
  return InvalidParam(param, "Invalid value for '" + param + "': " + what);
}

std::optional<ApiError> CheckRefused(const ordered_json& body) {
  if (const ordered_json* t = Field(body, "thinking");
      t != nullptr && !(t->is_object() && Field(*t, "type") && (*t)["type"] == "disabled")) {
    return UnsupportedField("thinking", "this server has no extended thinking.");
  }
  if (const ordered_json* o = Field(body, "output_config")) {
    if (!o->is_object()) return Invalid("output_config", "expected an object.");
    if (Field(*o, "format") != nullptr) {
      return UnsupportedField("output_config.format",
                              "this server has no structured (JSON) output yet.");
    }
    if (Field(*o, "effort") != nullptr) {
      return UnsupportedField("output_config.effort", "this server has no effort control.");
    }
  }
  for (const char* name : {"container", "mcp_servers"}) {
    if (Field(body, name) != nullptr) {
      return UnsupportedField(name, "this server runs no tools of its own.");
    }
  }
  return std::nullopt;
}

// One message of `messages` in chat form, appended to `out` (a user message with tool results
// becomes tool messages, then a user message with its text).
std::optional<ApiError> AppendMessage(const ordered_json& m, size_t i, ordered_json& out) {
  const std::string where = "messages[" + std::to_string(i) + "]";
  if (!m.is_object()) return Invalid(where, "expected an object.");
  const ordered_json* role = Field(m, "role");
  if (role == nullptr || (*role != "user" && *role != "assistant")) {
    return Invalid(where + ".role", "expected 'user' or 'assistant'.");
  }
  const bool user = *role == "user";
  const ordered_json* content = Field(m, "content");
  if (content == nullptr) return Invalid(where + ".content", "required.");
  if (content->is_string()) {
    out.push_back({{"role", *role}, {"content", *content}});
    return std::nullopt;
  }
  if (!content->is_array()) {
    return Invalid(where + ".content", "expected a string or an array of content blocks.");
  }
  std::string text;
  bool has_text = false;
  ordered_json calls = ordered_json::array();
  for (size_t j = 0; j < content->size(); ++j) {
    const ordered_json& block = (*content)[j];
    const std::string at = where + ".content[" + std::to_string(j) + "]";
    const ordered_json* type = Field(block, "type");
    if (type == nullptr || !type->is_string()) return Invalid(at + ".type", "expected a string.");
    if (*type == "text") {
      const ordered_json* t = Field(block, "text");
      if (t == nullptr || !t->is_string()) return Invalid(at + ".text", "expected a string.");
      if (has_text) text += "\n";
      text += t->get<std::string>();
      has_text = true;
    } else if (*type == "tool_use" && !user) {
      const ordered_json* id = Field(block, "id");
      const ordered_json* name = Field(block, "name");
      const ordered_json* input = Field(block, "input");
      if (id == nullptr || !id->is_string()) return Invalid(at + ".id", "expected a string.");
      if (name == nullptr || !name->is_string()) return Invalid(at + ".name", "expected a string.");
      if (input == nullptr || !input->is_object()) {
        return Invalid(at + ".input", "expected an object.");
      }
      calls.push_back({{"id", *id},
                       {"type", "function"},
                       {"function", {{"name", *name}, {"arguments", input->dump()}}}});
    } else if (*type == "tool_result" && user) {
      const ordered_json* id = Field(block, "tool_use_id");
      if (id == nullptr || !id->is_string()) {
        return Invalid(at + ".tool_use_id", "expected a string.");
      }
      std::string result;
      if (const ordered_json* c = Field(block, "content")) {
        auto r = TextContent(*c, {"text"}, at + ".content");
        if (!r.ok()) return r.error();
        result = std::move(r.value());
      }
      if (const ordered_json* e = Field(block, "is_error"); e != nullptr && !e->is_boolean()) {
        return Invalid(at + ".is_error", "expected a boolean.");
      }
      out.push_back({{"role", "tool"}, {"tool_call_id", *id}, {"content", std::move(result)}});
    } else {
      return InvalidParam(at + ".type", "Content blocks of type '" + type->get<std::string>() +
                                            "' are not supported in " + role->get<std::string>() +
                                            " messages; this server takes text" +
                                            (user ? ", tool_result" : ", tool_use") + " blocks.");
    }
  }
  if (user) {
    if (has_text || out.empty() || out.back()["role"] != "tool") {
      out.push_back({{"role", "user"}, {"content", std::move(text)}});
    }
    return std::nullopt;
  }
  ordered_json reply = {{"role", "assistant"}, {"content", std::move(text)}};
  if (!calls.empty()) reply["tool_calls"] = std::move(calls);
  out.push_back(std::move(reply));
  return std::nullopt;
}

std::optional<ApiError> ConvertTools(const ordered_json& body, ordered_json& chat) {
  if (const ordered_json* tools = Field(body, "tools")) {
    if (!tools->is_array()) return Invalid("tools", "expected an array.");
    ordered_json out = ordered_json::array();
    for (size_t i = 0; i < tools->size(); ++i) {
      const ordered_json& t = (*tools)[i];
      const std::string where = "tools[" + std::to_string(i) + "]";
      if (!t.is_object()) return Invalid(where, "expected an object.");
      if (const ordered_json* type = Field(t, "type"); type != nullptr && *type != "custom") {
        return InvalidParam(where + ".type", "Tools of type " + type->dump() +
                                                 " are not supported: this server runs no "
                                                 "tools of its own; give client tools.");
      }
      const ordered_json* name = Field(t, "name");
      if (name == nullptr || !name->is_string())
        return Invalid(where + ".name", "expected a string.");
      const ordered_json* description = Field(t, "description");
      if (description != nullptr && !description->is_string()) {
        return Invalid(where + ".description", "expected a string.");
      }
      const ordered_json* schema = Field(t, "input_schema");
      if (schema != nullptr && !schema->is_object()) {
        return Invalid(where + ".input_schema", "expected an object (a JSON Schema).");
      }
      ordered_json function = {{"name", *name}};
      CopyFields(t, {"description"}, function);
      if (schema != nullptr) function["parameters"] = *schema;
      out.push_back({{"type", "function"}, {"function", std::move(function)}});
    }
    chat["tools"] = std::move(out);
  }
  if (const ordered_json* choice = Field(body, "tool_choice")) {
    const ordered_json* type = Field(*choice, "type");
    if (type == nullptr || !type->is_string()) {
      return Invalid("tool_choice", "expected an object with a 'type'.");
    }
    if (const ordered_json* name = Field(*choice, "name"); name != nullptr && !name->is_string()) {
      return Invalid("tool_choice.name", "expected a string.");
    }
    if (*type == "auto") {
      chat["tool_choice"] = "auto";
    } else if (*type == "any") {
      chat["tool_choice"] = "required";
    } else if (*type == "none") {
      chat["tool_choice"] = "none";
    } else if (*type == "tool") {
      const ordered_json* name = Field(*choice, "name");
      if (name == nullptr || !name->is_string()) {
        return Invalid("tool_choice.name", "expected a string.");
      }
      chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", *name}}}};
    } else {
      return Invalid("tool_choice.type", "expected 'auto', 'any', 'tool' or 'none'.");
    }
    if (const ordered_json* d = Field(*choice, "disable_parallel_tool_use")) {
      if (!d->is_boolean())
        return Invalid("tool_choice.disable_parallel_tool_use", "expected a boolean.");
      if (d->get<bool>()) chat["parallel_tool_calls"] = false;
    }
  }
  return std::nullopt;
}

}  // namespace

std::string AnthropicErrorBody(const ApiError& error) {
  return DumpJson(ErrorJson(error));
}

ApiResult<ordered_json> ParseMessagesRequest(const ordered_json& body, bool count_tokens) {
  if (auto e = CheckRefused(body)) return *e;
  ordered_json chat = ordered_json::object();
  CopyFields(body, {"model"}, chat);
  if (!count_tokens) {
    const ordered_json* max_tokens = Field(body, "max_tokens");
    if (max_tokens == nullptr) return InvalidParam("max_tokens", "'max_tokens' is required.");
    chat["max_tokens"] = *max_tokens;
    if (const ordered_json* t = Field(body, "temperature")) {
      if (!t->is_number() || t->get<double>() < 0 || t->get<double>() > 1) {
        return Invalid("temperature", "must be a number between 0 and 1.");
      }
      chat["temperature"] = *t;
    }
    CopyFields(body, {"top_p", "top_k", "stream"}, chat);
    CopyFields(body, kSamplingExtensions, chat);
    if (const ordered_json* stop = Field(body, "stop_sequences")) {
      if (!stop->is_array()) return Invalid("stop_sequences", "expected an array of strings.");
      chat["stop"] = *stop;
    }
    if (const ordered_json* m = Field(body, "metadata"); m != nullptr && !m->is_object()) {
      return Invalid("metadata", "expected an object.");
    }
  }
  ordered_json messages = ordered_json::array();
  if (const ordered_json* system = Field(body, "system")) {
    auto text = TextContent(*system, {"text"}, "system");
    if (!text.ok()) return text.error();
    messages.push_back({{"role", "system"}, {"content", std::move(text.value())}});
  }
  const ordered_json* input = Field(body, "messages");
  if (input == nullptr) return InvalidParam("messages", "'messages' is required.");
  if (!input->is_array() || input->empty())
    return Invalid("messages", "expected a non-empty array.");
  for (size_t i = 0; i < input->size(); ++i) {
    if (auto e = AppendMessage((*input)[i], i, messages)) return *e;
  }
  if (messages.back()["role"] == "assistant") {
    return InvalidParam("messages",
                        "'messages' ends with an assistant message: continuing a prefilled "
                        "assistant turn is not supported; end with a user message.");
  }
  if (auto e = ConvertTools(body, chat)) return *e;
  chat["messages"] = std::move(messages);
  return chat;
}

void ToMessagesParam(ApiError& error) {
  RenameParam(error, "stop", "stop_sequences");
}

// --- AnthropicAdapter ---------------------------------------------------------------------------

void AnthropicAdapter::Begin(const JobSpec& spec) {
  id_ = spec.id;
  model_ = spec.model;
  input_tokens_ = spec.prompts.empty() ? 0 : static_cast<int>(spec.prompts[0].ids.size());
}

json AnthropicAdapter::Usage(const json& u) const {
  // Anthropic counts prompt tokens read from the cache apart from input_tokens.
  int prompt = input_tokens_, cached = 0, output = 0;
  if (u.is_object()) {
    prompt = u.value("prompt_tokens", prompt);
    output = u.value("completion_tokens", 0);
    if (u.contains("prompt_tokens_details")) {
      cached = u["prompt_tokens_details"].value("cached_tokens", 0);
    }
  }
  return {{"input_tokens", prompt - cached},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", cached},
          {"output_tokens", output}};
}

namespace {

const char* StopReason(const std::string& finish_reason) {
  if (finish_reason == "length") return "max_tokens";
  if (finish_reason == "tool_calls") return "tool_use";
  return "end_turn";
}

}  // namespace

bool AnthropicAdapter::Emit(const char* type, json event, ResponseChannel& channel) {
  event["type"] = type;
  return channel.Write(SseEvent(type, event));
}

bool AnthropicAdapter::StopBlock(ResponseChannel& channel) {
  if (block_ < 0) return true;
  const int index = block_;
  block_ = -1;
  text_open_ = false;
  return Emit("content_block_stop", {{"index", index}}, channel);
}

bool AnthropicAdapter::Chunk(const json& chunk, ResponseChannel& channel) {
  const json& choices = chunk["choices"];
  if (choices.empty()) {  // the usage chunk
    usage_ = chunk["usage"];
    return true;
  }
  const json& choice = choices[0];
  const json& delta = choice["delta"];
  bool ok = true;
  if (delta.contains("role")) {
    json message = {{"id", id_},
                    {"type", "message"},
                    {"role", "assistant"},
                    {"model", model_},
                    {"content", json::array()},
                    {"stop_reason", nullptr},
                    {"stop_sequence", nullptr},
                    {"usage", {{"input_tokens", input_tokens_}, {"output_tokens", 0}}}};
    ok = Emit("message_start", {{"message", std::move(message)}}, channel) &&
         Emit("ping", json::object(), channel);
  } else if (delta.contains("content") && delta["content"].is_string() &&
             !delta["content"].get_ref<const std::string&>().empty()) {
    if (!text_open_) {
      ok = StopBlock(channel);
      block_ = next_block_++;
      text_open_ = true;
      ok =
          Emit("content_block_start",
               {{"index", block_}, {"content_block", {{"type", "text"}, {"text", ""}}}}, channel) &&
          ok;
    }
    ok = Emit("content_block_delta",
              {{"index", block_}, {"delta", {{"type", "text_delta"}, {"text", delta["content"]}}}},
              channel) &&
         ok;
  }
  if (delta.contains("tool_calls")) {
    for (const json& tc : delta["tool_calls"]) {
      if (tc.contains("id")) {  // a call's head: id and name
        ok = StopBlock(channel) && ok;
        block_ = next_block_++;
        ok = Emit("content_block_start",
                  {{"index", block_},
                   {"content_block",
                    {{"type", "tool_use"},
                     {"id", tc["id"]},
                     {"name", tc["function"]["name"]},
                     {"input", json::object()}}}},
                  channel) &&
             ok;
      } else {  // the call's arguments, whole
        ok = Emit("content_block_delta",
                  {{"index", block_},
                   {"delta",
                    {{"type", "input_json_delta"}, {"partial_json", tc["function"]["arguments"]}}}},
                  channel) &&
             StopBlock(channel) && ok;
      }
    }
  }
  if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
    finish_reason_ = choice["finish_reason"].get<std::string>();
  }
  return ok;
}

void AnthropicAdapter::End(ResponseChannel& channel) {
  StopBlock(channel);
  if (finish_reason_ == "abort") {
    return Error(ApiErrorFromStatus(Unavailable("The server is shutting down; the message was "
                                                "aborted.")),
                 true, channel);
  }
  json usage = Usage(usage_);
  Emit("message_delta",
       {{"delta", {{"stop_reason", StopReason(finish_reason_)}, {"stop_sequence", nullptr}}},
        {"usage", std::move(usage)}},
       channel);
  Emit("message_stop", json::object(), channel);
  channel.EndStream();
}

void AnthropicAdapter::Complete(const json& completion, ResponseChannel& channel) {
  const json& choice = completion["choices"][0];
  const json& message = choice["message"];
  finish_reason_ = choice.value("finish_reason", "stop");
  if (finish_reason_ == "abort") {
    return Error(ApiErrorFromStatus(Unavailable("The server is shutting down.")), false, channel);
  }
  json content = json::array();
  if (message["content"].is_string() && !message["content"].get_ref<const std::string&>().empty()) {
    content.push_back({{"type", "text"}, {"text", message["content"]}});
  }
  if (message.contains("tool_calls")) {
    for (const json& call : message["tool_calls"]) {
      // The tool-call parser only returns arguments that are a JSON object.
      auto input = ParseBoundedJson(call["function"]["arguments"].get<std::string>());
      content.push_back({{"type", "tool_use"},
                         {"id", call["id"]},
                         {"name", call["function"]["name"]},
                         {"input", input ? *input : json::object()}});
    }
  }
  json body = {{"id", id_},
               {"type", "message"},
               {"role", "assistant"},
               {"model", model_},
               {"content", std::move(content)},
               {"stop_reason", StopReason(finish_reason_)},
               {"stop_sequence", nullptr},
               {"usage", Usage(completion["usage"])}};
  HttpResponse r;
  r.body = DumpJson(body);
  channel.Respond(std::move(r));
}

void AnthropicAdapter::Error(const ApiError& error, bool stream_started, ResponseChannel& channel) {
  ApiError e = error;
  ToMessagesParam(e);
  if (!stream_started) return channel.Respond(ErrorResponse(e, AnthropicErrorBody(e)));
  json event = ErrorJson(e);
  Emit("error", std::move(event), channel);
  channel.EndStream();
}

}  // namespace tachyon::server
