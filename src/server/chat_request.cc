// Parsing of /v1/chat/completions bodies into a ChatRequest.
#include <set>

#include "server/constraint_fields.h"
#include "server/field_reader.h"
#include "server/protocol.h"
#include "server/request_fields.h"

namespace tachyon::server {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

const std::set<std::string>& Roles() {
  static const std::set<std::string> kRoles = {"system", "developer", "user", "assistant", "tool"};
  return kRoles;
}

std::string DumpOrdered(const ordered_json& j) {
  return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

// Flattens content given as an array of parts into one string (text parts joined by "\n").
std::optional<ApiError> FlattenContent(const ordered_json& parts, size_t index, std::string& out) {
  std::string param = "messages[" + std::to_string(index) + "].content";
  for (const auto& part : parts) {
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
      return InvalidParam(param, "Invalid value for '" + param +
                                     "': each content part must be an object with a 'type'.");
    }
    const std::string type = part["type"].get<std::string>();
    if (type != "text") {
      return InvalidParam(param, "Content parts of type '" + type +
                                     "' are not supported by this model; only 'text' is.");
    }
    if (!part.contains("text") || !part["text"].is_string()) {
      return InvalidParam(param,
                          "Invalid value for '" + param + "': a text part needs a string 'text'.");
    }
    if (!out.empty()) out += "\n";
    out += part["text"].get<std::string>();
  }
  return std::nullopt;
}

ApiResult<ordered_json> ParseMessages(const ordered_json& body) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null()) {
    return InvalidParam("messages", "'messages' is required.");
  }
  if (!it->is_array() || it->empty()) {
    return InvalidParam("messages", "Invalid value for 'messages': expected a non-empty array.");
  }
  ordered_json messages = ordered_json::array();
  for (size_t i = 0; i < it->size(); ++i) {
    const ordered_json& m = (*it)[i];
    std::string param = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) {
      return InvalidParam(param, "Invalid value for '" + param + "': expected an object.");
    }
    auto role = m.find("role");
    if (role == m.end() || !role->is_string() || !Roles().count(role->get<std::string>())) {
      return InvalidParam(param + ".role",
                          "Invalid value for '" + param +
                              ".role': expected one of system, developer, user, assistant, tool.");
    }
    ordered_json out = m;  // keeps name, tool_calls, tool_call_id, ...
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) {
      if (*role != "assistant") {
        return InvalidParam(param + ".content", "'" + param + ".content' is required.");
      }
      out["content"] = nullptr;
    } else if (content->is_array()) {
      std::string text;
      if (auto err = FlattenContent(*content, i, text)) return *err;
      out["content"] = std::move(text);
    } else if (!content->is_string()) {
      return InvalidParam(param + ".content", "Invalid value for '" + param +
                                                  ".content': expected a string or an array of "
                                                  "content parts.");
    }
    messages.push_back(std::move(out));
  }
  return messages;
}

std::optional<ApiError> ReadTools(const ordered_json& body, ordered_json& context,
                                  ChatRequest& req) {
  ordered_json tools = nullptr;
  if (auto it = body.find("tools"); it != body.end() && !it->is_null()) {
    if (!it->is_array())
      return InvalidParam("tools", "Invalid value for 'tools': expected an array.");
    for (size_t i = 0; i < it->size(); ++i) {
      const ordered_json& t = (*it)[i];
      if (t.is_object() && t.contains("type") && t["type"] != "function") {
        const std::string param = "tools[" + std::to_string(i) + "].type";
        return InvalidParam(param, "Invalid value for '" + param + "': tools of type " +
                                       DumpOrdered(t["type"]) +
                                       " are not supported, only 'function' tools.");
      }
      if (!t.is_object() || !t.contains("function") || !t["function"].is_object() ||
          !t["function"].contains("name") || !t["function"]["name"].is_string()) {
        return InvalidParam("tools",
                            "Invalid value for 'tools': each tool must be "
                            "{\"type\": \"function\", \"function\": {\"name\": ...}}.");
      }
      req.tool_names.push_back(t["function"]["name"].get<std::string>());
      const ordered_json& f = t["function"];
      auto params = f.find("parameters");
      if (params != f.end() && !params->is_null() && !params->is_object()) {
        const std::string param = "tools[" + std::to_string(i) + "].function.parameters";
        return InvalidParam(param, "Invalid value for '" + param + "': expected a JSON Schema "
                                   "object.");
      }
      req.tool_parameters.push_back(
          params == f.end() || params->is_null() ? std::string() : DumpOrdered(*params));
    }
    if (!it->empty()) tools = *it;
  }
  ordered_json tool_choice = "auto";
  if (auto it = body.find("tool_choice"); it != body.end() && !it->is_null()) {
    const ordered_json& c = *it;
    if (c == "none") {
      req.tool_choice.mode = ToolChoice::Mode::kNone;
    } else if (c == "auto") {
      req.tool_choice.mode = ToolChoice::Mode::kAuto;
    } else if (c == "required") {
      req.tool_choice.mode = ToolChoice::Mode::kRequired;
    } else if (c.is_object() && c.contains("type") && c["type"] != "function") {
      return InvalidParam("tool_choice", "'tool_choice' of type " + DumpOrdered(c["type"]) +
                                             " is not supported: use 'none', 'auto', "
                                             "'required' or a function.");
    } else if (c.is_object() && c.contains("function") && c["function"].is_object() &&
               c["function"].contains("name") && c["function"]["name"].is_string()) {
      req.tool_choice.mode = ToolChoice::Mode::kFunction;
      req.tool_choice.function = c["function"]["name"].get<std::string>();
      bool known = false;
      for (const auto& name : req.tool_names) known = known || name == req.tool_choice.function;
      if (!known) {
        return InvalidParam("tool_choice", "Invalid value for 'tool_choice': function '" +
                                               req.tool_choice.function +
                                               "' is not one of the request's tools.");
      }
    } else {
      return InvalidParam("tool_choice",
                          "Invalid value for 'tool_choice': expected 'none', 'auto', "
                          "'required' or {\"type\": \"function\", \"function\": "
                          "{\"name\": ...}}.");
    }
    tool_choice = c;
  }
  if (req.tool_choice.mode == ToolChoice::Mode::kRequired && req.tool_names.empty()) {
    return InvalidParam("tool_choice", "'tool_choice' is 'required' but no 'tools' are given.");
  }
  if (auto it = body.find("parallel_tool_calls"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) {
      return InvalidParam("parallel_tool_calls",
                          "Invalid type for 'parallel_tool_calls': expected a boolean.");
    }
    req.parallel_tool_calls = it->get<bool>();
  }
  if (req.tool_choice.mode == ToolChoice::Mode::kNone) {
    tools = nullptr;
    req.tool_names.clear();
    req.tool_parameters.clear();
  }
  context["tools"] = std::move(tools);
  context["tool_choice"] = std::move(tool_choice);
  return std::nullopt;
}

}  // namespace

ApiResult<ChatRequest> ParseChatRequest(const ordered_json& ordered_body, int vocab_size,
                                        const SamplingDefaults& defaults) {
  // FieldReader reads a nlohmann::json: convert the top level, minus the parts read from the
  // ordered body (messages, tools). The conversion recurses once per level of nesting, so it
  // relies on the body's depth bound (server/json_limits.h).
  json body = json::object();
  for (auto it = ordered_body.begin(); it != ordered_body.end(); ++it) {
    if (it.key() != "messages" && it.key() != "tools") body[it.key()] = it.value();
  }
  if (auto e = CheckUnsupportedFields(body, RequestKind::kChat)) return *e;
  auto common = ParseCommonParams(body, vocab_size, /*is_chat=*/true, defaults);
  if (!common.ok()) return common.error();
  ChatRequest req;
  req.common = std::move(common.value());
  auto constraint = ParseConstraintFields(ordered_body);
  if (!constraint.ok()) return constraint.error();
  req.common.constraint = std::move(constraint.value());

  auto messages = ParseMessages(ordered_body);
  if (!messages.ok()) return messages.error();
  ordered_json context = ordered_json::object();
  FieldReader r(body);
  if (const json* kwargs = r.Raw("chat_template_kwargs")) {
    if (!kwargs->is_object()) {
      r.Fail("chat_template_kwargs", "expected an object.");
    } else if (kwargs->contains("bos_token") || kwargs->contains("eos_token")) {
      // The template's bos/eos variables are trusted text (their special tokens are parsed).
      r.Fail("chat_template_kwargs",
             "'bos_token' and 'eos_token' are the model's own tokens; they cannot be set.");
    } else {
      context = *ordered_body.find("chat_template_kwargs");
    }
  }
  context["messages"] = std::move(messages.value());
  context["add_generation_prompt"] = r.Bool("add_generation_prompt").value_or(true);
  if (auto err = ReadTools(ordered_body, context, req)) return *err;
  const auto mode = req.tool_choice.mode;
  if (req.common.constraint && !req.tool_names.empty() &&
      (mode == ToolChoice::Mode::kRequired || mode == ToolChoice::Mode::kFunction)) {
    const std::string& param = req.common.constraint->param;
    return InvalidParam(param, "'" + param +
                                   "' cannot be combined with a tool_choice that forces a tool "
                                   "call (the call's arguments follow the tool's parameters).");
  }

  req.logprobs = r.Bool("logprobs").value_or(false);
  auto top = r.Int("top_logprobs", 0, kMaxLogprobs);
  if (top && !req.logprobs && !r.failed()) {
    r.Fail("top_logprobs", "'logprobs' must be true when 'top_logprobs' is set.");
  }
  req.top_logprobs = static_cast<int>(top.value_or(0));
  if (r.failed()) return r.error();
  req.common.sampling.logprobs = req.logprobs ? req.top_logprobs : -1;
  req.template_context = std::move(context);
  return req;
}

}  // namespace tachyon::server
