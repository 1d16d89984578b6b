// Values of the Jinja interpreter, with Python semantics: None, bool, int (int64), float,
// str (UTF-8), list / tuple, dict (insertion order), namespace, callables, and Jinja's
// lenient Undefined (prints as "", iterates empty, is false; attribute access, calls and
// arithmetic on it fail with its hint).
//
// Lists and dicts are shared by reference (like Python objects). Lists, tuples and dicts
// are never mutated after construction (the sandbox is immutable); namespaces are.
// Values are not thread-safe to share across renders, except immutable strings and numbers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace tachyon::chat {

class Value;
class Renderer;

// A byte range [begin, end) of a string.
struct Span {
  size_t begin = 0, end = 0;
  bool operator==(const Span&) const = default;
};
// Provenance of a string's bytes: the ranges that came from client data (the request's JSON)
// rather than from the template. Sorted, disjoint, non-empty, never adjacent.
using Spans = std::vector<Span>;

struct NoneType {};
struct Undefined {
  std::string hint;  // error message on use; "" means the generic one
};

struct ListData {
  std::vector<Value> items;
  bool is_tuple = false;
  int depth = 1;  // nesting depth of lists / dicts (see Value::Depth)
};

struct DictData {
  std::vector<std::pair<Value, Value>> items;  // insertion order
  bool is_namespace = false;
  int depth = 1;
  const Value* Find(const Value& key) const;
  const Value* Find(std::string_view key) const;
  // Inserts or replaces (keeps the original position on replace).
  void Set(Value key, Value value);
};

// Positional and keyword arguments of a call.
struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};

// Anything callable or attribute-bearing defined by the interpreter (macros, globals,
// bound methods, the loop object).
class Object {
 public:
  virtual ~Object() = default;
  virtual std::string TypeName() const = 0;  // Python class name, e.g. "Macro"
  virtual std::string Repr() const { return "<" + TypeName() + ">"; }
  virtual bool IsCallable() const { return true; }
  virtual Result<Value> Call(Renderer& r, CallArgs& args);
  // Attribute lookup; returns Undefined when absent.
  virtual Value GetAttr(std::string_view name) const;
};

using ListPtr = std::shared_ptr<ListData>;
using DictPtr = std::shared_ptr<DictData>;
using ObjectPtr = std::shared_ptr<Object>;

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kObject
  };

  Value() : v_(Undefined{}) {}
  static Value MakeUndefined(std::string hint = "") { return Value(Undefined{std::move(hint)}); }
  static Value None() { return Value(NoneType{}); }
  Value(bool b) : v_(b) {}                           // NOLINT
  Value(int64_t i) : v_(i) {}                        // NOLINT
  Value(int i) : v_(int64_t{i}) {}                   // NOLINT
  Value(double f) : v_(f) {}                         // NOLINT
  Value(std::string s) : v_(std::move(s)) {}         // NOLINT
  Value(std::string_view s) : v_(std::string(s)) {}  // NOLINT
  Value(const char* s) : v_(std::string(s)) {}       // NOLINT
  Value(ListPtr l) : v_(std::move(l)) {}             // NOLINT
  Value(DictPtr d) : v_(std::move(d)) {}             // NOLINT
  Value(ObjectPtr o) : v_(std::move(o)) {}           // NOLINT

  // A markupsafe.Markup string (from |safe / |escape): `+` with a plain string escapes the
  // plain side; prints like any string.
  static Value Markup(std::string s) {
    Value v(std::move(s));
    v.markup_ = true;
    return v;
  }
  // A string whose bytes in `spans` came from client data (see Spans); empty spans: none.
  static Value Tracked(std::string s, Spans spans, bool markup = false) {
    Value v(std::move(s));
    v.markup_ = markup;
    v.set_client_spans(std::move(spans));
    return v;
  }
  static Value List(std::vector<Value> items, bool is_tuple = false);
  static Value Dict(std::vector<std::pair<Value, Value>> items = {});
  static Value Namespace();

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool IsUndefined() const { return kind() == Kind::kUndefined; }
  bool IsNone() const { return kind() == Kind::kNone; }
  bool IsBool() const { return kind() == Kind::kBool; }
  bool IsInt() const { return kind() == Kind::kInt; }
  bool IsFloat() const { return kind() == Kind::kFloat; }
  bool IsString() const { return kind() == Kind::kString; }
  bool IsList() const { return kind() == Kind::kList; }  // list or tuple
  bool IsTuple() const { return IsList() && list().is_tuple; }
  bool IsDict() const { return kind() == Kind::kDict && !dict().is_namespace; }
  bool IsNamespace() const { return kind() == Kind::kDict && dict().is_namespace; }
  bool IsObject() const { return kind() == Kind::kObject; }
  bool IsMarkup() const { return markup_ && IsString(); }
  // int or bool (Python: bool is an int) / int, bool or float.
  bool IsIntegral() const { return IsInt() || IsBool(); }
  bool IsNumber() const { return IsIntegral() || IsFloat(); }

  bool AsBool() const { return std::get<bool>(v_); }
  int64_t AsInt() const { return IsBool() ? int64_t{AsBool()} : std::get<int64_t>(v_); }
  double AsDouble() const { return IsFloat() ? std::get<double>(v_) : double(AsInt()); }
  const std::string& str() const { return std::get<std::string>(v_); }
  const ListData& list() const { return *std::get<ListPtr>(v_); }
  const DictData& dict() const { return *std::get<DictPtr>(v_); }
  DictData& mutable_dict() const { return *std::get<DictPtr>(v_); }
  const ListPtr& list_ptr() const { return std::get<ListPtr>(v_); }
  const DictPtr& dict_ptr() const { return std::get<DictPtr>(v_); }
  const ObjectPtr& object() const { return std::get<ObjectPtr>(v_); }
  const std::string& undefined_hint() const { return std::get<Undefined>(v_).hint; }

  // For strings: the bytes that came from client data; nullptr when none did (always for
  // other kinds). Copies of a value share its provenance.
  const Spans* client_spans() const { return spans_.get(); }
  void set_client_spans(Spans spans) {
    if (spans.empty()) {
      spans_.reset();
    } else {
      spans_ = std::make_shared<const Spans>(std::move(spans));
    }
  }

  // Nesting depth of list / dict containers (0 for scalars and namespaces). Bounded so that
  // destroying or printing a value never recurses deeper than the limit.
  int Depth() const;
  // Python truthiness.
  bool Truthy() const;
  // Python type name: NoneType, bool, int, float, str, list, tuple, dict, Namespace, ...
  std::string TypeName() const;
  // Jinja's object_type_repr: "None", "dict object", "str object", ...
  std::string ObjectTypeRepr() const;

 private:
  explicit Value(Undefined u) : v_(std::move(u)) {}
  explicit Value(NoneType n) : v_(n) {}
  std::variant<Undefined, NoneType, bool, int64_t, double, std::string, ListPtr, DictPtr, ObjectPtr>
      v_;
  std::shared_ptr<const Spans> spans_;  // strings only (see client_spans)
  bool markup_ = false;
};

// HTML-escapes & < > " ' as markupsafe does.
std::string HtmlEscape(std::string_view s);
// markupsafe.escape: Markup values unchanged, anything else str() and escaped.
Value EscapeToMarkup(const Value& v);

// The error that using an Undefined raises ("'x' is undefined" or its hint).
Status UndefinedError(const Value& undefined);

// Python str(v) / repr(v). Nesting deeper than kMaxPrintDepth (or a namespace cycle) and
// output beyond max_bytes fail.
inline constexpr int kMaxPrintDepth = 256;
inline constexpr int kMaxValueDepth = 200;
Status AppendStr(const Value& v, std::string* out, size_t max_bytes);
Status AppendRepr(const Value& v, std::string* out, size_t max_bytes, int depth = 0);
Result<std::string> ToStr(const Value& v, size_t max_bytes = 64u << 20);
std::string ReprFloat(double d);  // Python repr(float)

// Python json.dumps(v, ensure_ascii, indent, separators, sort_keys).
struct JsonDumpOptions {
  bool ensure_ascii = false;
  bool has_indent = false;
  std::string indent;    // used when has_indent
  std::string item_sep;  // default ", " or "," with indent
  std::string key_sep = ": ";
  bool sort_keys = false;
};
Status DumpJson(const Value& v, const JsonDumpOptions& opt, std::string* out, size_t max_bytes,
                int depth = 0);

// Python ==, and <; Less fails with a TypeError-like message for unorderable types.
bool Equals(const Value& a, const Value& b, int depth = 0);
Result<bool> Less(const Value& a, const Value& b, int depth = 0);

// JSON → Value (objects keep their key order; integers stay ints). Fails beyond
// kMaxPrintDepth levels of nesting.
// With `client` set, every string (and object key) is marked as client data in full.
Result<Value> FromJson(const nlohmann::ordered_json& j, bool client = false);
Result<Value> FromJson(const nlohmann::json& j, bool client = false);

}  // namespace tachyon::chat
