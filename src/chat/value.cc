#include "chat/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "chat/unicode.h"

namespace tachyon::chat {

const Value* DictData::Find(const Value& key) const {
  if (key.IsString()) return Find(std::string_view(key.str()));
  for (const auto& [k, v] : items) {
    if (Equals(k, key)) return &v;
  }
  return nullptr;
}

const Value* DictData::Find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k.IsString() && k.str() == key) return &v;
  }
  return nullptr;
}

void DictData::Set(Value key, Value value) {
  depth = std::max(depth, 1 + value.Depth());
  for (auto& [k, v] : items) {
    if (Equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

Result<Value> Object::Call(Renderer&, CallArgs&) {
  return InvalidArgument("'" + TypeName() + "' object is not callable");
}

Value Object::GetAttr(std::string_view name) const {
  return Value::MakeUndefined("'" + TypeName() + " object' has no attribute '" + std::string(name) +
                              "'");
}

Value Value::List(std::vector<Value> items, bool is_tuple) {
  auto l = std::make_shared<ListData>();
  l->items = std::move(items);
  l->is_tuple = is_tuple;
  for (const Value& v : l->items) l->depth = std::max(l->depth, 1 + v.Depth());
  return Value(std::move(l));
}

Value Value::Dict(std::vector<std::pair<Value, Value>> items) {
  auto d = std::make_shared<DictData>();
  d->items = std::move(items);
  for (const auto& kv : d->items) d->depth = std::max(d->depth, 1 + kv.second.Depth());
  return Value(std::move(d));
}

Value Value::Namespace() {
  auto d = std::make_shared<DictData>();
  d->is_namespace = true;
  return Value(std::move(d));
}

int Value::Depth() const {
  if (IsList()) return list().depth;
  if (IsDict()) return dict().depth;
  return 0;
}

bool Value::Truthy() const {
  switch (kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return AsBool();
    case Kind::kInt:
      return AsInt() != 0;
    case Kind::kFloat:
      return AsDouble() != 0.0;
    case Kind::kString:
      return !str().empty();
    case Kind::kList:
      return !list().items.empty();
    case Kind::kDict:
      return dict().is_namespace || !dict().items.empty();
    case Kind::kObject:
      return true;
  }
  return false;
}

std::string Value::TypeName() const {
  switch (kind()) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return list().is_tuple ? "tuple" : "list";
    case Kind::kDict:
      return dict().is_namespace ? "Namespace" : "dict";
    case Kind::kObject:
      return object()->TypeName();
  }
  return "object";
}

std::string Value::ObjectTypeRepr() const {
  if (IsNone()) return "None";
  if (IsNamespace()) return "jinja2.utils.Namespace object";
  return TypeName() + " object";
}

Status UndefinedError(const Value& v) {
  const std::string& hint = v.IsUndefined() ? v.undefined_hint() : std::string();
  return InvalidArgument(hint.empty() ? "value is undefined" : hint);
}

std::string HtmlEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

Value EscapeToMarkup(const Value& v) {
  if (v.IsMarkup()) return v;
  auto s = ToStr(v);
  return Value::Markup(HtmlEscape(s.ok() ? *s : std::string()));
}

std::string ReprFloat(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  // sci: [-]D[.DDD]e[+-]XX
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t epos = sci.find('e');
  int exp = std::atoi(sci.c_str() + epos + 1);
  std::string digits;
  for (size_t i = 0; i < epos; ++i) {
    if (sci[i] != '.') digits.push_back(sci[i]);
  }
  std::string out = neg ? "-" : "";
  if (exp >= -5 + 1 && exp < 16) {
    if (exp >= 0) {
      if (digits.size() <= size_t(exp) + 1) {
        out += digits + std::string(exp + 1 - digits.size(), '0') + ".0";
      } else {
        out += digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
      }
    } else {
      out += "0." + std::string(-exp - 1, '0') + digits;
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char ebuf[16];
  std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  return out + ebuf;
}

namespace {

Status TooBig(size_t max_bytes) {
  return ResourceExhausted("template output exceeds the limit of " + std::to_string(max_bytes) +
                           " bytes");
}

void AppendReprString(std::string_view s, std::string* out) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  out->push_back(quote);
  for (char32_t c : DecodeUtf8(s)) {
    if (c == char32_t(quote) || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c == '\n') {
      *out += "\\n";
    } else if (c == '\r') {
      *out += "\\r";
    } else if (c == '\t') {
      *out += "\\t";
    } else if (!IsPrintable(c)) {
      char buf[16];
      if (c < 0x100) {
        std::snprintf(buf, sizeof(buf), "\\x%02x", unsigned(c));
      } else if (c < 0x10000) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", unsigned(c));
      } else {
        std::snprintf(buf, sizeof(buf), "\\U%08x", unsigned(c));
      }
      *out += buf;
    } else {
      AppendUtf8(c, out);
    }
  }
  out->push_back(quote);
}

}  // namespace

Status AppendStr(const Value& v, std::string* out, size_t max_bytes) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return OkStatus();
    case Value::Kind::kString:
      if (out->size() + v.str().size() > max_bytes) return TooBig(max_bytes);
      *out += v.str();
      return OkStatus();
    default:
      return AppendRepr(v, out, max_bytes, 0);
  }
}

Status AppendRepr(const Value& v, std::string* out, size_t max_bytes, int depth) {
  if (depth > kMaxPrintDepth) return ResourceExhausted("value nested too deeply to print");
  if (out->size() > max_bytes) return TooBig(max_bytes);
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      *out += "Undefined";
      break;
    case Value::Kind::kNone:
      *out += "None";
      break;
    case Value::Kind::kBool:
      *out += v.AsBool() ? "True" : "False";
      break;
    case Value::Kind::kInt:
      *out += std::to_string(v.AsInt());
      break;
    case Value::Kind::kFloat:
      *out += ReprFloat(v.AsDouble());
      break;
    case Value::Kind::kString:
      if (v.IsMarkup()) *out += "Markup(";
      AppendReprString(v.str(), out);
      if (v.IsMarkup()) *out += ")";
      break;
    case Value::Kind::kList: {
      const ListData& l = v.list();
      out->push_back(l.is_tuple ? '(' : '[');
      for (size_t i = 0; i < l.items.size(); ++i) {
        if (i) *out += ", ";
        RETURN_IF_ERROR(AppendRepr(l.items[i], out, max_bytes, depth + 1));
      }
      if (l.is_tuple && l.items.size() == 1) out->push_back(',');
      out->push_back(l.is_tuple ? ')' : ']');
      break;
    }
    case Value::Kind::kDict: {
      const DictData& d = v.dict();
      if (d.is_namespace) *out += "<Namespace ";
      out->push_back('{');
      for (size_t i = 0; i < d.items.size(); ++i) {
        if (i) *out += ", ";
        RETURN_IF_ERROR(AppendRepr(d.items[i].first, out, max_bytes, depth + 1));
        *out += ": ";
        RETURN_IF_ERROR(AppendRepr(d.items[i].second, out, max_bytes, depth + 1));
      }
      out->push_back('}');
      if (d.is_namespace) out->push_back('>');
      break;
    }
    case Value::Kind::kObject:
      *out += v.object()->Repr();
      break;
  }
  if (out->size() > max_bytes) return TooBig(max_bytes);
  return OkStatus();
}

Result<std::string> ToStr(const Value& v, size_t max_bytes) {
  if (v.IsString()) return v.str();
  std::string out;
  RETURN_IF_ERROR(AppendStr(v, &out, max_bytes));
  return out;
}

namespace {

void AppendJsonString(std::string_view s, bool ensure_ascii, std::string* out) {
  out->push_back('"');
  auto escape_unit = [&](unsigned u) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "\\u%04x", u);
    *out += buf;
  };
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = s[i];
    if (c >= 0x80) {
      if (!ensure_ascii) {
        out->push_back(static_cast<char>(c));
        ++i;
        continue;
      }
      size_t j = i + 1;
      while (j < s.size() && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80) ++j;
      for (char32_t cp : DecodeUtf8(s.substr(i, j - i))) {
        if (cp >= 0x10000) {
          cp -= 0x10000;
          escape_unit(0xD800 + (cp >> 10));
          escape_unit(0xDC00 + (cp & 0x3FF));
        } else {
          escape_unit(cp);
        }
      }
      i = j;
      continue;
    }
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (c < 0x20 || (ensure_ascii && c == 0x7F)) {
          escape_unit(c);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  out->push_back('"');
}

Result<std::string> JsonKey(const Value& k) {
  switch (k.kind()) {
    case Value::Kind::kString:
      return k.str();
    case Value::Kind::kBool:
      return std::string(k.AsBool() ? "true" : "false");
    case Value::Kind::kNone:
      return std::string("null");
    case Value::Kind::kInt:
      return std::to_string(k.AsInt());
    case Value::Kind::kFloat:
      return ReprFloat(k.AsDouble());
    default:
      return InvalidArgument("keys must be str, int, float, bool or None, not " + k.TypeName());
  }
}

}  // namespace

Status DumpJson(const Value& v, const JsonDumpOptions& opt, std::string* out, size_t max_bytes,
                int depth) {
  if (depth > kMaxPrintDepth) return ResourceExhausted("value nested too deeply for tojson");
  if (out->size() > max_bytes) return TooBig(max_bytes);
  auto newline = [&](int level) {
    out->push_back('\n');
    for (int i = 0; i < level; ++i) *out += opt.indent;
  };
  switch (v.kind()) {
    case Value::Kind::kNone:
      *out += "null";
      break;
    case Value::Kind::kBool:
      *out += v.AsBool() ? "true" : "false";
      break;
    case Value::Kind::kInt:
      *out += std::to_string(v.AsInt());
      break;
    case Value::Kind::kFloat: {
      double d = v.AsDouble();
      if (std::isnan(d))
        *out += "NaN";
      else if (std::isinf(d))
        *out += d > 0 ? "Infinity" : "-Infinity";
      else
        *out += ReprFloat(d);
      break;
    }
    case Value::Kind::kString:
      AppendJsonString(v.str(), opt.ensure_ascii, out);
      break;
    case Value::Kind::kList: {
      const auto& items = v.list().items;
      if (items.empty()) {
        *out += "[]";
        break;
      }
      out->push_back('[');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) *out += opt.item_sep;
        if (opt.has_indent) newline(depth + 1);
        RETURN_IF_ERROR(DumpJson(items[i], opt, out, max_bytes, depth + 1));
      }
      if (opt.has_indent) newline(depth);
      out->push_back(']');
      break;
    }
    case Value::Kind::kDict: {
      if (v.dict().is_namespace) {
        return InvalidArgument("Object of type Namespace is not JSON serializable");
      }
      std::vector<std::pair<std::string, const Value*>> items;
      for (const auto& [k, val] : v.dict().items) {
        ASSIGN_OR_RETURN(std::string key, JsonKey(k));
        items.emplace_back(std::move(key), &val);
      }
      if (opt.sort_keys) {
        std::stable_sort(items.begin(), items.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      }
      if (items.empty()) {
        *out += "{}";
        break;
      }
      out->push_back('{');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) *out += opt.item_sep;
        if (opt.has_indent) newline(depth + 1);
        AppendJsonString(items[i].first, opt.ensure_ascii, out);
        *out += opt.key_sep;
        RETURN_IF_ERROR(DumpJson(*items[i].second, opt, out, max_bytes, depth + 1));
      }
      if (opt.has_indent) newline(depth);
      out->push_back('}');
      break;
    }
    case Value::Kind::kUndefined:
    case Value::Kind::kObject:
      return InvalidArgument("Object of type " + v.TypeName() + " is not JSON serializable");
  }
  if (out->size() > max_bytes) return TooBig(max_bytes);
  return OkStatus();
}

bool Equals(const Value& a, const Value& b, int depth) {
  if (depth > kMaxPrintDepth) return false;
  if (a.IsNumber() && b.IsNumber()) {
    if (a.IsFloat() || b.IsFloat()) return a.AsDouble() == b.AsDouble();
    return a.AsInt() == b.AsInt();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.str() == b.str();
    case Value::Kind::kList: {
      const ListData& x = a.list();
      const ListData& y = b.list();
      if (x.is_tuple != y.is_tuple || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i) {
        if (!Equals(x.items[i], y.items[i], depth + 1)) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const DictData& x = a.dict();
      const DictData& y = b.dict();
      if (x.is_namespace || y.is_namespace) return &x == &y;
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* other = y.Find(k);
        if (!other || !Equals(v, *other, depth + 1)) return false;
      }
      return true;
    }
    case Value::Kind::kObject:
      return a.object() == b.object();
    default:
      return false;
  }
}

Result<bool> Less(const Value& a, const Value& b, int depth) {
  if (depth > kMaxPrintDepth) return ResourceExhausted("value nested too deeply to compare");
  if (a.IsNumber() && b.IsNumber()) {
    if (a.IsFloat() || b.IsFloat()) return a.AsDouble() < b.AsDouble();
    return a.AsInt() < b.AsInt();
  }
  if (a.IsUndefined()) return UndefinedError(a);
  if (b.IsUndefined()) return UndefinedError(b);
  if (a.IsString() && b.IsString()) return a.str() < b.str();  // UTF-8 order = code points
  if (a.IsList() && b.IsList() && a.IsTuple() == b.IsTuple()) {
    const auto& x = a.list().items;
    const auto& y = b.list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (Equals(x[i], y[i], depth + 1)) continue;
      return Less(x[i], y[i], depth + 1);
    }
    return x.size() < y.size();
  }
  return InvalidArgument("'<' not supported between instances of '" + a.TypeName() + "' and '" +
                         b.TypeName() + "'");
}

namespace {
Value JsonString(std::string s, bool client) {
  if (!client || s.empty()) return Value(std::move(s));
  const size_t n = s.size();
  return Value::Tracked(std::move(s), {{0, n}});
}

template <typename Json>
Result<Value> FromJsonImpl(const Json& j, int depth, bool client) {
  if (depth > kMaxPrintDepth) return InvalidArgument("JSON context nested too deeply");
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return Value::None();
    case nlohmann::json::value_t::boolean:
      return Value(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      uint64_t u = j.template get<uint64_t>();
      if (u <= uint64_t(INT64_MAX)) return Value(int64_t(u));
      return Value(double(u));
    }
    case nlohmann::json::value_t::number_float:
      return Value(j.template get<double>());
    case nlohmann::json::value_t::string:
      return JsonString(j.template get<std::string>(), client);
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) {
        ASSIGN_OR_RETURN(Value v, FromJsonImpl(e, depth + 1, client));
        items.push_back(std::move(v));
      }
      return Value::List(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      std::vector<std::pair<Value, Value>> items;
      items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) {
        ASSIGN_OR_RETURN(Value v, FromJsonImpl(it.value(), depth + 1, client));
        items.emplace_back(JsonString(it.key(), client), std::move(v));
      }
      return Value::Dict(std::move(items));
    }
    default:
      return Value::None();
  }
}
}  // namespace

Result<Value> FromJson(const nlohmann::ordered_json& j, bool client) {
  return FromJsonImpl(j, 0, client);
}
Result<Value> FromJson(const nlohmann::json& j, bool client) {
  return FromJsonImpl(j, 0, client);
}

}  // namespace tachyon::chat
