#include "chat/ops.h"

#include <cmath>

#include "chat/provenance.h"
#include "chat/unicode.h"

namespace tachyon::chat {
namespace {

Status TypeError(std::string m) {
  return InvalidArgument(std::move(m));
}

Status Unsupported(std::string_view op, const Value& a, const Value& b) {
  return TypeError("unsupported operand type(s) for " + std::string(op) + ": '" + a.TypeName() +
                   "' and '" + b.TypeName() + "'");
}

Status TooLong(const char* what) {
  return ResourceExhausted(std::string("template ") + what + " exceeds the size limit");
}

Result<Value> Repeat(const Value& seq, int64_t n, const SizeLimits& lim) {
  if (n < 0) n = 0;
  if ((seq.IsString() && seq.str().empty()) || (seq.IsList() && seq.list().items.empty())) {
    n = 0;
  }
  if (seq.IsString()) {
    const std::string& s = seq.str();
    if (!s.empty() && uint64_t(n) > lim.max_string_bytes / s.size()) return TooLong("string");
    std::string out;
    out.reserve(s.size() * n);
    for (int64_t i = 0; i < n; ++i) out += s;
    return seq.IsMarkup() ? Value::Markup(std::move(out)) : Value(std::move(out));
  }
  const auto& items = seq.list().items;
  if (!items.empty() && uint64_t(n) > lim.max_list_items / items.size()) return TooLong("list");
  std::vector<Value> out;
  out.reserve(items.size() * n);
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::List(std::move(out), seq.IsTuple());
}

Result<Value> IntPow(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) {
      if (__builtin_mul_overflow(result, base, &result)) return TypeError("integer overflow");
    }
    exp >>= 1;
    if (exp > 0 && __builtin_mul_overflow(base, base, &base)) return TypeError("integer overflow");
  }
  return Value(result);
}

Result<Value> Arith(std::string_view op, const Value& a, const Value& b) {
  bool as_float = a.IsFloat() || b.IsFloat();
  if (as_float) {
    double x = a.AsDouble(), y = b.AsDouble();
    if (op == "+") return Value(x + y);
    if (op == "-") return Value(x - y);
    if (op == "*") return Value(x * y);
    if (op == "**") return Value(std::pow(x, y));
    if (y == 0) return TypeError("float division by zero");
    if (op == "/") return Value(x / y);
    if (op == "//") return Value(std::floor(x / y));
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    return Value(m);
  }
  int64_t x = a.AsInt(), y = b.AsInt(), r = 0;
  if (op == "+") {
    if (__builtin_add_overflow(x, y, &r)) return TypeError("integer overflow");
    return Value(r);
  }
  if (op == "-") {
    if (__builtin_sub_overflow(x, y, &r)) return TypeError("integer overflow");
    return Value(r);
  }
  if (op == "*") {
    if (__builtin_mul_overflow(x, y, &r)) return TypeError("integer overflow");
    return Value(r);
  }
  if (op == "**") {
    if (y < 0) return Value(std::pow(double(x), double(y)));
    return IntPow(x, y);
  }
  if (op == "/") {
    if (y == 0) return TypeError("division by zero");
    return Value(double(x) / double(y));
  }
  if (y == 0) return TypeError("integer division or modulo by zero");
  if (x == INT64_MIN && y == -1) return TypeError("integer overflow");
  int64_t q = x / y, m = x % y;
  if (m != 0 && ((m < 0) != (y < 0))) {
    --q;
    m += y;
  }
  return Value(op == "//" ? q : m);
}

}  // namespace

namespace {

// a + b (or a ~ b) of two strings with their provenance.
Value Concat(const Value& a, const Value& b) {
  TrackedText t;
  t.AppendValue(a);
  t.AppendValue(b);
  return t.TakeValue();
}

Result<Value> BinaryOpUntracked(std::string_view op, const Value& a, const Value& b,
                                const SizeLimits& lim);

}  // namespace

Result<Value> BinaryOp(std::string_view op, const Value& a, const Value& b, const SizeLimits& lim) {
  if (op == "~") {
    ASSIGN_OR_RETURN(Value s, StrValue(a, lim.max_string_bytes));
    ASSIGN_OR_RETURN(Value t, StrValue(b, lim.max_string_bytes));
    if (s.str().size() + t.str().size() > lim.max_string_bytes) return TooLong("string");
    return Concat(s, t);
  }
  if (op == "+" && a.IsString() && b.IsString() && !a.IsMarkup() && !b.IsMarkup()) {
    if (a.str().size() + b.str().size() > lim.max_string_bytes) return TooLong("string");
    return Concat(a, b);
  }
  ASSIGN_OR_RETURN(Value out, BinaryOpUntracked(op, a, b, lim));
  // Any other string result (repetition, % formatting, Markup concatenation) is new text:
  // client text in full when an operand holds client text.
  if (out.IsString() && !out.client_spans() && (HasClientText(a) || HasClientText(b))) {
    return MaybeClient(out.str(), true, out.IsMarkup());
  }
  return out;
}

namespace {

Result<Value> BinaryOpUntracked(std::string_view op, const Value& a, const Value& b,
                                const SizeLimits& lim) {
  if (a.IsUndefined()) return UndefinedError(a);
  if (b.IsUndefined()) return UndefinedError(b);
  if (a.IsNumber() && b.IsNumber()) return Arith(op, a, b);
  if (op == "+") {
    if (a.IsString() && b.IsString()) {
      if (a.str().size() + b.str().size() > lim.max_string_bytes) return TooLong("string");
      if (a.IsMarkup() || b.IsMarkup()) {
        std::string s = EscapeToMarkup(a).str() + EscapeToMarkup(b).str();
        if (s.size() > lim.max_string_bytes) return TooLong("string");
        return Value::Markup(std::move(s));
      }
      return Value(a.str() + b.str());
    }
    if (a.IsList() && b.IsList() && a.IsTuple() == b.IsTuple()) {
      if (a.list().items.size() + b.list().items.size() > lim.max_list_items) {
        return TooLong("list");
      }
      std::vector<Value> items = a.list().items;
      items.insert(items.end(), b.list().items.begin(), b.list().items.end());
      return Value::List(std::move(items), a.IsTuple());
    }
    if (a.IsString() || a.IsList()) {
      std::string t = a.IsString() ? "str" : a.TypeName();
      return TypeError("can only concatenate " + t + " (not \"" + b.TypeName() + "\") to " + t);
    }
    return Unsupported(op, a, b);
  }
  if (op == "*") {
    if ((a.IsString() || a.IsList()) && b.IsIntegral()) return Repeat(a, b.AsInt(), lim);
    if ((b.IsString() || b.IsList()) && a.IsIntegral()) return Repeat(b, a.AsInt(), lim);
  }
  if (op == "%" && a.IsString()) return PercentFormat(a.str(), b, lim.max_string_bytes);
  return Unsupported(op == "**" ? "** or pow()" : op, a, b);
}

}  // namespace

Result<Value> UnaryOp(std::string_view op, const Value& a) {
  if (op == "not") return Value(!a.Truthy());
  if (a.IsUndefined()) return UndefinedError(a);
  if (!a.IsNumber()) {
    return TypeError("bad operand type for unary " + std::string(op) + ": '" + a.TypeName() + "'");
  }
  if (op == "+") return a.IsBool() ? Value(a.AsInt()) : a;
  if (a.IsFloat()) return Value(-a.AsDouble());
  if (a.AsInt() == INT64_MIN) return TypeError("integer overflow");
  return Value(-a.AsInt());
}

Result<bool> Contains(const Value& hay, const Value& needle) {
  switch (hay.kind()) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kString:
      if (!needle.IsString()) {
        return TypeError("'in <string>' requires string as left operand, not " + needle.TypeName());
      }
      return hay.str().find(needle.str()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& v : hay.list().items) {
        if (Equals(v, needle)) return true;
      }
      return false;
    case Value::Kind::kDict:
      if (!hay.IsNamespace()) {
        if (needle.IsList() && !needle.IsTuple()) return TypeError("unhashable type: 'list'");
        if (needle.IsDict()) return TypeError("unhashable type: 'dict'");
        return hay.dict().Find(needle) != nullptr;
      }
      [[fallthrough]];
    default:
      return TypeError("argument of type '" + hay.TypeName() + "' is not iterable");
  }
}

Result<int64_t> Length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return int64_t{0};
    case Value::Kind::kString:
      return int64_t(Utf8Length(v.str()));
    case Value::Kind::kList:
      return int64_t(v.list().items.size());
    case Value::Kind::kDict:
      if (!v.IsNamespace()) return int64_t(v.dict().items.size());
      [[fallthrough]];
    default:
      return TypeError("object of type '" + v.TypeName() + "' has no len()");
  }
}

Result<std::vector<Value>> Iterate(const Value& v) {
  std::vector<Value> out;
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return out;
    case Value::Kind::kString: {
      const std::string& s = v.str();
      if (IsAscii(s)) {
        for (size_t i = 0; i < s.size(); ++i) {
          out.push_back(v.client_spans() ? Substring(v, i, i + 1) : Value(std::string(1, s[i])));
        }
        return out;
      }
      const std::vector<size_t> offsets = CodepointOffsets(s);
      for (char32_t c : DecodeUtf8(s)) {
        std::string ch;
        AppendUtf8(c, &ch);
        out.push_back(MaybeClient(std::move(ch), v.client_spans() != nullptr));
      }
      if (!offsets.empty()) {
        for (size_t i = 0; i + 1 < offsets.size(); ++i)
          out[i] = CodepointSubstring(v, offsets, i, i + 1);
      }
      return out;
    }
    case Value::Kind::kList:
      return v.list().items;
    case Value::Kind::kDict:
      if (!v.IsNamespace()) {
        for (const auto& [k, val] : v.dict().items) out.push_back(k);
        return out;
      }
      [[fallthrough]];
    default:
      return TypeError("'" + v.TypeName() + "' object is not iterable");
  }
}

namespace {
Value NoAttribute(const Value& obj, std::string_view name) {
  return Value::MakeUndefined("'" + obj.ObjectTypeRepr() + "' has no attribute '" +
                              std::string(name) + "'");
}
Value NoElement(const Value& obj, const Value& key) {
  std::string k;
  (void)AppendRepr(key, &k, 4096);
  return Value::MakeUndefined(obj.ObjectTypeRepr() + " has no element " + k);
}
Value UnsafeAttribute(const Value& obj, std::string_view name) {
  return Value::MakeUndefined("access to attribute '" + std::string(name) + "' of '" +
                              obj.TypeName() + "' object is unsafe.");
}
}  // namespace

Result<Value> GetAttr(const Value& obj, std::string_view name) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      return UndefinedError(obj);
    case Value::Kind::kObject:
      return obj.object()->GetAttr(name);
    case Value::Kind::kDict:
      if (obj.IsNamespace()) {
        if (const Value* v = obj.dict().Find(name)) return *v;
        return NoAttribute(obj, name);
      }
      [[fallthrough]];
    case Value::Kind::kString:
    case Value::Kind::kList:
      if (!name.empty() && name[0] == '_') return UnsafeAttribute(obj, name);
      if (IsMethodName(obj, name)) return BindMethod(obj, name);
      if (IsUnsafeMethod(obj, name)) return UnsafeAttribute(obj, name);
      if (obj.IsDict()) {
        if (const Value* v = obj.dict().Find(name)) return *v;
      }
      return NoAttribute(obj, name);
    default:
      return NoAttribute(obj, name);
  }
}

Result<Value> GetItem(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      return UndefinedError(obj);
    case Value::Kind::kDict:
      if (obj.IsNamespace()) break;
      if (const Value* v = obj.dict().Find(key)) return *v;
      break;
    case Value::Kind::kList:
      if (key.IsIntegral()) {
        const auto& items = obj.list().items;
        int64_t i = key.AsInt();
        if (i < 0) i += int64_t(items.size());
        if (i >= 0 && i < int64_t(items.size())) return items[i];
        return NoElement(obj, key);
      }
      break;
    case Value::Kind::kString:
      if (key.IsIntegral()) {
        const std::string& s = obj.str();
        int64_t i = key.AsInt();
        if (IsAscii(s)) {
          if (i < 0) i += int64_t(s.size());
          if (i >= 0 && i < int64_t(s.size())) return Substring(obj, size_t(i), size_t(i) + 1);
        } else {
          std::u32string u = DecodeUtf8(s);
          if (i < 0) i += int64_t(u.size());
          if (i >= 0 && i < int64_t(u.size())) {
            const std::vector<size_t> offsets = CodepointOffsets(s);
            if (!offsets.empty()) return CodepointSubstring(obj, offsets, size_t(i), size_t(i) + 1);
            return MaybeClient(EncodeUtf8(u.substr(i, 1)), obj.client_spans() != nullptr,
                               obj.IsMarkup());
          }
        }
        return NoElement(obj, key);
      }
      break;
    default:
      break;
  }
  if (key.IsString()) {
    ASSIGN_OR_RETURN(Value v, GetAttr(obj, key.str()));
    return v;
  }
  return NoElement(obj, key);
}

Result<Value> Slice(const Value& obj, const Value& start_v, const Value& stop_v,
                    const Value& step_v) {
  if (obj.IsUndefined()) return UndefinedError(obj);
  if (!obj.IsString() && !obj.IsList()) {
    return TypeError("'" + obj.TypeName() + "' object is not subscriptable");
  }
  auto absent = [](const Value& v) { return v.IsUndefined() || v.IsNone(); };
  for (const Value* v : {&start_v, &stop_v, &step_v}) {
    if (!absent(*v) && !v->IsIntegral()) {
      return TypeError("slice indices must be integers or None or have an __index__ method");
    }
  }
  int64_t step = absent(step_v) ? 1 : step_v.AsInt();
  if (step == 0) return TypeError("slice step cannot be zero");
  bool ascii = obj.IsString() && IsAscii(obj.str());
  std::u32string u;
  if (obj.IsString() && !ascii) u = DecodeUtf8(obj.str());
  int64_t n = obj.IsList() ? int64_t(obj.list().items.size())
              : ascii      ? int64_t(obj.str().size())
                           : int64_t(u.size());
  auto adjust = [&](const Value& v, int64_t def) -> int64_t {
    if (absent(v)) return def;
    int64_t i = v.AsInt();
    if (i < 0) {
      i += n;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= n) {
      i = step < 0 ? n - 1 : n;
    }
    return i;
  };
  int64_t start = adjust(start_v, step < 0 ? n - 1 : 0);
  int64_t stop = adjust(stop_v, step < 0 ? -1 : n);
  std::vector<int64_t> idx;
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    idx.push_back(i);
    if (__builtin_add_overflow(i, step, &i)) break;
  }
  if (obj.IsList()) {
    std::vector<Value> items;
    items.reserve(idx.size());
    for (int64_t i : idx) items.push_back(obj.list().items[i]);
    return Value::List(std::move(items), obj.IsTuple());
  }
  if (obj.client_spans()) {
    // Keep the provenance of each selected code point.
    const std::vector<size_t> offsets = ascii ? std::vector<size_t>() : CodepointOffsets(obj.str());
    if (ascii || !offsets.empty()) {
      TrackedText t;
      for (int64_t i : idx) {
        t.AppendValue(ascii ? Substring(obj, size_t(i), size_t(i) + 1)
                            : CodepointSubstring(obj, offsets, size_t(i), size_t(i) + 1));
      }
      return t.TakeValue(obj.IsMarkup());
    }
  }
  std::string out;
  if (ascii) {
    for (int64_t i : idx) out.push_back(obj.str()[i]);
  } else {
    for (int64_t i : idx) AppendUtf8(u[i], &out);
  }
  return MaybeClient(std::move(out), obj.client_spans() != nullptr, obj.IsMarkup());
}

}  // namespace tachyon::chat
