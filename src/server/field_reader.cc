#include "server/field_reader.h"

#include <cmath>

namespace tachyon::server {
namespace {

std::string FormatBound(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  std::string s = std::to_string(v);
  while (!s.empty() && s.back() == '0') s.pop_back();
  return s;
}

}  // namespace

const nlohmann::json* FieldReader::Get(const char* name) {
  if (failed()) return nullptr;
  auto it = obj_.find(name);
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

void FieldReader::Fail(const std::string& name, const std::string& message) {
  if (failed()) return;
  std::string param = prefix_ + name;
  error_ = InvalidParam(param, "Invalid value for '" + param + "': " + message);
}

const nlohmann::json* FieldReader::Raw(const char* name) {
  return Get(name);
}

std::optional<double> FieldReader::Number(const char* name, double lo, double hi) {
  const nlohmann::json* v = Get(name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) {
    Fail(name, "expected a number.");
    return std::nullopt;
  }
  double d = v->get<double>();
  if (!(d >= lo && d <= hi)) {
    Fail(name, "must be between " + FormatBound(lo) + " and " + FormatBound(hi) + ".");
    return std::nullopt;
  }
  return d;
}

std::optional<int64_t> FieldReader::Int(const char* name, int64_t lo, int64_t hi) {
  const nlohmann::json* v = Get(name);
  if (v == nullptr) return std::nullopt;
  int64_t i = 0;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      Fail(name, "integer out of range.");
      return std::nullopt;
    }
    i = v->get<int64_t>();
  } else if (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>() &&
             std::fabs(v->get<double>()) < 9e15) {
    i = static_cast<int64_t>(v->get<double>());
  } else {
    Fail(name, "expected an integer.");
    return std::nullopt;
  }
  if (i < lo || i > hi) {
    Fail(name, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ".");
    return std::nullopt;
  }
  return i;
}

std::optional<bool> FieldReader::Bool(const char* name) {
  const nlohmann::json* v = Get(name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) {
    Fail(name, "expected a boolean.");
    return std::nullopt;
  }
  return v->get<bool>();
}

std::optional<std::string> FieldReader::String(const char* name) {
  const nlohmann::json* v = Get(name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) {
    Fail(name, "expected a string.");
    return std::nullopt;
  }
  return v->get<std::string>();
}

std::optional<std::vector<std::string>> FieldReader::StringOrList(const char* name,
                                                                  size_t max_items) {
  const nlohmann::json* v = Get(name);
  if (v == nullptr) return std::nullopt;
  std::vector<std::string> out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (v->size() > max_items) {
      Fail(name, "at most " + std::to_string(max_items) + " items are allowed.");
      return std::nullopt;
    }
    for (const auto& item : *v) {
      if (!item.is_string()) {
        Fail(name, "expected a string or an array of strings.");
        return std::nullopt;
      }
      out.push_back(item.get<std::string>());
    }
  } else {
    Fail(name, "expected a string or an array of strings.");
    return std::nullopt;
  }
  return out;
}

}  // namespace tachyon::server
