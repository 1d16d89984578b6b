// Jinja's built-in filters (the ones chat templates use), with Jinja 3 semantics, plus
// transformers' tojson.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "chat/builtins.h"
#include "chat/evaluator.h"
#include "chat/ops.h"
#include "chat/provenance.h"
#include "chat/unicode.h"

namespace tachyon::chat {
namespace {

using Args = std::vector<Value>;

// Filters that transform a string keep markupsafe.Markup-ness, as Markup's methods do.
Value Like(const Value& input, std::string s) {
  return input.IsMarkup() ? Value::Markup(std::move(s)) : Value(std::move(s));
}

// Jinja's make_attrgetter: "a.b.0" looked up item-first at each step.
Result<Value> GetPath(const Value& item, const Value& attribute) {
  if (attribute.IsIntegral()) return GetItem(item, attribute);
  if (!attribute.IsString()) return InvalidArgument("attribute must be a string or an integer");
  Value cur = item;
  const std::string& path = attribute.str();
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    Value key(part);
    int64_t index = 0;
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), index);
    if (!part.empty() && part[0] != '-' && ec == std::errc() && end == part.data() + part.size()) {
      key = Value(index);
    }
    ASSIGN_OR_RETURN(cur, GetItem(cur, key));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return cur;
}

// Sort key: lower-cased strings unless case_sensitive.
Value SortKey(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.IsString()) return Value(PyLower(v.str()));
  return v;
}

Status SortValues(std::vector<std::pair<Value, Value>>* keyed, bool reverse) {
  Status err;
  std::stable_sort(keyed->begin(), keyed->end(), [&](const auto& a, const auto& b) {
    if (!err.ok()) return false;
    auto r = reverse ? Less(b.first, a.first) : Less(a.first, b.first);
    if (!r.ok()) {
      err = r.status();
      return false;
    }
    return *r;
  });
  return err;
}

Result<Value> FTojson(Renderer& r, const Value& v, CallArgs& args) {
  Args a;
  RETURN_IF_ERROR(
      BindArgs("tojson", args, {"indent", "ensure_ascii", "separators", "sort_keys"}, &a));
  JsonDumpOptions opt;
  if (!Absent(a[0])) {
    opt.has_indent = true;
    if (a[0].IsString()) {
      opt.indent = a[0].str();
    } else if (a[0].IsIntegral()) {
      opt.indent = std::string(std::clamp<int64_t>(a[0].AsInt(), 0, 64), ' ');
    } else {
      return InvalidArgument("tojson: indent must be an int or a string");
    }
  }
  opt.item_sep = opt.has_indent ? "," : ", ";
  if (!Absent(a[1])) opt.ensure_ascii = a[1].Truthy();
  if (!Absent(a[2])) {
    if (!a[2].IsList() || a[2].list().items.size() != 2 || !a[2].list().items[0].IsString() ||
        !a[2].list().items[1].IsString()) {
      return InvalidArgument("tojson: separators must be a pair of strings");
    }
    opt.item_sep = a[2].list().items[0].str();
    opt.key_sep = a[2].list().items[1].str();
  }
  if (!Absent(a[3])) opt.sort_keys = a[3].Truthy();
  std::string out;
  RETURN_IF_ERROR(DumpJson(v, opt, &out, r.size_limits().max_string_bytes));
  return MaybeClient(std::move(out), HasClientText(v));
}

Result<Value> FLength(Renderer&, const Value& v, CallArgs&) {
  ASSIGN_OR_RETURN(int64_t n, Length(v));
  return Value(n);
}

Result<Value> FTrim(Renderer& r, const Value& v, CallArgs& args) {
  Args a;
  RETURN_IF_ERROR(BindArgs("trim", args, {"chars"}, &a));
  ASSIGN_OR_RETURN(Value s, StrValue(v, r.size_limits().max_string_bytes));
  return StripValue(s, a[0], true, true);
}

Result<Value> FString(Renderer& r, const Value& v, CallArgs&) {
  if (v.IsString()) return v;
  return StrValue(v, r.size_limits().max_string_bytes);
}

Result<Value> FItems(Renderer&, const Value& v, CallArgs&) {
  if (v.IsUndefined()) return Value::List({});
  if (!v.IsDict()) return InvalidArgument("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, val] : v.dict().items) out.push_back(Value::List({k, val}, true));
  return Value::List(std::move(out));
}

Result<Value> FJoin(Renderer& r, const Value& v, CallArgs& args) {
  Args a;
  RETURN_IF_ERROR(BindArgs("join", args, {"d", "attribute"}, &a));
  const size_t limit = r.size_limits().max_string_bytes;
  ASSIGN_OR_RETURN(Value sep,
                   a[0].IsUndefined() ? Result<Value>(Value("")) : StrValue(a[0], limit));
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  TrackedText out;
  for (size_t i = 0; i < items.size(); ++i) {
    Value item = items[i];
    if (!a[1].IsUndefined()) {
      ASSIGN_OR_RETURN(item, GetPath(item, a[1]));
    }
    if (i) RETURN_IF_ERROR(AppendStr(sep, &out, limit));
    RETURN_IF_ERROR(AppendStr(item, &out, limit));
  }
  return out.TakeValue();
}

Result<Value> FDefault(Renderer&, const Value& v, CallArgs& args) {
  Args a;
  RETURN_IF_ERROR(BindArgs("default", args, {"default_value", "boolean"}, &a));
  bool use_default = v.IsUndefined() || (a[1].Truthy() && !v.Truthy());
  if (!use_default) return v;
  return a[0].IsUndefined() ? Value("") : a[0];
}

Result<Value> FList(Renderer&, const Value& v, CallArgs&) {
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  return Value::List(std::move(items));
}

Result<Value> FSafe(Renderer& r, const Value& v, CallArgs&) {
  ASSIGN_OR_RETURN(Value s, StrValue(v, r.size_limits().max_string_bytes));
  return Value::Tracked(s.str(), s.client_spans() ? *s.client_spans() : Spans(), true);
}

// select / reject / selectattr / rejectattr
Result<Value> SelectImpl(Renderer& r, const Value& v, CallArgs& args, bool with_attr,
                         bool keep_when) {
  if (!v.Truthy()) return Value::List({});  // Jinja: `if value:` guards the loop
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  size_t next = 0;
  Value attr;
  if (with_attr) {
    if (args.pos.empty()) return InvalidArgument("selectattr/rejectattr need an attribute");
    attr = args.pos[next++];
  }
  std::string test;
  if (next < args.pos.size()) {
    if (!args.pos[next].IsString()) return InvalidArgument("test name must be a string");
    test = args.pos[next++].str();
  }
  CallArgs test_args;
  test_args.pos.assign(args.pos.begin() + next, args.pos.end());
  test_args.kw = args.kw;
  std::vector<Value> out;
  for (const Value& item : items) {
    RETURN_IF_ERROR(r.Step());
    Value x = item;
    if (with_attr) {
      ASSIGN_OR_RETURN(x, GetPath(item, attr));
    }
    bool pass;
    if (test.empty()) {
      pass = x.Truthy();
    } else {
      CallArgs copy = test_args;
      ASSIGN_OR_RETURN(pass, r.ApplyTest(test, x, copy));
    }
    if (pass == keep_when) out.push_back(item);
  }
  return Value::List(std::move(out));
}

Result<Value> FSelect(Renderer& r, const Value& v, CallArgs& a) {
  return SelectImpl(r, v, a, false, true);
}
Result<Value> FReject(Renderer& r, const Value& v, CallArgs& a) {
  return SelectImpl(r, v, a, false, false);
}
Result<Value> FSelectAttr(Renderer& r, const Value& v, CallArgs& a) {
  return SelectImpl(r, v, a, true, true);
}
Result<Value> FRejectAttr(Renderer& r, const Value& v, CallArgs& a) {
  return SelectImpl(r, v, a, true, false);
}

Result<Value> FMap(Renderer& r, const Value& v, CallArgs& args) {
  if (!v.Truthy()) return Value::List({});  // Jinja: `if value:` guards the loop
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  std::vector<Value> out;
  if (args.pos.empty()) {
    Args a;
    RETURN_IF_ERROR(BindArgs("map", args, {"attribute", "default"}, &a));
    if (a[0].IsUndefined()) return InvalidArgument("map() needs a filter name or attribute=");
    for (const Value& item : items) {
      RETURN_IF_ERROR(r.Step());
      ASSIGN_OR_RETURN(Value x, GetPath(item, a[0]));
      if (x.IsUndefined() && !a[1].IsUndefined()) x = a[1];
      out.push_back(std::move(x));
    }
    return Value::List(std::move(out));
  }
  if (!args.pos[0].IsString()) return InvalidArgument("map(): filter name must be a string");
  std::string name = args.pos[0].str();
  CallArgs rest;
  rest.pos.assign(args.pos.begin() + 1, args.pos.end());
  rest.kw = args.kw;
  for (const Value& item : items) {
    RETURN_IF_ERROR(r.Step());
    CallArgs copy = rest;
    ASSIGN_OR_RETURN(Value x, r.ApplyFilter(name, item, copy));
    out.push_back(std::move(x));
  }
  return Value::List(std::move(out));
}

Result<Value> FDictsort(Renderer&, const Value& v, CallArgs& args) {
  Args a;
  RETURN_IF_ERROR(BindArgs("dictsort", args, {"case_sensitive", "by", "reverse"}, &a));
  if (!v.IsDict()) return InvalidArgument("dictsort: expected a mapping, got " + v.TypeName());
  bool by_value = a[1].IsString() && a[1].str() == "value";
  if (a[1].IsString() && !by_value && a[1].str() != "key") {
    return InvalidArgument("You can only sort by either \"key\" or \"value\"");
  }
  std::vector<std::pair<Value, Value>> keyed;
  for (const auto& [k, val] : v.dict().items) {
    keyed.emplace_back(SortKey(by_value ? val : k, a[0].Truthy()), Value::List({k, val}, true));
  }
  RETURN_IF_ERROR(SortValues(&keyed, a[2].Truthy()));
  std::vector<Value> out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return Value::List(std::move(out));
}

Result<Value> FSort(Renderer&, const Value& v, CallArgs& args) {
  Args a;
  RETURN_IF_ERROR(BindArgs("sort", args, {"reverse", "case_sensitive", "attribute"}, &a));
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& item : items) {
    Value key = item;
    if (!a[2].IsUndefined()) {
      ASSIGN_OR_RETURN(key, GetPath(item, a[2]));
    }
    keyed.emplace_back(SortKey(key, a[1].Truthy()), std::move(item));
  }
  RETURN_IF_ERROR(SortValues(&keyed, a[0].Truthy()));
  std::vector<Value> out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return Value::List(std::move(out));
}

Result<Value> FUnique(Renderer&, const Value& v, CallArgs& args) {
  Args a;
  RETURN_IF_ERROR(BindArgs("unique", args, {"case_sensitive", "attribute"}, &a));
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  std::vector<Value> seen, out;
  for (Value& item : items) {
    Value key = item;
    if (!a[1].IsUndefined()) {
      ASSIGN_OR_RETURN(key, GetPath(item, a[1]));
    }
    key = SortKey(key, a[0].Truthy());
    bool dup = false;
    for (const Value& s : seen) dup = dup || Equals(s, key);
    if (dup) continue;
    seen.push_back(key);
    out.push_back(std::move(item));
  }
  return Value::List(std::move(out));
}

Result<Value> FUpper(Renderer& r, const Value& v, CallArgs&) {
  ASSIGN_OR_RETURN(std::string s, StrOf(r, v));
  return Like(v, PyUpper(s));
}
Result<Value> FLower(Renderer& r, const Value& v, CallArgs&) {
  ASSIGN_OR_RETURN(std::string s, StrOf(r, v));
  return Like(v, PyLower(s));
}
Result<Value> FCapitalize(Renderer& r, const Value& v, CallArgs&) {
  ASSIGN_OR_RETURN(std::string s, StrOf(r, v));
  return Like(v, PyCapitalize(s));
}

// Jinja's title: words start after runs of whitespace, '-', '(', '{', '[', '<'.
Result<Value> FTitle(Renderer& r, const Value& v, CallArgs&) {
  ASSIGN_OR_RETURN(std::string s, StrOf(r, v));
  std::string out;
  bool at_start = true;
  for (char32_t c : DecodeUtf8(s)) {
    bool delim = IsSpace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (delim) {
      AppendUtf8(c, &out);
      at_start = true;
    } else {
      AppendUtf8(at_start ? ToUpper(c) : ToLower(c), &out);
      at_start = false;
    }
  }
  return Like(v, std::move(out));
}

Result<Value> FReplace(Renderer& r, const Value& v, CallArgs& args) {
  ASSIGN_OR_RETURN(Value s, StrValue(v, r.size_limits().max_string_bytes));
  Args a;
  RETURN_IF_ERROR(BindArgs("replace", args, {"old", "new", "count"}, &a));
  CallArgs m;
  for (int i = 0; i < 3; ++i) {
    if (i < 2 || !Absent(a[i])) {
      if (i < 2 && !a[i].IsString()) {
        ASSIGN_OR_RETURN(Value t, StrValue(a[i], r.size_limits().max_string_bytes));
        m.pos.push_back(std::move(t));
      } else {
        m.pos.push_back(a[i]);
      }
    }
  }
  return CallMethod(r, s, "replace", m);
}

Result<Value> FIndent(Renderer& r, const Value& v, CallArgs& args) {
  Args a;
  RETURN_IF_ERROR(BindArgs("indent", args, {"width", "first", "blank"}, &a));
  ASSIGN_OR_RETURN(std::string s, StrOf(r, v));
  std::string ind;
  if (a[0].IsString()) {
    ind = a[0].str();
  } else if (a[0].IsUndefined()) {
    ind = "    ";
  } else if (a[0].IsIntegral()) {
    ind = std::string(std::clamp<int64_t>(a[0].AsInt(), 0, 1024), ' ');
  } else {
    return InvalidArgument("indent: width must be an int or a string");
  }
  s += "\n";
  CallArgs none;
  ASSIGN_OR_RETURN(Value lines_v, CallMethod(r, Value(s), "splitlines", none));
  const auto& lines = lines_v.list().items;
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i].str();
    if (i > 0) {
      out += "\n";
      if (a[2].Truthy() || !line.empty()) out += ind;
    }
    out += line;
    if (out.size() > r.size_limits().max_string_bytes) {
      return ResourceExhausted("string exceeds the size limit");
    }
  }
  if (a[1].Truthy()) out = ind + out;
  return Like(v, std::move(out));
}

// Python int(str, base) with surrounding whitespace and underscores allowed.
bool ParseInt(std::string s, int base, int64_t* out) {
  s = PyStrip(s, Value(), true, true);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, base);
  if (errno || *end != '\0') return false;
  *out = v;
  return true;
}

bool ParseFloat(std::string s, double* out) {
  s = PyStrip(s, Value(), true, true);
  if (s.empty()) return false;
  char* end = nullptr;
  double d = std::strtod(s.c_str(), &end);
  if (*end != '\0') return false;
  *out = d;
  return true;
}

Result<Value> FInt(Renderer&, const Value& v, CallArgs& args) {
  Args a;
  RETURN_IF_ERROR(BindArgs("int", args, {"default", "base"}, &a));
  Value def = a[0].IsUndefined() ? Value(int64_t{0}) : a[0];
  int base = a[1].IsIntegral() ? int(a[1].AsInt()) : 10;
  if (v.IsIntegral()) return Value(v.AsInt());
  if (v.IsFloat()) {
    double d = v.AsDouble();
    if (!std::isfinite(d) || std::fabs(d) > 9.2e18) return def;
    return Value(int64_t(d));
  }
  if (v.IsString()) {
    int64_t i;
    if (ParseInt(v.str(), base, &i)) return Value(i);
    double d;
    if (ParseFloat(v.str(), &d) && std::isfinite(d) && std::fabs(d) < 9.2e18) {
      return Value(int64_t(d));
    }
  }
  return def;
}

Result<Value> FFloat(Renderer&, const Value& v, CallArgs& args) {
  Args a;
  RETURN_IF_ERROR(BindArgs("float", args, {"default"}, &a));
  if (v.IsNumber()) return Value(v.AsDouble());
  double d;
  if (v.IsString() && ParseFloat(v.str(), &d)) return Value(d);
  return a[0].IsUndefined() ? Value(0.0) : a[0];
}

Result<Value> FAbs(Renderer&, const Value& v, CallArgs&) {
  if (v.IsFloat()) return Value(std::fabs(v.AsDouble()));
  if (v.IsIntegral()) {
    if (v.AsInt() == INT64_MIN) return InvalidArgument("integer overflow");
    return Value(v.AsInt() < 0 ? -v.AsInt() : v.AsInt());
  }
  return InvalidArgument("bad operand type for abs(): '" + v.TypeName() + "'");
}

Result<Value> FRound(Renderer&, const Value& v, CallArgs& args) {
  Args a;
  RETURN_IF_ERROR(BindArgs("round", args, {"precision", "method"}, &a));
  if (!v.IsNumber()) return InvalidArgument("round: expected a number, got " + v.TypeName());
  int64_t p = a[0].IsIntegral() ? std::clamp<int64_t>(a[0].AsInt(), -300, 300) : 0;
  std::string method = a[1].IsString() ? a[1].str() : "common";
  if (method == "common") {
    if (v.IsIntegral()) return Value(v.AsInt());
    if (p >= 0) {
      char buf[1024];
      std::snprintf(buf, sizeof(buf), "%.*f", int(p), v.AsDouble());  // round-half-even, exact
      return Value(std::strtod(buf, nullptr));
    }
    double scale = std::pow(10.0, double(-p));
    return Value(std::nearbyint(v.AsDouble() / scale) * scale);
  }
  double scale = std::pow(10.0, double(p));
  if (method == "floor") return Value(std::floor(v.AsDouble() * scale) / scale);
  if (method == "ceil") return Value(std::ceil(v.AsDouble() * scale) / scale);
  return InvalidArgument("method must be 'common', 'ceil' or 'floor'");
}

Result<Value> FFirst(Renderer&, const Value& v, CallArgs&) {
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  if (items.empty()) return Value::MakeUndefined("No first item, sequence was empty.");
  return items.front();
}

Result<Value> FLast(Renderer&, const Value& v, CallArgs&) {
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  if (items.empty()) return Value::MakeUndefined("No last item, sequence was empty.");
  return items.back();
}

Result<Value> FReverse(Renderer&, const Value& v, CallArgs&) {
  if (v.IsString()) {
    std::u32string u = DecodeUtf8(v.str());
    std::reverse(u.begin(), u.end());
    return Value(EncodeUtf8(u));
  }
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  std::reverse(items.begin(), items.end());
  return Value::List(std::move(items));
}

Result<Value> FWordcount(Renderer& r, const Value& v, CallArgs&) {
  ASSIGN_OR_RETURN(std::string s, StrOf(r, v));
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : DecodeUtf8(s)) {
    bool w = IsWordChar(c);
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value(n);
}

Result<Value> FBatch(Renderer&, const Value& v, CallArgs& args) {
  Args a;
  RETURN_IF_ERROR(BindArgs("batch", args, {"linecount", "fill_with"}, &a));
  if (!a[0].IsIntegral() || a[0].AsInt() <= 0) {
    return InvalidArgument("batch: linecount must be a positive integer");
  }
  size_t n = size_t(a[0].AsInt());
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  std::vector<Value> out, cur;
  for (Value& item : items) {
    cur.push_back(std::move(item));
    if (cur.size() == n) {
      out.push_back(Value::List(std::move(cur)));
      cur.clear();
    }
  }
  if (!cur.empty()) {
    if (!a[1].IsUndefined()) {
      while (cur.size() < n) cur.push_back(a[1]);
    }
    out.push_back(Value::List(std::move(cur)));
  }
  return Value::List(std::move(out));
}

Result<Value> FSum(Renderer& r, const Value& v, CallArgs& args) {
  Args a;
  RETURN_IF_ERROR(BindArgs("sum", args, {"attribute", "start"}, &a));
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  Value total = a[1].IsUndefined() ? Value(int64_t{0}) : a[1];
  for (const Value& item : items) {
    Value x = item;
    if (!a[0].IsUndefined()) {
      ASSIGN_OR_RETURN(x, GetPath(item, a[0]));
    }
    if (x.IsString()) return InvalidArgument("unsupported operand type(s) for +: 'int' and 'str'");
    ASSIGN_OR_RETURN(total, BinaryOp("+", total, x, r.size_limits()));
  }
  return total;
}

Result<Value> MinMax(const Value& v, CallArgs& args, bool want_max) {
  Args a;
  RETURN_IF_ERROR(BindArgs(want_max ? "max" : "min", args, {"case_sensitive", "attribute"}, &a));
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  if (items.empty()) return Value::MakeUndefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key;
  for (size_t i = 0; i < items.size(); ++i) {
    Value key = items[i];
    if (!a[1].IsUndefined()) {
      ASSIGN_OR_RETURN(key, GetPath(items[i], a[1]));
    }
    key = SortKey(key, a[0].Truthy());
    if (i == 0) {
      best_key = key;
      continue;
    }
    ASSIGN_OR_RETURN(bool better, want_max ? Less(best_key, key) : Less(key, best_key));
    if (better) {
      best = i;
      best_key = key;
    }
  }
  return items[best];
}
Result<Value> FMin(Renderer&, const Value& v, CallArgs& a) {
  return MinMax(v, a, false);
}
Result<Value> FMax(Renderer&, const Value& v, CallArgs& a) {
  return MinMax(v, a, true);
}

Result<Value> FEscape(Renderer&, const Value& v, CallArgs&) {
  return EscapeToMarkup(v);
}

Result<Value> FForceEscape(Renderer& r, const Value& v, CallArgs&) {
  ASSIGN_OR_RETURN(std::string s, StrOf(r, v));
  return Value::Markup(HtmlEscape(s));
}

Result<Value> FCenter(Renderer& r, const Value& v, CallArgs& args) {
  Args a;
  RETURN_IF_ERROR(BindArgs("center", args, {"width"}, &a));
  ASSIGN_OR_RETURN(std::string s, StrOf(r, v));
  CallArgs m;
  m.pos.push_back(a[0].IsUndefined() ? Value(int64_t{80}) : a[0]);
  ASSIGN_OR_RETURN(Value out, CallMethod(r, Value(s), "center", m));
  return Like(v, out.str());
}

Result<Value> FTruncate(Renderer& r, const Value& v, CallArgs& args) {
  Args a;
  RETURN_IF_ERROR(BindArgs("truncate", args, {"length", "killwords", "end", "leeway"}, &a));
  ASSIGN_OR_RETURN(std::string s, StrOf(r, v));
  int64_t length = a[0].IsIntegral() ? a[0].AsInt() : 255;
  std::string end = a[2].IsString() ? a[2].str() : "...";
  int64_t leeway = a[3].IsIntegral() ? a[3].AsInt() : 5;
  int64_t end_len = int64_t(Utf8Length(end));
  if (length < end_len) return InvalidArgument("expected length >= " + std::to_string(end_len));
  if (leeway < 0) return InvalidArgument("expected leeway >= 0");
  std::u32string u = DecodeUtf8(s);
  if (int64_t(u.size()) <= length + leeway) return Value(s);
  std::string head = EncodeUtf8(u.substr(0, length - end_len));
  if (a[1].Truthy()) return Value(head + end);
  size_t sp = head.rfind(' ');
  if (sp != std::string::npos) head = head.substr(0, sp);
  return Value(head + end);
}

Result<Value> FAttr(Renderer&, const Value& v, CallArgs& args) {
  Args a;
  RETURN_IF_ERROR(BindArgs("attr", args, {"name"}, &a));
  if (!a[0].IsString()) return InvalidArgument("attr: name must be a string");
  return GetAttr(v, a[0].str());
}

Result<Value> FPprint(Renderer& r, const Value& v, CallArgs&) {
  std::string out;
  RETURN_IF_ERROR(AppendRepr(v, &out, r.size_limits().max_string_bytes));
  return Value(std::move(out));
}

// "%s-%s"|format(a, b) is "%s-%s" % (a, b).
Result<Value> FFormat(Renderer& r, const Value& v, CallArgs& args) {
  ASSIGN_OR_RETURN(std::string fmt, StrOf(r, v));
  if (!args.kw.empty()) {
    std::vector<std::pair<Value, Value>> items;
    for (const auto& [k, val] : args.kw) items.emplace_back(Value(k), val);
    return PercentFormat(fmt, Value::Dict(std::move(items)), r.size_limits().max_string_bytes);
  }
  return PercentFormat(fmt, Value::List(args.pos, true), r.size_limits().max_string_bytes);
}

const std::unordered_map<std::string_view, FilterFn>& Filters() {
  static const auto* m = new std::unordered_map<std::string_view, FilterFn>{
      {"tojson", FTojson},
      {"length", FLength},
      {"count", FLength},
      {"trim", FTrim},
      {"string", FString},
      {"items", FItems},
      {"join", FJoin},
      {"default", FDefault},
      {"d", FDefault},
      {"list", FList},
      {"safe", FSafe},
      {"select", FSelect},
      {"reject", FReject},
      {"selectattr", FSelectAttr},
      {"rejectattr", FRejectAttr},
      {"map", FMap},
      {"dictsort", FDictsort},
      {"sort", FSort},
      {"unique", FUnique},
      {"upper", FUpper},
      {"lower", FLower},
      {"capitalize", FCapitalize},
      {"title", FTitle},
      {"replace", FReplace},
      {"indent", FIndent},
      {"int", FInt},
      {"float", FFloat},
      {"abs", FAbs},
      {"round", FRound},
      {"first", FFirst},
      {"last", FLast},
      {"reverse", FReverse},
      {"wordcount", FWordcount},
      {"batch", FBatch},
      {"sum", FSum},
      {"min", FMin},
      {"max", FMax},
      {"escape", FEscape},
      {"e", FEscape},
      {"forceescape", FForceEscape},
      {"center", FCenter},
      {"truncate", FTruncate},
      {"attr", FAttr},
      {"format", FFormat},
      {"pprint", FPprint},
  };
  return *m;
}

}  // namespace

bool FilterKeepsProvenance(std::string_view name) {
  // Filters whose string results carry exact provenance: pass-through of an existing value, or
  // built with TrackedText / Substring above.
  static constexpr std::string_view kTracked[] = {"tojson", "trim",    "string", "join", "default",
                                                  "d",      "first",   "last",   "min",  "max",
                                                  "safe",   "replace", "attr",   "list"};
  return std::find(std::begin(kTracked), std::end(kTracked), name) != std::end(kTracked);
}

FilterFn FindFilter(std::string_view name) {
  auto it = Filters().find(name);
  return it == Filters().end() ? nullptr : it->second;
}

}  // namespace tachyon::chat
