#include "server/constraint_fields.h"

#include <vector>

#include "server/json_limits.h"

namespace tachyon::server {
namespace {

using nlohmann::ordered_json;
using Kind = grammar::ConstraintSpec::Kind;
using Parsed = ApiResult<std::optional<RequestedConstraint>>;

constexpr size_t kMaxChoices = 1024;

const ordered_json* Present(const ordered_json& obj, const char* name) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string Dump(const ordered_json& j) {
  return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

RequestedConstraint Make(Kind kind, std::string source, std::string param) {
  RequestedConstraint c;
  c.spec.kind = kind;
  c.spec.source = std::move(source);
  c.param = std::move(param);
  return c;
}

// A JSON Schema given as an object, or (`text_too`: vLLM and llama.cpp take both) its JSON text.
ApiResult<RequestedConstraint> SchemaValue(const ordered_json& v, const std::string& param,
                                           bool text_too = false) {
  if (v.is_object()) return Make(Kind::kJsonSchema, Dump(v), param);
  if (!text_too) {
    return InvalidParam(param, "Invalid value for '" + param + "': expected a JSON Schema object.");
  }
  if (v.is_string()) {
    // The text is bounded as a body is (a deep nesting would overflow the stack of the
    // recursive dump below).
    std::optional<ordered_json> parsed = ParseBoundedOrderedJson(v.get_ref<const std::string&>());
    if (parsed && parsed->is_object()) return Make(Kind::kJsonSchema, Dump(*parsed), param);
  }
  return InvalidParam(param, "Invalid value for '" + param +
                                 "': expected a JSON Schema (an object, or its JSON text).");
}

ApiResult<RequestedConstraint> StringValue(const ordered_json& v, Kind kind,
                                           const std::string& param, const char* what) {
  if (!v.is_string() || v.get_ref<const std::string&>().empty()) {
    return InvalidParam(param,
                        "Invalid value for '" + param + "': expected a non-empty string (" + what +
                            ").");
  }
  return Make(kind, v.get<std::string>(), param);
}

ApiResult<RequestedConstraint> ChoiceValue(const ordered_json& v, const std::string& param) {
  if (!v.is_array() || v.empty() || v.size() > kMaxChoices) {
    return InvalidParam(param, "Invalid value for '" + param + "': expected an array of 1 to " +
                                   std::to_string(kMaxChoices) + " strings.");
  }
  RequestedConstraint c = Make(Kind::kChoice, "", param);
  for (const ordered_json& s : v) {
    if (!s.is_string()) {
      return InvalidParam(param, "Invalid value for '" + param + "': every choice must be a string.");
    }
    c.spec.choices.push_back(s.get<std::string>());
  }
  return c;
}

constexpr const char* kWithin = "complete_within_max_tokens";

// `obj`'s optional complete_within_max_tokens (a boolean); `where` names obj.
ApiResult<std::optional<bool>> WithinFlag(const ordered_json& obj, const std::string& where) {
  const ordered_json* v = Present(obj, kWithin);
  if (v == nullptr) return std::optional<bool>();
  if (!v->is_boolean()) {
    const std::string param = where + "." + kWithin;
    return InvalidParam(param, "Invalid value for '" + param + "': expected a boolean.");
  }
  return std::optional<bool>(v->get<bool>());
}

Parsed ResponseFormatConstraint(const ordered_json& rf);

Parsed ResponseFormat(const ordered_json& rf) {
  Parsed c = ResponseFormatConstraint(rf);
  if (!c.ok()) return c;
  auto within = WithinFlag(rf, "response_format");
  if (!within.ok()) return within.error();
  if (c.value()) c.value()->complete_within_max_tokens = within.value();
  return c;
}

Parsed ResponseFormatConstraint(const ordered_json& rf) {
  const ordered_json* type = rf.is_object() ? Present(rf, "type") : nullptr;
  if (type == nullptr || !type->is_string()) {
    return InvalidParam("response_format",
                        "Invalid value for 'response_format': expected an object with a 'type'.");
  }
  const std::string& t = type->get_ref<const std::string&>();
  if (t == "text") return std::optional<RequestedConstraint>();
  if (t == "json_object") {
    if (const ordered_json* schema = Present(rf, "schema")) {
      auto c = SchemaValue(*schema, "response_format.schema");
      if (!c.ok()) return c.error();
      return std::optional<RequestedConstraint>(std::move(c.value()));
    }
    return std::optional<RequestedConstraint>(Make(Kind::kJsonObject, "", "response_format"));
  }
  if (t == "json_schema") {
    const ordered_json* js = Present(rf, "json_schema");
    if (js == nullptr || !js->is_object()) {
      return InvalidParam("response_format.json_schema",
                          "'response_format.json_schema' is required with type 'json_schema': "
                          "{\"name\": ..., \"schema\": {...}}.");
    }
    const ordered_json* name = Present(*js, "name");
    if (name != nullptr && !name->is_string()) {
      return InvalidParam("response_format.json_schema.name",
                          "Invalid value for 'response_format.json_schema.name': expected a "
                          "string.");
    }
    const ordered_json* strict = Present(*js, "strict");
    if (strict != nullptr && !strict->is_boolean()) {
      return InvalidParam("response_format.json_schema.strict",
                          "Invalid value for 'response_format.json_schema.strict': expected a "
                          "boolean.");
    }
    const ordered_json* schema = Present(*js, "schema");
    if (schema == nullptr) {
      return InvalidParam("response_format.json_schema.schema",
                          "'response_format.json_schema.schema' is required.");
    }
    // strict or not, the answer follows the schema exactly (never a looser grammar).
    auto c = SchemaValue(*schema, "response_format.json_schema.schema");
    if (!c.ok()) return c.error();
    return std::optional<RequestedConstraint>(std::move(c.value()));
  }
  return InvalidParam("response_format", "Invalid value for 'response_format.type': '" + t +
                                             "' (expected 'text', 'json_object' or "
                                             "'json_schema').");
}

Parsed StructuredOutputs(const ordered_json& so) {
  if (!so.is_object()) {
    return InvalidParam("structured_outputs",
                        "Invalid value for 'structured_outputs': expected an object with one of "
                        "'json', 'regex', 'choice', 'grammar' or 'json_object'.");
  }
  std::optional<RequestedConstraint> out;
  auto within = WithinFlag(so, "structured_outputs");
  if (!within.ok()) return within.error();
  for (auto it = so.begin(); it != so.end(); ++it) {
    const std::string& key = it.key();
    const std::string param = "structured_outputs." + key;
    if (key != "json" && key != "regex" && key != "grammar" && key != "choice" &&
        key != "json_object" && key != kWithin) {  // unknown, even when null
      return InvalidParam(param, "'" + param +
                                     "' is not supported: structured_outputs takes one of "
                                     "'json', 'regex', 'choice', 'grammar' or 'json_object'.");
    }
    if (it->is_null() || key == kWithin) continue;
    std::optional<ApiResult<RequestedConstraint>> c;
    if (key == "json") {
      c = SchemaValue(*it, param, /*text_too=*/true);
    } else if (key == "regex") {
      c = StringValue(*it, Kind::kRegex, param, "a regular expression");
    } else if (key == "grammar") {
      c = StringValue(*it, Kind::kGbnf, param, "a GBNF grammar");
    } else if (key == "choice") {
      c = ChoiceValue(*it, param);
    } else {  // json_object
      if (!it->is_boolean()) {
        return InvalidParam(param, "Invalid value for '" + param + "': expected a boolean.");
      }
      if (!it->get<bool>()) continue;
      c = Make(Kind::kJsonObject, "", param);
    }
    if (!c->ok()) return c->error();
    if (out) {
      return InvalidParam(param, "'structured_outputs' takes one constraint; it has both '" +
                                     out->param + "' and '" + param + "'.");
    }
    out = std::move(c->value());
  }
  if (out) out->complete_within_max_tokens = within.value();
  return out;
}

}  // namespace

ApiResult<std::optional<RequestedConstraint>> ParseConstraintFields(const ordered_json& body) {
  std::optional<RequestedConstraint> found;
  auto take = [&](Parsed p) -> std::optional<ApiError> {
    if (!p.ok()) return p.error();
    if (!p.value()) return std::nullopt;
    if (found) {
      const std::string& param = p.value()->param;
      return InvalidParam(param, "A request takes one output constraint; this one has both '" +
                                     found->param + "' and '" + param + "'.");
    }
    found = std::move(p.value());
    return std::nullopt;
  };
  if (!body.is_object()) return found;
  if (const ordered_json* rf = Present(body, "response_format")) {
    if (auto e = take(ResponseFormat(*rf))) return *e;
  }
  if (const ordered_json* so = Present(body, "structured_outputs")) {
    if (auto e = take(StructuredOutputs(*so))) return *e;
  }
  if (const ordered_json* g = Present(body, "grammar")) {
    auto c = StringValue(*g, Kind::kGbnf, "grammar", "a GBNF grammar");
    if (!c.ok()) return c.error();
    if (auto e = take(std::optional<RequestedConstraint>(std::move(c.value())))) return *e;
  }
  if (const ordered_json* js = Present(body, "json_schema")) {
    auto c = SchemaValue(*js, "json_schema", /*text_too=*/true);
    if (!c.ok()) return c.error();
    if (auto e = take(std::optional<RequestedConstraint>(std::move(c.value())))) return *e;
  }
  return found;
}

}  // namespace tachyon::server
