// Global functions: range, namespace, dict, raise_exception, strftime_now, cycler, joiner.
#include <chrono>
#include <ctime>

#include "chat/builtins.h"
#include "chat/callables.h"
#include "chat/evaluator.h"

namespace tachyon::chat {
namespace {

constexpr int64_t kMaxRange = 100000;  // Jinja's sandbox MAX_RANGE

Result<Value> GRange(Renderer& r, CallArgs& args) {
  if (!args.kw.empty()) return InvalidArgument("range() takes no keyword arguments");
  if (args.pos.empty() || args.pos.size() > 3) {
    return InvalidArgument("range expected 1 to 3 arguments, got " +
                           std::to_string(args.pos.size()));
  }
  for (const Value& v : args.pos) {
    if (!v.IsIntegral()) {
      return InvalidArgument("'" + v.TypeName() + "' object cannot be interpreted as an integer");
    }
  }
  int64_t start = 0, stop, step = 1;
  if (args.pos.size() == 1) {
    stop = args.pos[0].AsInt();
  } else {
    start = args.pos[0].AsInt();
    stop = args.pos[1].AsInt();
    if (args.pos.size() == 3) step = args.pos[2].AsInt();
  }
  if (step == 0) return InvalidArgument("range() arg 3 must not be zero");
  // Count without overflow.
  __int128 span = step > 0 ? (__int128(stop) - start) : (__int128(start) - stop);
  __int128 count = span <= 0 ? 0
                             : (span + (step > 0 ? step : -__int128(step)) - 1) /
                                   (step > 0 ? step : -__int128(step));
  if (count > kMaxRange) {
    return ResourceExhausted(
        "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  }
  std::vector<Value> items;
  items.reserve(size_t(count));
  for (int64_t i = 0; i < int64_t(count); ++i) items.emplace_back(start + i * step);
  return Value::List(std::move(items));
}

Result<Value> GNamespace(Renderer& r, CallArgs& args) {
  Value ns = Value::Namespace();
  r.TrackNamespace(ns.dict_ptr());
  for (const Value& p : args.pos) {
    if (!p.IsDict()) return InvalidArgument("namespace() positional argument must be a mapping");
    for (const auto& [k, v] : p.dict().items) ns.mutable_dict().Set(k, v);
  }
  for (const auto& [k, v] : args.kw) ns.mutable_dict().Set(Value(k), v);
  return ns;
}

Result<Value> GDict(Renderer&, CallArgs& args) {
  Value d = Value::Dict();
  if (args.pos.size() > 1) return InvalidArgument("dict expected at most 1 argument");
  if (args.pos.size() == 1) {
    const Value& src = args.pos[0];
    if (src.IsDict()) {
      for (const auto& [k, v] : src.dict().items) d.mutable_dict().Set(k, v);
    } else if (src.IsList()) {
      for (const Value& pair : src.list().items) {
        if (!pair.IsList() || pair.list().items.size() != 2) {
          return InvalidArgument("dictionary update sequence element has wrong length");
        }
        d.mutable_dict().Set(pair.list().items[0], pair.list().items[1]);
      }
    } else {
      return InvalidArgument("'" + src.TypeName() + "' object is not iterable");
    }
  }
  for (const auto& [k, v] : args.kw) d.mutable_dict().Set(Value(k), v);
  return d;
}

Result<Value> GRaiseException(Renderer& r, CallArgs& args) {
  std::string msg;
  if (!args.pos.empty()) {
    ASSIGN_OR_RETURN(msg, StrOf(r, args.pos[0]));
  }
  return InvalidArgument(msg);
}

Result<Value> GStrftimeNow(Renderer& r, CallArgs& args) {
  std::vector<Value> a;
  RETURN_IF_ERROR(BindArgs("strftime_now", args, {"format"}, &a));
  if (!a[0].IsString()) return InvalidArgument("strftime_now() argument must be str");
  const std::string& fmt = a[0].str();
  if (fmt.size() > 4096) return InvalidArgument("strftime_now() format too long");
  std::time_t now = r.options().clock ? r.options().clock() : std::time(nullptr);
  std::tm tm{};
  if (r.options().clock_is_utc) {
    gmtime_r(&now, &tm);
  } else {
    localtime_r(&now, &tm);
  }
  if (fmt.empty()) return Value("");
  // strftime returns 0 both for "buffer too small" and for an empty result: grow a few times.
  std::string buf(fmt.size() * 4 + 64, '\0');
  for (int attempt = 0; attempt < 3; ++attempt) {
    size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
    if (n > 0) return Value(buf.substr(0, n));
    buf.resize(buf.size() * 8);
  }
  return Value("");
}

Value Make(const char* name, BuiltinFunction::Fn fn) {
  return Value(ObjectPtr(std::make_shared<BuiltinFunction>(name, fn)));
}

}  // namespace

Value FindGlobal(std::string_view name) {
  static const Value* range = new Value(Make("range", GRange));
  static const Value* ns = new Value(Make("namespace", GNamespace));
  static const Value* dict = new Value(Make("dict", GDict));
  static const Value* raise = new Value(Make("raise_exception", GRaiseException));
  static const Value* strftime = new Value(Make("strftime_now", GStrftimeNow));
  if (name == "range") return *range;
  if (name == "namespace") return *ns;
  if (name == "dict") return *dict;
  if (name == "raise_exception") return *raise;
  if (name == "strftime_now") return *strftime;
  return Value();
}

}  // namespace tachyon::chat
