#include "server/json_limits.h"

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

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

// Builds an ordered_json from nlohmann's SAX events with each open object's keys in a hash
// index. nlohmann's own parser inserts every key through ordered_map, which looks for it by a
// linear walk: an object of n members cost O(n^2) (40,000 keys, ~4 s of an io thread). A
// repeated key keeps its first position and takes its last value, as nlohmann's parser does.
class OrderedJsonBuilder {
 public:
  using Json = nlohmann::ordered_json;

  bool null() { return Put(nullptr); }
  bool boolean(bool v) { return Put(v); }
  bool number_integer(Json::number_integer_t v) { return Put(v); }
  bool number_unsigned(Json::number_unsigned_t v) { return Put(v); }
  bool number_float(Json::number_float_t v, const Json::string_t&) { return Put(v); }
  bool string(Json::string_t& v) { return Put(std::move(v)); }
  bool binary(Json::binary_t& v) { return Put(Json::binary(std::move(v))); }
  bool start_object(size_t) { return Open(Json::object()); }
  bool key(Json::string_t& k) {
    key_ = std::move(k);
    return true;
  }
  bool end_object() { return Close(); }
  bool start_array(size_t) { return Open(Json::array()); }
  bool end_array() { return Close(); }
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception&) { return false; }

  Json Take() { return std::move(root_); }

 private:
  struct Frame {
    Json* value;
    std::unordered_map<std::string, size_t> keys;  // an object's: member -> position
  };

  // Places v in the innermost open container (at the last key, in an object) or as the root.
  // The pointer stays valid while v is open: nothing else goes into its container meanwhile.
  Json* Place(Json&& v) {
    if (open_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& f = open_.back();
    if (f.value->is_array()) {
      auto& a = f.value->get_ref<Json::array_t&>();
      a.push_back(std::move(v));
      return &a.back();
    }
    auto& o = f.value->get_ref<Json::object_t&>();
    const auto [at, fresh] = f.keys.try_emplace(key_, o.size());
    if (fresh) {
      o.emplace_back(std::move(key_), std::move(v));
      return &o.back().second;
    }
    Json& slot = (o.begin() + static_cast<ptrdiff_t>(at->second))->second;
    slot = std::move(v);
    return &slot;
  }
  bool Put(Json&& v) {
    Place(std::move(v));
    return true;
  }
  bool Open(Json&& v) {
    open_.push_back({Place(std::move(v)), {}});
    return true;
  }
  bool Close() {
    open_.pop_back();
    return true;
  }

  Json root_;
  std::vector<Frame> open_;
  std::string key_;
};

// Without limits: nullopt when malformed.
std::optional<nlohmann::json> ParseUnordered(std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

std::optional<nlohmann::ordered_json> ParseOrdered(std::string_view text) {
  OrderedJsonBuilder builder;
  if (!nlohmann::ordered_json::sax_parse(text.begin(), text.end(), &builder)) return std::nullopt;
  return builder.Take();
}

template <typename Json>
ApiResult<Json> CheckedBody(std::optional<Json> j) {
  if (!j) return SyntaxError();
  if (!j->is_object()) return InvalidParam("", "The request body must be a JSON object.");
  return std::move(*j);
}

}  // namespace

std::optional<ApiError> CheckJsonLimits(std::string_view text, const JsonLimits& limits,
                                        JsonShape* shape) {
  if (text.size() > limits.max_bytes) {
    return LimitError("json_too_large", "The JSON document is " + std::to_string(text.size()) +
                                            " bytes; the limit is " +
                                            std::to_string(limits.max_bytes) + " bytes.");
  }
  switch (ScanJson(text, limits.max_depth, limits.max_values, shape)) {
    case JsonLimit::kDepth:
      return LimitError("json_too_deep", "The JSON document nests deeper than the limit of " +
                                             std::to_string(limits.max_depth) +
                                             " levels of arrays and objects.");
    case JsonLimit::kValues:
      return LimitError("json_too_many_values", "The JSON document holds more than the limit of " +
                                                    std::to_string(limits.max_values) + " values.");
    case JsonLimit::kNone:
      break;
  }
  return std::nullopt;
}

ApiResult<nlohmann::json> ParseJsonBody(std::string_view body, const JsonLimits& limits) {
  if (auto e = CheckJsonLimits(body, limits)) return *e;
  return CheckedBody(ParseUnordered(body));
}

ApiResult<nlohmann::ordered_json> ParseOrderedJsonBody(std::string_view body,
                                                       const JsonLimits& limits) {
  if (auto e = CheckJsonLimits(body, limits)) return *e;
  return CheckedBody(ParseOrdered(body));
}

std::optional<nlohmann::json> ParseBoundedJson(std::string_view text, const JsonLimits& limits) {
  if (CheckJsonLimits(text, limits)) return std::nullopt;
  return ParseUnordered(text);
}

std::optional<nlohmann::ordered_json> ParseBoundedOrderedJson(std::string_view text,
                                                              const JsonLimits& limits) {
  if (CheckJsonLimits(text, limits)) return std::nullopt;
  return ParseOrdered(text);
}

}  // namespace tachyon::server
