#include "server/responses_api.h"

#include "server/chat_mapping.h"
#include "server/sse.h"

namespace tachyon::server {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

// Fields that would change the answer and that this server does not implement.
std::optional<ApiError> CheckRefused(const ordered_json& body) {
  if (const ordered_json* v = Field(body, "background"); v != nullptr && *v != false) {
    return UnsupportedField("background", "responses run in the foreground only.");
  }
  for (const char* name : {"conversation", "prompt", "max_tool_calls"}) {
    if (Field(body, name) != nullptr) {
      return UnsupportedField(name,
                              std::string(name) == "max_tool_calls"
                                  ? "use 'parallel_tool_calls': false for one call."
                                  : "server-side conversations and prompt templates are not "
                                    "implemented; use 'previous_response_id' or send the input.");
    }
  }
  if (const ordered_json* v = Field(body, "reasoning");
      v != nullptr && (!v->is_object() || Field(*v, "effort") || Field(*v, "summary"))) {
    return UnsupportedField("reasoning", "this server has no reasoning controls.");
  }
  if (const ordered_json* v = Field(body, "include");
      v != nullptr && !(v->is_array() && v->empty())) {
    return UnsupportedField("include",
                            "no extra output data (logprobs, sources, ...) is available.");
  }
  if (const ordered_json* v = Field(body, "top_logprobs"); v != nullptr && *v != 0) {
    return UnsupportedField("top_logprobs",
                            "logprobs are not available on /v1/responses; use "
                            "/v1/chat/completions.");
  }
  if (const ordered_json* v = Field(body, "truncation"); v != nullptr && *v != "disabled") {
    return UnsupportedField("truncation",
                            "only 'disabled' is implemented (an input over the context is "
                            "a 400).");
  }
  if (const ordered_json* v = Field(body, "service_tier");
      v != nullptr && *v != "auto" && *v != "default") {
    return UnsupportedField("service_tier",
                            "this server has one service tier; use 'auto' or 'default'.");
  }
  if (const ordered_json* text = Field(body, "text")) {
    if (!text->is_object())
      return InvalidParam("text", "Invalid value for 'text': expected an object.");
    if (const ordered_json* format = Field(*text, "format")) {
      const ordered_json* type = Field(*format, "type");
      if (type == nullptr || !type->is_string()) {
        return InvalidParam("text.format",
                            "Invalid value for 'text.format': expected an "
                            "object with a 'type'.");
      }
      if (*type != "text" && *type != "json_schema" && *type != "json_object") {
        return InvalidParam("text.format",
                            "Invalid value for 'text.format.type': expected "
                            "'text', 'json_schema' or 'json_object'.");
      }
    }
    if (const ordered_json* v = Field(*text, "verbosity"); v != nullptr && *v != "medium") {
      return UnsupportedField("text.verbosity", "this server has no verbosity control.");
    }
  }
  return std::nullopt;
}

ApiError Invalid(const std::string& param, const std::string& what) {
  return InvalidParam(param, "Invalid value for '" + param + "': " + what);
}

// A required string field of an input item.
std::optional<ApiError> ItemString(const ordered_json& item, const char* name,
                                   const std::string& where, std::string& out) {
  const ordered_json* v = Field(item, name);
  if (v == nullptr || !v->is_string()) {
    return Invalid(where + "." + name, "expected a string.");
  }
  out = v->get<std::string>();
  return std::nullopt;
}

// Appends the input items to `messages` (chat form). Errors name input[i].
std::optional<ApiError> AppendInput(const ordered_json& input, ordered_json& messages) {
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input.get<std::string>()}});
    return std::nullopt;
  }
  if (!input.is_array() || input.empty()) {
    return Invalid("input", "expected a string or a non-empty array of input items.");
  }
  for (size_t i = 0; i < input.size(); ++i) {
    const ordered_json& item = input[i];
    const std::string where = "input[" + std::to_string(i) + "]";
    if (!item.is_object()) return Invalid(where, "expected an object.");
    std::string type = "message";
    if (const ordered_json* t = Field(item, "type")) {
      if (!t->is_string()) return Invalid(where + ".type", "expected a string.");
      type = t->get<std::string>();
    }
    if (type == "message") {
      const ordered_json* role = Field(item, "role");
      static const char* kRoles[] = {"user", "assistant", "system", "developer"};
      bool known = false;
      for (const char* r : kRoles) known = known || (role != nullptr && *role == r);
      if (!known) {
        return Invalid(where + ".role", "expected one of user, assistant, system, developer.");
      }
      const ordered_json* content = Field(item, "content");
      if (content == nullptr) return Invalid(where + ".content", "required.");
      auto text = TextContent(*content, {"input_text", "output_text", "text"}, where + ".content");
      if (!text.ok()) return text.error();
      messages.push_back({{"role", *role}, {"content", std::move(text.value())}});
    } else if (type == "function_call") {
      std::string call_id, name, arguments;
      if (auto e = ItemString(item, "call_id", where, call_id)) return e;
      if (auto e = ItemString(item, "name", where, name)) return e;
      if (auto e = ItemString(item, "arguments", where, arguments)) return e;
      ordered_json call = {{"id", call_id},
                           {"type", "function"},
                           {"function", {{"name", name}, {"arguments", arguments}}}};
      // Calls right after an assistant message belong to it (one chat turn).
      if (messages.empty() || messages.back()["role"] != "assistant") {
        messages.push_back({{"role", "assistant"}, {"content", ""}});
      }
      messages.back()["tool_calls"].push_back(std::move(call));
    } else if (type == "function_call_output") {
      std::string call_id;
      if (auto e = ItemString(item, "call_id", where, call_id)) return e;
      const ordered_json* output = Field(item, "output");
      if (output == nullptr) return Invalid(where + ".output", "required.");
      auto text = TextContent(*output, {"input_text", "output_text", "text"}, where + ".output");
      if (!text.ok()) return text.error();
      messages.push_back(
          {{"role", "tool"}, {"tool_call_id", call_id}, {"content", std::move(text.value())}});
    } else {
      return InvalidParam(where + ".type", "Input items of type '" + type +
                                               "' are not supported; use messages, "
                                               "function_call and function_call_output items.");
    }
  }
  return std::nullopt;
}

// Responses tools ({"type": "function", "name", "description", "parameters", "strict"}) in the
// chat form.
std::optional<ApiError> ConvertTools(const ordered_json& body, ordered_json& chat) {
  const ordered_json* tools = Field(body, "tools");
  if (tools == nullptr) return std::nullopt;
  if (!tools->is_array()) return Invalid("tools", "expected an array.");
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < tools->size(); ++i) {
    const ordered_json& t = (*tools)[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    const ordered_json* type = Field(t, "type");
    if (type == nullptr || !type->is_string()) return Invalid(where + ".type", "required.");
    if (*type != "function") {
      return InvalidParam(where + ".type", "Tools of type '" + type->get<std::string>() +
                                               "' are not supported, only 'function' tools.");
    }
    const ordered_json* name = Field(t, "name");
    if (name == nullptr || !name->is_string())
      return Invalid(where + ".name", "expected a string.");
    const ordered_json* description = Field(t, "description");
    if (description != nullptr && !description->is_string()) {
      return Invalid(where + ".description", "expected a string.");
    }
    const ordered_json* parameters = Field(t, "parameters");
    if (parameters != nullptr && !parameters->is_object()) {
      return Invalid(where + ".parameters", "expected an object (a JSON Schema).");
    }
    const ordered_json* strict = Field(t, "strict");
    if (strict != nullptr && !strict->is_boolean()) {
      return Invalid(where + ".strict", "expected a boolean.");
    }
    ordered_json function = {{"name", *name}};
    CopyFields(t, {"description", "parameters", "strict"}, function);
    out.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  chat["tools"] = std::move(out);
  if (const ordered_json* choice = Field(body, "tool_choice")) {
    if (choice->is_string()) {
      chat["tool_choice"] = *choice;
    } else if (choice->is_object() && Field(*choice, "type") && (*choice)["type"] == "function" &&
               Field(*choice, "name")) {
      chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", (*choice)["name"]}}}};
    } else {
      return Invalid("tool_choice",
                     "expected 'none', 'auto', 'required' or {\"type\": \"function\", "
                     "\"name\": ...}.");
    }
  }
  return std::nullopt;
}

// The response object's text.format: the request's, or {type: text}.
ordered_json EchoFormat(const ordered_json& body) {
  const ordered_json* text = Field(body, "text");
  const ordered_json* format = text != nullptr ? Field(*text, "format") : nullptr;
  return format != nullptr ? *format : ordered_json{{"type", "text"}};
}

ordered_json Echo(const ordered_json& body, bool store) {
  auto get = [&](const char* name, ordered_json fallback) {
    const ordered_json* v = Field(body, name);
    return v != nullptr ? *v : fallback;
  };
  return {{"background", false},
          {"instructions", get("instructions", nullptr)},
          {"max_output_tokens", get("max_output_tokens", nullptr)},
          {"max_tool_calls", nullptr},
          {"metadata", get("metadata", ordered_json::object())},
          {"parallel_tool_calls", get("parallel_tool_calls", true)},
          {"previous_response_id", get("previous_response_id", nullptr)},
          {"reasoning", {{"effort", nullptr}, {"summary", nullptr}}},
          {"service_tier", "default"},
          {"store", store},
          {"temperature", get("temperature", nullptr)},
          {"text", {{"format", EchoFormat(body)}, {"verbosity", "medium"}}},
          {"tool_choice", get("tool_choice", "auto")},
          {"tools", get("tools", ordered_json::array())},
          {"top_logprobs", 0},
          {"top_p", get("top_p", nullptr)},
          {"truncation", "disabled"},
          {"user", get("user", nullptr)}};
}

}  // namespace

// text.format {type: json_schema, name, schema, strict, description} or {type: json_object}
// becomes the chat body's response_format (the schema nested under json_schema), so both APIs
// share one structured-output path. CheckRefused has checked the type.
std::optional<ApiError> ConvertTextFormat(const ordered_json& body, ordered_json& chat) {
  const ordered_json* text = Field(body, "text");
  const ordered_json* format = text != nullptr ? Field(*text, "format") : nullptr;
  if (format == nullptr || (*format)["type"] == "text") return std::nullopt;
  if ((*format)["type"] == "json_object") {
    chat["response_format"] = {{"type", "json_object"}};
    return std::nullopt;
  }
  ordered_json json_schema = ordered_json::object();
  CopyFields(*format, {"name", "description", "schema", "strict"}, json_schema);
  chat["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(json_schema)}};
  return std::nullopt;
}

ApiResult<ResponsesRequest> ParseResponsesRequest(const ordered_json& body, ResponseStore& store) {
  if (auto e = CheckRefused(body)) return *e;
  ResponsesRequest req;
  if (const ordered_json* v = Field(body, "store")) {
    if (!v->is_boolean()) return Invalid("store", "expected a boolean.");
    req.store = v->get<bool>();
  }
  ordered_json chat = ordered_json::object();
  CopyFields(body, {"model", "temperature", "top_p", "parallel_tool_calls", "stream", "user"},
             chat);
  CopyFields(body, kSamplingExtensions, chat);
  if (const ordered_json* v = Field(body, "max_output_tokens")) chat["max_completion_tokens"] = *v;
  if (auto e = ConvertTextFormat(body, chat)) return *e;
  if (const ordered_json* v = Field(body, "metadata"); v != nullptr && !v->is_object()) {
    return Invalid("metadata", "expected an object.");
  }

  req.history = ordered_json::array();
  if (const ordered_json* prev = Field(body, "previous_response_id")) {
    if (!prev->is_string()) return Invalid("previous_response_id", "expected a string.");
    auto stored = store.Get(prev->get<std::string>());
    if (!stored) {
      return InvalidParam("previous_response_id",
                          "Previous response with id '" + prev->get<std::string>() +
                              "' not found (it was stored with store: false, evicted from "
                              "the server's bounded store, or made before a restart).");
    }
    req.history = std::move(*stored);
  }
  const ordered_json* input = Field(body, "input");
  if (input == nullptr) return InvalidParam("input", "'input' is required.");
  if (auto e = AppendInput(*input, req.history)) return *e;

  ordered_json messages = ordered_json::array();
  if (const ordered_json* instructions = Field(body, "instructions")) {
    if (!instructions->is_string()) return Invalid("instructions", "expected a string.");
    messages.push_back({{"role", "system"}, {"content", *instructions}});
  }
  for (const ordered_json& m : req.history) messages.push_back(m);
  chat["messages"] = std::move(messages);
  if (auto e = ConvertTools(body, chat)) return *e;
  if (Field(body, "tools") == nullptr && Field(body, "tool_choice") != nullptr) {
    CopyFields(body, {"tool_choice"}, chat);  // the chat path says why it cannot be honoured
  }
  req.chat_body = std::move(chat);
  req.echo = Echo(body, req.store);
  return req;
}

void ToResponsesParam(ApiError& error) {
  RenameParam(error, "messages", "input");
  RenameParam(error, "max_completion_tokens", "max_output_tokens");
  RenameParam(error, "response_format.json_schema", "text.format");
  RenameParam(error, "response_format", "text.format");
}

// --- ResponsesAdapter ---------------------------------------------------------------------------

ResponsesAdapter::ResponsesAdapter(ResponsesRequest request, ResponseStore* store)
    : request_(std::move(request)), store_(store) {}

void ResponsesAdapter::Begin(const JobSpec& spec) {
  id_ = spec.id;
  model_ = spec.model;
  created_ = spec.created;
}

json ResponsesAdapter::Usage(const json& u) {
  if (!u.is_object()) return nullptr;
  const int cached = u.contains("prompt_tokens_details")
                         ? u["prompt_tokens_details"].value("cached_tokens", 0)
                         : 0;
  return {{"input_tokens", u.value("prompt_tokens", 0)},
          {"input_tokens_details", {{"cached_tokens", cached}}},
          {"output_tokens", u.value("completion_tokens", 0)},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", u.value("total_tokens", 0)}};
}

json ResponsesAdapter::ResponseJson(const char* status, const json& usage) const {
  json r = json(request_.echo);
  r["id"] = id_;
  r["object"] = "response";
  r["created_at"] = created_;
  r["status"] = status;
  r["error"] = nullptr;
  r["incomplete_details"] = std::string(status) == "incomplete" ? incomplete_ : json(nullptr);
  r["model"] = model_;
  r["output"] = output_;
  r["usage"] = usage;
  if (std::string(status) == "failed") {
    r["error"] = {{"code", "server_error"},
                  {"message", "The server is shutting down; the response was aborted."}};
  }
  return r;
}

bool ResponsesAdapter::Emit(const char* type, json event, ResponseChannel& channel) {
  event["type"] = type;
  event["sequence_number"] = sequence_++;
  return channel.Write(SseEvent(type, event));
}

namespace {

json TextPart(const std::string& text) {
  return {{"type", "output_text"},
          {"text", text},
          {"annotations", json::array()},
          {"logprobs", json::array()}};
}

// The id suffix of an item: the response id's hex part and a counter.
std::string ItemId(const char* prefix, const std::string& response_id, int n) {
  const size_t dash = response_id.find('-');
  return std::string(prefix) +
         (dash == std::string::npos ? response_id : response_id.substr(dash + 1)) + "_" +
         std::to_string(n);
}

}  // namespace

bool ResponsesAdapter::OpenMessage(ResponseChannel& channel) {
  if (message_index_ >= 0) return true;
  message_index_ = static_cast<int>(output_.size());
  json item = {{"id", ItemId("msg_", id_, item_counter_++)},
               {"type", "message"},
               {"status", "in_progress"},
               {"role", "assistant"},
               {"content", json::array()}};
  output_.push_back(item);
  json part = TextPart("");
  part.erase("logprobs");
  return Emit("response.output_item.added", {{"output_index", message_index_}, {"item", item}},
              channel) &&
         Emit("response.content_part.added",
              {{"item_id", item["id"]},
               {"output_index", message_index_},
               {"content_index", 0},
               {"part", std::move(part)}},
              channel);
}

bool ResponsesAdapter::CloseMessage(ResponseChannel& channel) {
  if (message_index_ < 0) return true;
  const int index = message_index_;
  message_index_ = -1;
  json& item = output_[index];
  const json item_id = item["id"];
  json part = TextPart(text_);
  item["status"] = "completed";
  item["content"] = json::array({part});
  all_text_ += text_;
  text_.clear();
  return Emit("response.output_text.done",
              {{"item_id", item_id},
               {"output_index", index},
               {"content_index", 0},
               {"text", part["text"]},
               {"logprobs", json::array()}},
              channel) &&
         Emit("response.content_part.done",
              {{"item_id", item_id}, {"output_index", index}, {"content_index", 0}, {"part", part}},
              channel) &&
         Emit("response.output_item.done", {{"output_index", index}, {"item", item}}, channel);
}

void ResponsesAdapter::SetFinish(const std::string& finish_reason) {
  if (finish_reason == "length") {
    status_ = "incomplete";
    incomplete_ = {{"reason", "max_output_tokens"}};
  } else if (finish_reason == "abort") {
    status_ = "failed";
  }
}

void ResponsesAdapter::Store(const std::string& text, const json& tool_calls) {
  if (!request_.store || store_ == nullptr || status_ == "failed") return;
  ordered_json messages = request_.history;
  ordered_json reply = {{"role", "assistant"}, {"content", text}};
  if (!tool_calls.empty()) reply["tool_calls"] = ordered_json(tool_calls);
  messages.push_back(std::move(reply));
  store_->Put(id_, std::move(messages));
}

bool ResponsesAdapter::Chunk(const json& chunk, ResponseChannel& channel) {
  const json& choices = chunk["choices"];
  if (choices.empty()) {  // the usage chunk
    usage_ = Usage(chunk["usage"]);
    return true;
  }
  const json& choice = choices[0];
  const json& delta = choice["delta"];
  bool ok = true;
  if (delta.contains("role")) {
    json created = {{"response", ResponseJson("in_progress", nullptr)}};
    ok = Emit("response.created", created, channel) &&
         Emit("response.in_progress", created, channel);
  } else if (delta.contains("content") && delta["content"].is_string() &&
             !delta["content"].get_ref<const std::string&>().empty()) {
    const std::string& text = delta["content"].get_ref<const std::string&>();
    ok = OpenMessage(channel);
    text_ += text;
    ok = ok && Emit("response.output_text.delta",
                    {{"item_id", output_[message_index_]["id"]},
                     {"output_index", message_index_},
                     {"content_index", 0},
                     {"delta", text},
                     {"logprobs", json::array()}},
                    channel);
  }
  if (delta.contains("tool_calls")) {
    for (const json& tc : delta["tool_calls"]) {
      const json& function = tc["function"];
      if (tc.contains("id")) {  // a call's head: id and name
        ok = CloseMessage(channel) && ok;
        json item = {{"id", ItemId("fc_", id_, item_counter_++)},
                     {"type", "function_call"},
                     {"status", "in_progress"},
                     {"call_id", tc["id"]},
                     {"name", function["name"]},
                     {"arguments", ""}};
        output_.push_back(item);
        tool_calls_.push_back({{"id", tc["id"]},
                               {"type", "function"},
                               {"function", {{"name", function["name"]}, {"arguments", ""}}}});
        ok = Emit("response.output_item.added",
                  {{"output_index", output_.size() - 1}, {"item", std::move(item)}}, channel) &&
             ok;
      } else {  // the call's arguments, whole
        const size_t index = output_.size() - 1;
        json& item = output_[index];
        const json args = function["arguments"];
        item["arguments"] = args;
        item["status"] = "completed";
        tool_calls_.back()["function"]["arguments"] = args;
        ok =
            Emit("response.function_call_arguments.delta",
                 {{"item_id", item["id"]}, {"output_index", index}, {"delta", args}}, channel) &&
            Emit("response.function_call_arguments.done",
                 {{"item_id", item["id"]},
                  {"output_index", index},
                  {"name", item["name"]},
                  {"arguments", args}},
                 channel) &&
            Emit("response.output_item.done", {{"output_index", index}, {"item", item}}, channel) &&
            ok;
      }
    }
  }
  if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
    SetFinish(choice["finish_reason"].get<std::string>());
  }
  return ok;
}

void ResponsesAdapter::End(ResponseChannel& channel) {
  CloseMessage(channel);
  if (output_.empty()) {  // an empty reply is still one (empty) message
    OpenMessage(channel);
    CloseMessage(channel);
  }
  Store(all_text_, tool_calls_);
  const char* event = status_ == "completed"    ? "response.completed"
                      : status_ == "incomplete" ? "response.incomplete"
                                                : "response.failed";
  Emit(event, {{"response", ResponseJson(status_.c_str(), usage_)}}, channel);
  channel.EndStream();
}

void ResponsesAdapter::Complete(const json& completion, ResponseChannel& channel) {
  const json& choice = completion["choices"][0];
  const json& message = choice["message"];
  SetFinish(choice.value("finish_reason", "stop"));
  if (status_ == "failed") {
    return Error(ApiErrorFromStatus(Unavailable("The server is shutting down.")), false, channel);
  }
  const std::string text =
      message["content"].is_string() ? message["content"].get<std::string>() : std::string();
  const json calls = message.contains("tool_calls") ? message["tool_calls"] : json::array();
  if (!text.empty() || calls.empty()) {
    output_.push_back({{"id", ItemId("msg_", id_, item_counter_++)},
                       {"type", "message"},
                       {"status", "completed"},
                       {"role", "assistant"},
                       {"content", json::array({TextPart(text)})}});
  }
  for (const json& call : calls) {
    output_.push_back({{"id", ItemId("fc_", id_, item_counter_++)},
                       {"type", "function_call"},
                       {"status", "completed"},
                       {"call_id", call["id"]},
                       {"name", call["function"]["name"]},
                       {"arguments", call["function"]["arguments"]}});
  }
  usage_ = Usage(completion["usage"]);
  Store(text, calls);
  HttpResponse r;
  r.body = DumpJson(ResponseJson(status_.c_str(), usage_));
  channel.Respond(std::move(r));
}

void ResponsesAdapter::Error(const ApiError& error, bool stream_started, ResponseChannel& channel) {
  ApiError e = error;
  ToResponsesParam(e);
  if (!stream_started) return channel.Respond(ErrorResponse(e, e.Body()));
  Emit("error",
       {{"code", e.code.empty() ? json(nullptr) : json(e.code)},
        {"message", e.message},
        {"param", e.param.empty() ? json(nullptr) : json(e.param)}},
       channel);
  channel.EndStream();
}

}  // namespace tachyon::server
