// FieldReader: typed, range-checked reads of optional fields of a JSON object, keeping the first
// error (an ApiError naming the parameter). Internal to server/ request parsing.
//
//   FieldReader r(body);
//   auto t = r.Number("temperature", 0, 2);   // nullopt when absent, null, or after an error
//   if (r.failed()) return r.error();
// Not thread-safe (one reader per parse).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/protocol.h"

namespace tachyon::server {

class FieldReader {
 public:
  // `obj` must outlive the reader; `prefix` is prepended to parameter names ("stream_options.").
  explicit FieldReader(const nlohmann::json& obj, std::string prefix = "")
      : obj_(obj), prefix_(std::move(prefix)) {}

  std::optional<double> Number(const char* name, double lo, double hi);
  std::optional<int64_t> Int(const char* name, int64_t lo, int64_t hi);
  std::optional<bool> Bool(const char* name);
  std::optional<std::string> String(const char* name);
  // A string or an array of strings (at most `max_items`).
  std::optional<std::vector<std::string>> StringOrList(const char* name, size_t max_items);
  // The raw value when present and not null (no type check).
  const nlohmann::json* Raw(const char* name);

  void Fail(const std::string& name, const std::string& message);
  bool failed() const { return error_.has_value(); }
  const ApiError& error() const { return *error_; }

 private:
  const nlohmann::json* Get(const char* name);

  const nlohmann::json& obj_;
  std::string prefix_;
  std::optional<ApiError> error_;
};

}  // namespace tachyon::server
