// gguf::Value: metadata values, their numeric views and a short rendering.
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "gguf/gguf.h"

namespace tachyon::gguf {

std::string_view ValueTypeName(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
      return "u8";
    case ValueType::kInt8:
      return "i8";
    case ValueType::kUint16:
      return "u16";
    case ValueType::kInt16:
      return "i16";
    case ValueType::kUint32:
      return "u32";
    case ValueType::kInt32:
      return "i32";
    case ValueType::kFloat32:
      return "f32";
    case ValueType::kBool:
      return "bool";
    case ValueType::kString:
      return "string";
    case ValueType::kArray:
      return "array";
    case ValueType::kUint64:
      return "u64";
    case ValueType::kInt64:
      return "i64";
    case ValueType::kFloat64:
      return "f64";
  }
  return "unknown";
}

bool IsUnsignedType(ValueType t) {
  return t == ValueType::kUint8 || t == ValueType::kUint16 || t == ValueType::kUint32 ||
         t == ValueType::kUint64;
}

bool IsSignedType(ValueType t) {
  return t == ValueType::kInt8 || t == ValueType::kInt16 || t == ValueType::kInt32 ||
         t == ValueType::kInt64;
}

bool Value::IsInteger() const {
  return IsUnsignedType(type) || IsSignedType(type);
}

std::optional<int64_t> Value::AsInt() const {
  if (IsUnsignedType(type) || type == ValueType::kBool) {
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (IsSignedType(type)) return i;
  return std::nullopt;
}

std::optional<double> Value::AsDouble() const {
  if (IsFloat()) return f;
  if (IsUnsignedType(type) || type == ValueType::kBool) return static_cast<double>(u);
  if (IsSignedType(type)) return static_cast<double>(i);
  return std::nullopt;
}

namespace {

std::string FormatDouble(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

// Quotes a string for display, escaping control characters and truncating long ones.
std::string QuoteString(const std::string& s, size_t max_chars) {
  std::string out = "\"";
  size_t n = 0;
  for (char c : s) {
    if (n++ >= max_chars) {
      out += "...";
      break;
    }
    const auto uc = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (uc < 0x20 || uc == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", uc);
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

}  // namespace

std::string Value::ToString(size_t max_items) const {
  switch (type) {
    case ValueType::kBool:
      return u ? "true" : "false";
    case ValueType::kFloat32:
    case ValueType::kFloat64:
      return FormatDouble(f);
    case ValueType::kString:
      return QuoteString(s, 200);
    case ValueType::kArray: {
      std::string out = "[";
      for (size_t k = 0; k < arr.size() && k < max_items; ++k) {
        if (k > 0) out += ", ";
        out += arr[k].ToString(max_items);
      }
      if (arr.size() > max_items) out += ", ... (" + std::to_string(arr.size()) + " items)";
      out += "]";
      return out;
    }
    default:
      if (IsSignedType(type)) return std::to_string(i);
      return std::to_string(u);
  }
}

namespace {
Value Make(ValueType t) {
  Value v;
  v.type = t;
  return v;
}
}  // namespace

Value Value::String(std::string v) {
  Value r = Make(ValueType::kString);
  r.s = std::move(v);
  return r;
}
Value Value::Uint8(uint8_t v) {
  Value r = Make(ValueType::kUint8);
  r.u = v;
  return r;
}
Value Value::Int8(int8_t v) {
  Value r = Make(ValueType::kInt8);
  r.i = v;
  return r;
}
Value Value::Uint16(uint16_t v) {
  Value r = Make(ValueType::kUint16);
  r.u = v;
  return r;
}
Value Value::Int16(int16_t v) {
  Value r = Make(ValueType::kInt16);
  r.i = v;
  return r;
}
Value Value::Uint32(uint32_t v) {
  Value r = Make(ValueType::kUint32);
  r.u = v;
  return r;
}
Value Value::Int32(int32_t v) {
  Value r = Make(ValueType::kInt32);
  r.i = v;
  return r;
}
Value Value::Uint64(uint64_t v) {
  Value r = Make(ValueType::kUint64);
  r.u = v;
  return r;
}
Value Value::Int64(int64_t v) {
  Value r = Make(ValueType::kInt64);
  r.i = v;
  return r;
}
Value Value::Float32(float v) {
  Value r = Make(ValueType::kFloat32);
  r.f = v;
  return r;
}
Value Value::Float64(double v) {
  Value r = Make(ValueType::kFloat64);
  r.f = v;
  return r;
}
Value Value::Bool(bool v) {
  Value r = Make(ValueType::kBool);
  r.u = v ? 1 : 0;
  return r;
}
Value Value::Array(ValueType elem_type, std::vector<Value> items) {
  Value r = Make(ValueType::kArray);
  r.elem_type = elem_type;
  r.arr = std::move(items);
  return r;
}
Value Value::StringArray(const std::vector<std::string>& items) {
  std::vector<Value> v;
  v.reserve(items.size());
  for (const auto& s : items) v.push_back(String(s));
  return Array(ValueType::kString, std::move(v));
}
Value Value::Float32Array(const std::vector<float>& items) {
  std::vector<Value> v;
  v.reserve(items.size());
  for (float x : items) v.push_back(Float32(x));
  return Array(ValueType::kFloat32, std::move(v));
}
Value Value::Int32Array(const std::vector<int32_t>& items) {
  std::vector<Value> v;
  v.reserve(items.size());
  for (int32_t x : items) v.push_back(Int32(x));
  return Array(ValueType::kInt32, std::move(v));
}

}  // namespace tachyon::gguf
