// Python methods of str, list and dict values.
#include <algorithm>
#include <charconv>

#include "chat/builtins.h"
#include "chat/evaluator.h"
#include "chat/ops.h"
#include "chat/provenance.h"
#include "chat/unicode.h"

namespace tachyon::chat {
namespace {

constexpr std::string_view kStrMethods[] = {
    "strip",      "lstrip",       "rstrip",       "split",   "rsplit",  "splitlines", "startswith",
    "endswith",   "replace",      "upper",        "lower",   "title",   "capitalize", "swapcase",
    "casefold",   "find",         "rfind",        "index",   "rindex",  "count",      "join",
    "isdigit",    "isalpha",      "isalnum",      "isspace", "isupper", "islower",    "isnumeric",
    "isdecimal",  "istitle",      "center",       "ljust",   "rjust",   "zfill",      "partition",
    "rpartition", "removeprefix", "removesuffix", "format"};
constexpr std::string_view kListMethods[] = {"index", "count", "copy"};
constexpr std::string_view kDictMethods[] = {"items", "keys", "values", "get", "copy"};
constexpr std::string_view kUnsafeList[] = {"append", "extend",  "insert", "pop",
                                            "remove", "reverse", "sort",   "clear"};
constexpr std::string_view kUnsafeDict[] = {"pop", "popitem", "setdefault", "update", "clear"};

template <size_t N>
bool In(const std::string_view (&arr)[N], std::string_view name) {
  return std::find(std::begin(arr), std::end(arr), name) != std::end(arr);
}

Status ArgError(std::string_view method, const std::string& what) {
  return InvalidArgument(std::string(method) + "() " + what);
}

Result<std::string> StrArg(std::string_view method, const Value& v) {
  if (!v.IsString()) {
    return ArgError(method, "argument must be str, not " + v.TypeName());
  }
  return v.str();
}

// Byte offset → code point index.
int64_t CpIndex(std::string_view s, size_t byte) {
  int64_t n = 0;
  for (size_t i = 0; i < byte && i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) ++n;
  }
  return n;
}

std::vector<std::string> SplitWhitespace(std::string_view s, int64_t maxsplit, bool from_right) {
  std::u32string u = DecodeUtf8(s);
  std::vector<std::string> parts;
  if (!from_right) {
    size_t i = 0;
    while (true) {
      while (i < u.size() && IsSpace(u[i])) ++i;
      if (i >= u.size()) break;
      if (maxsplit >= 0 && int64_t(parts.size()) == maxsplit) {
        parts.push_back(EncodeUtf8(u.substr(i)));
        break;
      }
      size_t j = i;
      while (j < u.size() && !IsSpace(u[j])) ++j;
      parts.push_back(EncodeUtf8(u.substr(i, j - i)));
      i = j;
    }
    return parts;
  }
  size_t e = u.size();
  while (true) {
    while (e > 0 && IsSpace(u[e - 1])) --e;
    if (e == 0) break;
    if (maxsplit >= 0 && int64_t(parts.size()) == maxsplit) {
      parts.push_back(EncodeUtf8(u.substr(0, e)));
      break;
    }
    size_t b = e;
    while (b > 0 && !IsSpace(u[b - 1])) --b;
    parts.push_back(EncodeUtf8(u.substr(b, e - b)));
    e = b;
  }
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::vector<std::string> SplitSep(std::string_view s, std::string_view sep, int64_t maxsplit,
                                  bool from_right) {
  std::vector<std::string> parts;
  if (!from_right) {
    size_t start = 0;
    while (maxsplit < 0 || int64_t(parts.size()) < maxsplit) {
      size_t k = s.find(sep, start);
      if (k == std::string_view::npos) break;
      parts.emplace_back(s.substr(start, k - start));
      start = k + sep.size();
    }
    parts.emplace_back(s.substr(start));
    return parts;
  }
  size_t end = s.size();
  while (maxsplit < 0 || int64_t(parts.size()) < maxsplit) {
    if (end < sep.size()) break;
    size_t k = s.rfind(sep, end - sep.size());
    if (k == std::string_view::npos) break;
    parts.emplace_back(s.substr(k + sep.size(), end - k - sep.size()));
    end = k;
  }
  parts.emplace_back(s.substr(0, end));
  std::reverse(parts.begin(), parts.end());
  return parts;
}

// The parts of a split of `recv` as substrings that keep their provenance. The parts lie in
// order in recv.str(); `sep_len` > 0: consecutive parts are exactly that many bytes apart;
// 0: they are apart by whitespace only (and never empty).
Value PartsList(const Value& recv, const std::vector<std::string>& parts, size_t sep_len) {
  const std::string& s = recv.str();
  std::vector<Value> items;
  items.reserve(parts.size());
  size_t cursor = 0;
  for (const std::string& p : parts) {
    size_t at = sep_len > 0 ? cursor : s.find(p, cursor);
    if (at == std::string::npos || s.compare(at, p.size(), p) != 0) {
      // Cannot happen for the splits above; stay safe rather than guess.
      items.push_back(MaybeClient(p, recv.client_spans() != nullptr));
      continue;
    }
    items.push_back(Substring(recv, at, at + p.size()));
    cursor = at + p.size() + sep_len;
  }
  return Value::List(std::move(items));
}

Result<Value> Pad(std::string_view method, const std::string& s, const std::vector<Value>& a) {
  if (!a[0].IsIntegral()) return ArgError(method, "width must be an integer");
  std::string fill = " ";
  if (!Absent(a[1])) {
    if (!a[1].IsString() || Utf8Length(a[1].str()) != 1) {
      return ArgError(method, "The fill character must be exactly one character long");
    }
    fill = a[1].str();
  }
  int64_t width = std::min<int64_t>(a[0].AsInt(), 1 << 22);
  int64_t len = int64_t(Utf8Length(s));
  if (width <= len) return Value(s);
  int64_t marg = width - len;
  int64_t left = 0;
  if (method == "center") {
    left = marg / 2 + (marg & width & 1);
  } else if (method == "rjust") {
    left = marg;
  }
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < marg - left; ++i) out += fill;
  return Value(std::move(out));
}

Result<Value> Format(Renderer& r, const Value& recv, CallArgs& args) {
  const std::string& fmt = recv.str();
  TrackedText out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') ++i;
      out.Append("}");
      continue;
    }
    if (c != '{') {
      out.Append(std::string_view(&fmt[i], 1));
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.Append("{");
      ++i;
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string::npos)
      return InvalidArgument("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    if (field.find(':') != std::string::npos || field.find('!') != std::string::npos) {
      return InvalidArgument("format specs in str.format are not supported");
    }
    const Value* v = nullptr;
    if (field.empty()) {
      if (auto_index < args.pos.size()) v = &args.pos[auto_index++];
    } else if (std::all_of(field.begin(), field.end(), ::isdigit)) {
      size_t k = 0;
      std::from_chars(field.data(), field.data() + std::min<size_t>(field.size(), 6), k);
      if (k < args.pos.size()) v = &args.pos[k];
    } else {
      for (const auto& [name, val] : args.kw) {
        if (name == field) v = &val;
      }
    }
    if (!v) return InvalidArgument("format argument '" + field + "' not found");
    ASSIGN_OR_RETURN(Value piece, StrValue(*v, r.size_limits().max_string_bytes));
    out.AppendValue(piece);
    if (out.size() > r.size_limits().max_string_bytes) {
      return ResourceExhausted("string exceeds the size limit");
    }
    i = close;
  }
  // A format string that itself holds client text: its literal parts are not tracked one by
  // one, so the whole result counts as client text.
  if (recv.client_spans()) out.MarkClientFrom(0);
  return out.TakeValue();
}

Result<Value> StrMethod(Renderer& r, const Value& recv, std::string_view m, CallArgs& args) {
  const std::string& s = recv.str();
  std::vector<Value> a;
  if (m == "format") return Format(r, recv, args);
  if (m == "strip" || m == "lstrip" || m == "rstrip") {
    RETURN_IF_ERROR(BindArgs(m, args, {"chars"}, &a));
    if (!Absent(a[0]) && !a[0].IsString()) return ArgError(m, "arg must be None or str");
    return StripValue(recv, a[0], m != "rstrip", m != "lstrip");
  }
  if (m == "split" || m == "rsplit") {
    RETURN_IF_ERROR(BindArgs(m, args, {"sep", "maxsplit"}, &a));
    int64_t maxsplit = a[1].IsIntegral() ? a[1].AsInt() : -1;
    if (Absent(a[0])) return PartsList(recv, SplitWhitespace(s, maxsplit, m == "rsplit"), 0);
    ASSIGN_OR_RETURN(std::string sep, StrArg(m, a[0]));
    if (sep.empty()) return InvalidArgument("empty separator");
    return PartsList(recv, SplitSep(s, sep, maxsplit, m == "rsplit"), sep.size());
  }
  if (m == "splitlines") {
    RETURN_IF_ERROR(BindArgs(m, args, {"keepends"}, &a));
    bool keep = a[0].Truthy();
    std::u32string u = DecodeUtf8(s);
    const std::vector<size_t> offsets = CodepointOffsets(s);
    std::vector<Value> parts;
    auto part = [&](size_t b, size_t e) {
      if (!offsets.empty()) return CodepointSubstring(recv, offsets, b, e);
      return MaybeClient(EncodeUtf8(u.substr(b, e - b)), recv.client_spans() != nullptr);
    };
    size_t start = 0;
    for (size_t i = 0; i < u.size(); ++i) {
      if (!IsLineBreak(u[i])) continue;
      size_t end = i;
      if (u[i] == '\r' && i + 1 < u.size() && u[i + 1] == '\n') ++i;
      parts.push_back(part(start, keep ? i + 1 : end));
      start = i + 1;
    }
    if (start < u.size()) parts.push_back(part(start, u.size()));
    return Value::List(std::move(parts));
  }
  if (m == "startswith" || m == "endswith") {
    RETURN_IF_ERROR(BindArgs(m, args, {"prefix", "start", "end"}, &a));
    std::string sub = s;
    if (!Absent(a[1]) || !Absent(a[2])) {
      ASSIGN_OR_RETURN(Value sl, Slice(Value(s), a[1], a[2], Value()));
      sub = sl.str();
    }
    std::vector<Value> cands = a[0].IsTuple() ? a[0].list().items : std::vector<Value>{a[0]};
    for (const Value& c : cands) {
      if (!c.IsString()) {
        return ArgError(m, "first arg must be str or a tuple of str, not " + c.TypeName());
      }
      const std::string& p = c.str();
      bool hit = p.size() <= sub.size() &&
                 (m == "startswith" ? sub.compare(0, p.size(), p) == 0
                                    : sub.compare(sub.size() - p.size(), p.size(), p) == 0);
      if (hit) return Value(true);
    }
    return Value(false);
  }
  if (m == "replace") {
    RETURN_IF_ERROR(BindArgs(m, args, {"old", "new", "count"}, &a));
    ASSIGN_OR_RETURN(std::string old_s, StrArg(m, a[0]));
    RETURN_IF_ERROR(StrArg(m, a[1]).status());
    const Value& new_v = a[1];
    int64_t count = a[2].IsIntegral() ? a[2].AsInt() : -1;
    TrackedText out;
    size_t limit = r.size_limits().max_string_bytes;
    if (old_s.empty()) {
      const std::vector<size_t> offsets = CodepointOffsets(s);
      if (offsets.empty() && !s.empty()) return InvalidArgument("replace: invalid string");
      const size_t n = offsets.empty() ? 0 : offsets.size() - 1;
      int64_t done = 0;
      for (size_t i = 0; i <= n; ++i) {
        if (count < 0 || done < count) {
          out.AppendValue(new_v);
          ++done;
        }
        if (i < n) out.AppendValue(CodepointSubstring(recv, offsets, i, i + 1));
        if (out.size() > limit) return ResourceExhausted("string exceeds the size limit");
      }
      return out.TakeValue();
    }
    size_t start = 0;
    int64_t done = 0;
    while (count < 0 || done < count) {
      size_t k = s.find(old_s, start);
      if (k == std::string::npos) break;
      out.AppendValue(Substring(recv, start, k));
      out.AppendValue(new_v);
      start = k + old_s.size();
      ++done;
      if (out.size() > limit) return ResourceExhausted("string exceeds the size limit");
    }
    out.AppendValue(Substring(recv, start, s.size()));
    return out.TakeValue();
  }
  if (m == "upper") return Value(PyUpper(s));
  if (m == "lower" || m == "casefold") return Value(PyLower(s));
  if (m == "title") return Value(PyTitle(s));
  if (m == "capitalize") return Value(PyCapitalize(s));
  if (m == "swapcase") {
    std::string out;
    for (char32_t c : DecodeUtf8(s)) {
      AppendUtf8(IsUpper(c) ? ToLower(c) : IsLower(c) ? ToUpper(c) : c, &out);
    }
    return Value(std::move(out));
  }
  if (m == "find" || m == "rfind" || m == "index" || m == "rindex" || m == "count") {
    RETURN_IF_ERROR(BindArgs(m, args, {"sub", "start", "end"}, &a));
    ASSIGN_OR_RETURN(std::string sub, StrArg(m, a[0]));
    int64_t offset = 0;
    std::string hay = s;
    if (!Absent(a[1]) || !Absent(a[2])) {
      ASSIGN_OR_RETURN(Value sl, Slice(Value(s), a[1], a[2], Value()));
      hay = sl.str();
      if (a[1].IsIntegral()) {
        int64_t st = a[1].AsInt(), n = int64_t(Utf8Length(s));
        offset = st < 0 ? std::max<int64_t>(0, st + n) : std::min(st, n);
      }
    }
    if (m == "count") {
      if (sub.empty()) return Value(int64_t(Utf8Length(hay)) + 1);
      int64_t n = 0;
      for (size_t k = hay.find(sub); k != std::string::npos; k = hay.find(sub, k + sub.size())) {
        ++n;
      }
      return Value(n);
    }
    size_t k = (m == "find" || m == "index") ? hay.find(sub) : hay.rfind(sub);
    if (k == std::string::npos) {
      if (m == "index" || m == "rindex") return InvalidArgument("substring not found");
      return Value(int64_t{-1});
    }
    return Value(offset + CpIndex(hay, k));
  }
  if (m == "join") {
    RETURN_IF_ERROR(BindArgs(m, args, {"iterable"}, &a));
    ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(a[0]));
    TrackedText out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].IsString()) {
        return InvalidArgument("sequence item " + std::to_string(i) + ": expected str instance, " +
                               items[i].TypeName() + " found");
      }
      if (i) out.AppendValue(recv);
      out.AppendValue(items[i]);
      if (out.size() > r.size_limits().max_string_bytes) {
        return ResourceExhausted("string exceeds the size limit");
      }
    }
    return out.TakeValue();
  }
  if (m.substr(0, 2) == "is") {
    std::u32string u = DecodeUtf8(s);
    if (u.empty()) return Value(false);
    bool all = true, any_cased = false;
    for (char32_t c : u) {
      bool ok = true;
      if (m == "isdigit" || m == "isnumeric" || m == "isdecimal") ok = c >= '0' && c <= '9';
      if (m == "isalpha") ok = IsAlpha(c);
      if (m == "isalnum") ok = IsAlpha(c) || (c >= '0' && c <= '9');
      if (m == "isspace") ok = IsSpace(c);
      if (m == "isupper") ok = !IsLower(c), any_cased |= IsUpper(c);
      if (m == "islower") ok = !IsUpper(c), any_cased |= IsLower(c);
      all = all && ok;
    }
    if (m == "isupper" || m == "islower") return Value(all && any_cased);
    if (m == "istitle") return Value(PyTitle(s) == s && s != PyLower(s));
    return Value(all);
  }
  if (m == "center" || m == "ljust" || m == "rjust") {
    RETURN_IF_ERROR(BindArgs(m, args, {"width", "fillchar"}, &a));
    return Pad(m, s, a);
  }
  if (m == "zfill") {
    RETURN_IF_ERROR(BindArgs(m, args, {"width"}, &a));
    if (!a[0].IsIntegral()) return ArgError(m, "width must be an integer");
    int64_t len = int64_t(Utf8Length(s));
    int64_t width = std::min<int64_t>(a[0].AsInt(), 1 << 24);
    if (width <= len) return Value(s);
    size_t sign = (!s.empty() && (s[0] == '+' || s[0] == '-')) ? 1 : 0;
    return Value(s.substr(0, sign) + std::string(width - len, '0') + s.substr(sign));
  }
  if (m == "partition" || m == "rpartition") {
    RETURN_IF_ERROR(BindArgs(m, args, {"sep"}, &a));
    ASSIGN_OR_RETURN(std::string sep, StrArg(m, a[0]));
    if (sep.empty()) return InvalidArgument("empty separator");
    size_t k = m == "partition" ? s.find(sep) : s.rfind(sep);
    if (k == std::string::npos) {
      if (m == "partition") return Value::List({recv, Value(""), Value("")}, true);
      return Value::List({Value(""), Value(""), recv}, true);
    }
    return Value::List({Substring(recv, 0, k), Substring(recv, k, k + sep.size()),
                        Substring(recv, k + sep.size(), s.size())},
                       true);
  }
  if (m == "removeprefix" || m == "removesuffix") {
    RETURN_IF_ERROR(BindArgs(m, args, {"fix"}, &a));
    ASSIGN_OR_RETURN(std::string fix, StrArg(m, a[0]));
    if (m == "removeprefix" && s.compare(0, fix.size(), fix) == 0)
      return Substring(recv, fix.size(), s.size());
    if (m == "removesuffix" && fix.size() <= s.size() &&
        s.compare(s.size() - fix.size(), fix.size(), fix) == 0) {
      return Substring(recv, 0, s.size() - fix.size());
    }
    return recv;
  }
  return InvalidArgument("'str' object has no attribute '" + std::string(m) + "'");
}

Result<Value> ListMethod(const Value& list, std::string_view m, CallArgs& args) {
  std::vector<Value> a;
  const auto& items = list.list().items;
  if (m == "copy") return Value::List(items, list.IsTuple());
  RETURN_IF_ERROR(BindArgs(m, args, {"value"}, &a));
  if (m == "count") {
    int64_t n = 0;
    for (const Value& v : items) n += Equals(v, a[0]);
    return Value(n);
  }
  for (size_t i = 0; i < items.size(); ++i) {
    if (Equals(items[i], a[0])) return Value(int64_t(i));
  }
  return InvalidArgument("value is not in list");
}

Result<Value> DictMethod(const Value& dict, std::string_view m, CallArgs& args) {
  const auto& items = dict.dict().items;
  std::vector<Value> out;
  if (m == "items") {
    for (const auto& [k, v] : items) out.push_back(Value::List({k, v}, true));
    return Value::List(std::move(out));
  }
  if (m == "keys" || m == "values") {
    for (const auto& [k, v] : items) out.push_back(m == "keys" ? k : v);
    return Value::List(std::move(out));
  }
  if (m == "copy") return Value::Dict(items);
  std::vector<Value> a;
  RETURN_IF_ERROR(BindArgs(m, args, {"key", "default"}, &a));
  if (const Value* v = dict.dict().Find(a[0])) return *v;
  return a[1].IsUndefined() ? Value::None() : a[1];
}

// str methods whose results keep exact provenance (see StrMethod); the others build new text,
// which counts as client text in full when the receiver or an argument holds any.
constexpr std::string_view kTrackedStrMethods[] = {
    "format",  "strip", "lstrip",    "rstrip",     "split",        "rsplit",      "splitlines",
    "replace", "join",  "partition", "rpartition", "removeprefix", "removesuffix"};

Result<Value> TrackedStrMethod(Renderer& r, const Value& receiver, std::string_view name,
                               CallArgs& args) {
  ASSIGN_OR_RETURN(Value v, StrMethod(r, receiver, name, args));
  if (!v.IsString() || v.client_spans() || In(kTrackedStrMethods, name)) return v;
  bool client = receiver.client_spans() != nullptr;
  for (const Value& a : args.pos) client = client || HasClientText(a);
  for (const auto& [k, a] : args.kw) client = client || HasClientText(a);
  return client ? MaybeClient(v.str(), true) : v;
}

}  // namespace

bool IsMethodName(const Value& receiver, std::string_view name) {
  if (receiver.IsString()) return In(kStrMethods, name);
  if (receiver.IsList()) return In(kListMethods, name);
  if (receiver.IsDict()) return In(kDictMethods, name);
  return false;
}

bool IsUnsafeMethod(const Value& receiver, std::string_view name) {
  if (receiver.IsList()) return In(kUnsafeList, name);
  if (receiver.IsDict()) return In(kUnsafeDict, name);
  return false;
}

Result<Value> CallMethod(Renderer& r, const Value& receiver, std::string_view name,
                         CallArgs& args) {
  if (receiver.IsMarkup()) {
    // markupsafe.Markup: string-returning methods return Markup; replace escapes its args.
    static constexpr std::string_view kKeep[] = {
        "strip",    "lstrip",  "rstrip", "upper", "lower", "title", "capitalize",
        "swapcase", "replace", "center", "ljust", "rjust", "zfill", "casefold"};
    if (name == "replace") {
      for (Value& a : args.pos) {
        if (a.IsString()) a = EscapeToMarkup(a);
      }
    }
    ASSIGN_OR_RETURN(Value v, TrackedStrMethod(r, receiver, name, args));
    if (v.IsString() && In(kKeep, name)) {
      return Value::Tracked(v.str(), v.client_spans() ? *v.client_spans() : Spans(), true);
    }
    return v;
  }
  if (receiver.IsString()) return TrackedStrMethod(r, receiver, name, args);
  if (receiver.IsList() && In(kListMethods, name)) return ListMethod(receiver, name, args);
  if (receiver.IsDict() && In(kDictMethods, name)) return DictMethod(receiver, name, args);
  return InvalidArgument("'" + receiver.TypeName() + "' object has no attribute '" +
                         std::string(name) + "'");
}

std::string PyStrip(std::string_view s, const Value& chars, bool left, bool right) {
  bool custom = chars.IsString();
  if (IsAscii(s) && (!custom || IsAscii(chars.str()))) {
    auto strip_char = [&](char c) {
      return custom ? chars.str().find(c) != std::string::npos
                    : IsSpace(static_cast<unsigned char>(c));
    };
    size_t b = 0, e = s.size();
    if (left) {
      while (b < e && strip_char(s[b])) ++b;
    }
    if (right) {
      while (e > b && strip_char(s[e - 1])) --e;
    }
    return std::string(s.substr(b, e - b));
  }
  std::u32string set = custom ? DecodeUtf8(chars.str()) : std::u32string();
  auto strip_char = [&](char32_t c) {
    return custom ? set.find(c) != std::u32string::npos : IsSpace(c);
  };
  std::u32string u = DecodeUtf8(s);
  size_t b = 0, e = u.size();
  if (left) {
    while (b < e && strip_char(u[b])) ++b;
  }
  if (right) {
    while (e > b && strip_char(u[e - 1])) --e;
  }
  return EncodeUtf8(u.substr(b, e - b));
}

// recv.strip(chars) / lstrip / rstrip as a substring of recv (keeps provenance). A left strip
// leaves a result whose first code point is not a stripped one, so its first occurrence in
// recv is where it starts.
Value StripValue(const Value& recv, const Value& chars, bool left, bool right) {
  const std::string& s = recv.str();
  std::string out = PyStrip(s, chars, left, right);
  const size_t at = (left && !out.empty()) ? s.find(out) : 0;
  if (at == std::string::npos) return MaybeClient(out, recv.client_spans() != nullptr);
  return Substring(recv, at, at + out.size());
}

std::string PyCapitalize(std::string_view s) {
  std::u32string u = DecodeUtf8(s);
  std::string out;
  for (size_t i = 0; i < u.size(); ++i) AppendUtf8(i == 0 ? ToUpper(u[i]) : ToLower(u[i]), &out);
  return out;
}

std::string PyTitle(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (char32_t c : DecodeUtf8(s)) {
    bool cased = IsUpper(c) || IsLower(c);
    if (cased) {
      AppendUtf8(prev_cased ? ToLower(c) : ToUpper(c), &out);
    } else {
      AppendUtf8(c, &out);
    }
    prev_cased = cased;
  }
  return out;
}

Status BindArgs(std::string_view fn, const CallArgs& args,
                std::initializer_list<std::string_view> names, std::vector<Value>* out) {
  out->assign(names.size(), Value());
  if (args.pos.size() > names.size()) {
    return InvalidArgument(std::string(fn) + "() takes at most " + std::to_string(names.size()) +
                           " arguments (" + std::to_string(args.pos.size()) + " given)");
  }
  for (size_t i = 0; i < args.pos.size(); ++i) (*out)[i] = args.pos[i];
  for (const auto& [k, v] : args.kw) {
    auto it = std::find(names.begin(), names.end(), k);
    if (it == names.end()) {
      return InvalidArgument(std::string(fn) + "() got an unexpected keyword argument '" + k + "'");
    }
    (*out)[it - names.begin()] = v;
  }
  return OkStatus();
}

Result<std::string> StrOf(Renderer& r, const Value& v) {
  return ToStr(v, r.size_limits().max_string_bytes);
}

}  // namespace tachyon::chat
