#include "server/json_limits.h"

#include <string>

namespace tachyon::server {
namespace {

ApiError LimitError(std::string code, std::string message) {
  ApiError e = InvalidParam("", std::move(message));
  e.code = std::move(code);
  return e;
}

ApiError SyntaxError() {
  return InvalidParam("",
                      "We could not parse the JSON body of your request. The body must be "
                      "a valid JSON object.");
}

template <typename Json>
ApiResult<Json> ParseBody(std::string_view body, const JsonLimits& limits) {
  if (auto e = CheckJsonLimits(body, limits)) return *e;
  Json j = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return SyntaxError();
  if (!j.is_object()) return InvalidParam("", "The request body must be a JSON object.");
  return j;
}

}  // namespace

std::optional<ApiError> CheckJsonLimits(std::string_view text, const JsonLimits& limits,
                                        JsonShape* shape) {
  if (text.size() > limits.max_bytes) {
    return LimitError("json_too_large", "The JSON document is " + std::to_string(text.size()) +
                                            " bytes; the limit is " +
                                            std::to_string(limits.max_bytes) + " bytes.");
  }
  // values = 1 (the root) + one per comma + one per non-empty container (its first child);
  // exact for valid JSON.
  int depth = 0, max_depth = 0;
  size_t values = 0;
  bool in_string = false, escaped = false, opened = false, root_seen = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (IsJsonSpace(c)) continue;
    if (!root_seen) {
      root_seen = true;
      ++values;
    }
    if (opened) {
      opened = false;
      if (c != ']' && c != '}') ++values;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > limits.max_depth) {
          return LimitError("json_too_deep", "The JSON document nests deeper than the limit of " +
                                                 std::to_string(limits.max_depth) +
                                                 " levels of arrays and objects.");
        }
        if (depth > max_depth) max_depth = depth;
        opened = true;
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      case ',':
        ++values;
        break;
      default:
        break;
    }
    if (values > limits.max_values) {
      return LimitError("json_too_many_values", "The JSON document holds more than the limit of " +
                                                    std::to_string(limits.max_values) + " values.");
    }
  }
  if (shape != nullptr) *shape = {max_depth, values};
  return std::nullopt;
}

ApiResult<nlohmann::json> ParseJsonBody(std::string_view body, const JsonLimits& limits) {
  return ParseBody<nlohmann::json>(body, limits);
}

ApiResult<nlohmann::ordered_json> ParseOrderedJsonBody(std::string_view body,
                                                       const JsonLimits& limits) {
  return ParseBody<nlohmann::ordered_json>(body, limits);
}

std::optional<nlohmann::json> ParseBoundedJson(std::string_view text, const JsonLimits& limits) {
  if (CheckJsonLimits(text, limits)) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

}  // namespace tachyon::server
