// Jinja's built-in tests (`x is defined`, `x is divisibleby 3`, ...).
#include <cmath>
#include <unordered_map>

#include "chat/builtins.h"
#include "chat/evaluator.h"
#include "chat/ops.h"
#include "chat/unicode.h"

namespace tachyon::chat {
namespace {

Result<Value> Arg0(std::string_view test, const CallArgs& args) {
  std::vector<Value> a;
  RETURN_IF_ERROR(BindArgs(test, args, {"other"}, &a));
  return a[0];
}

Result<bool> TDefined(Renderer&, const Value& v, CallArgs&) {
  return !v.IsUndefined();
}
Result<bool> TUndefined(Renderer&, const Value& v, CallArgs&) {
  return v.IsUndefined();
}
Result<bool> TNone(Renderer&, const Value& v, CallArgs&) {
  return v.IsNone();
}
Result<bool> TString(Renderer&, const Value& v, CallArgs&) {
  return v.IsString();
}
Result<bool> TNumber(Renderer&, const Value& v, CallArgs&) {
  return v.IsNumber();
}
Result<bool> TInteger(Renderer&, const Value& v, CallArgs&) {
  return v.IsInt();
}
Result<bool> TFloat(Renderer&, const Value& v, CallArgs&) {
  return v.IsFloat();
}
Result<bool> TMapping(Renderer&, const Value& v, CallArgs&) {
  return v.IsDict();
}
Result<bool> TBoolean(Renderer&, const Value& v, CallArgs&) {
  return v.IsBool();
}
Result<bool> TTrue(Renderer&, const Value& v, CallArgs&) {
  return v.IsBool() && v.AsBool();
}
Result<bool> TFalse(Renderer&, const Value& v, CallArgs&) {
  return v.IsBool() && !v.AsBool();
}
Result<bool> TIterable(Renderer&, const Value& v, CallArgs&) {
  return v.IsUndefined() || v.IsString() || v.IsList() || v.IsDict();
}
Result<bool> TSequence(Renderer&, const Value& v, CallArgs&) {
  return v.IsUndefined() || v.IsString() || v.IsList() || v.IsDict();
}
Result<bool> TCallable(Renderer&, const Value& v, CallArgs&) {
  return v.IsObject() && v.object()->IsCallable();
}

Result<int64_t> IntOperand(const Value& v) {
  if (v.IsUndefined()) return UndefinedError(v);
  if (!v.IsIntegral()) {
    return InvalidArgument("unsupported operand type(s) for %: '" + v.TypeName() + "' and 'int'");
  }
  return v.AsInt();
}
Result<bool> TEven(Renderer&, const Value& v, CallArgs&) {
  if (v.IsFloat()) return std::fmod(v.AsDouble(), 2.0) == 0;
  ASSIGN_OR_RETURN(int64_t i, IntOperand(v));
  return i % 2 == 0;
}
Result<bool> TOdd(Renderer&, const Value& v, CallArgs&) {
  if (v.IsFloat()) return std::fabs(std::fmod(v.AsDouble(), 2.0)) == 1;
  ASSIGN_OR_RETURN(int64_t i, IntOperand(v));
  return i % 2 != 0;
}
Result<bool> TDivisibleBy(Renderer& r, const Value& v, CallArgs& args) {
  ASSIGN_OR_RETURN(Value n, Arg0("divisibleby", args));
  ASSIGN_OR_RETURN(Value m, BinaryOp("%", v, n, r.size_limits()));
  return !m.Truthy();
}
Result<bool> TEq(Renderer&, const Value& v, CallArgs& args) {
  ASSIGN_OR_RETURN(Value o, Arg0("eq", args));
  return Equals(v, o);
}
Result<bool> TNe(Renderer&, const Value& v, CallArgs& args) {
  ASSIGN_OR_RETURN(Value o, Arg0("ne", args));
  return !Equals(v, o);
}
Result<bool> TLt(Renderer&, const Value& v, CallArgs& args) {
  ASSIGN_OR_RETURN(Value o, Arg0("lt", args));
  return Less(v, o);
}
Result<bool> TGt(Renderer&, const Value& v, CallArgs& args) {
  ASSIGN_OR_RETURN(Value o, Arg0("gt", args));
  return Less(o, v);
}
Result<bool> TLe(Renderer&, const Value& v, CallArgs& args) {
  ASSIGN_OR_RETURN(Value o, Arg0("le", args));
  ASSIGN_OR_RETURN(bool gt, Less(o, v));
  return !gt;
}
Result<bool> TGe(Renderer&, const Value& v, CallArgs& args) {
  ASSIGN_OR_RETURN(Value o, Arg0("ge", args));
  ASSIGN_OR_RETURN(bool lt, Less(v, o));
  return !lt;
}
Result<bool> TIn(Renderer&, const Value& v, CallArgs& args) {
  ASSIGN_OR_RETURN(Value seq, Arg0("in", args));
  return Contains(seq, v);
}
Result<bool> TSameAs(Renderer&, const Value& v, CallArgs& args) {
  ASSIGN_OR_RETURN(Value o, Arg0("sameas", args));
  if (v.kind() != o.kind()) return false;
  switch (v.kind()) {
    case Value::Kind::kList:
      return v.list_ptr() == o.list_ptr();
    case Value::Kind::kDict:
      return v.dict_ptr() == o.dict_ptr();
    case Value::Kind::kObject:
      return v.object() == o.object();
    case Value::Kind::kString:
      return v.str() == o.str();
    default:
      return Equals(v, o);
  }
}
Result<bool> TLower(Renderer&, const Value& v, CallArgs&) {
  if (!v.IsString()) return false;
  bool any = false;
  for (char32_t c : DecodeUtf8(v.str())) {
    if (IsUpper(c)) return false;
    any = any || IsLower(c);
  }
  return any;
}
Result<bool> TUpper(Renderer&, const Value& v, CallArgs&) {
  if (!v.IsString()) return false;
  bool any = false;
  for (char32_t c : DecodeUtf8(v.str())) {
    if (IsLower(c)) return false;
    any = any || IsUpper(c);
  }
  return any;
}
Result<bool> TFilter(Renderer&, const Value& v, CallArgs&) {
  return v.IsString() && FindFilter(v.str()) != nullptr;
}
Result<bool> TTest(Renderer&, const Value& v, CallArgs&) {
  return v.IsString() && FindTest(v.str()) != nullptr;
}
Result<bool> TEscaped(Renderer&, const Value&, CallArgs&) {
  return false;
}

const std::unordered_map<std::string_view, TestFn>& Tests() {
  static const auto* m = new std::unordered_map<std::string_view, TestFn>{
      {"defined", TDefined},
      {"undefined", TUndefined},
      {"none", TNone},
      {"string", TString},
      {"number", TNumber},
      {"integer", TInteger},
      {"float", TFloat},
      {"mapping", TMapping},
      {"boolean", TBoolean},
      {"true", TTrue},
      {"false", TFalse},
      {"iterable", TIterable},
      {"sequence", TSequence},
      {"callable", TCallable},
      {"even", TEven},
      {"odd", TOdd},
      {"divisibleby", TDivisibleBy},
      {"eq", TEq},
      {"equalto", TEq},
      {"==", TEq},
      {"ne", TNe},
      {"!=", TNe},
      {"lt", TLt},
      {"lessthan", TLt},
      {"<", TLt},
      {"gt", TGt},
      {"greaterthan", TGt},
      {">", TGt},
      {"le", TLe},
      {"<=", TLe},
      {"ge", TGe},
      {">=", TGe},
      {"in", TIn},
      {"sameas", TSameAs},
      {"lower", TLower},
      {"upper", TUpper},
      {"filter", TFilter},
      {"test", TTest},
      {"escaped", TEscaped},
  };
  return *m;
}

}  // namespace

TestFn FindTest(std::string_view name) {
  auto it = Tests().find(name);
  return it == Tests().end() ? nullptr : it->second;
}

}  // namespace tachyon::chat
