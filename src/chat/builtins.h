// Built-in filters, tests, globals and Python methods of the interpreter.
#pragma once

#include <initializer_list>
#include <string_view>
#include <vector>

#include "chat/value.h"
#include "util/status.h"

namespace tachyon::chat {

class Renderer;

using FilterFn = Result<Value> (*)(Renderer& r, const Value& input, CallArgs& args);
using TestFn = Result<bool> (*)(Renderer& r, const Value& v, CallArgs& args);

// nullptr when there is no such filter / test.
FilterFn FindFilter(std::string_view name);
// Whether filter `name` gives its string results exact provenance; the evaluator marks the
// string results of the others as client text in full when their input or an argument holds
// client text (see chat/provenance.h).
bool FilterKeepsProvenance(std::string_view name);
TestFn FindTest(std::string_view name);
// Globals: range, namespace, dict, raise_exception, strftime_now, cycler, joiner.
// Undefined when `name` is not a global.
Value FindGlobal(std::string_view name);

// Python methods of str / list / dict receivers.
Result<Value> CallMethod(Renderer& r, const Value& receiver, std::string_view name, CallArgs& args);

// Binds positional then keyword arguments to `names` (in order); absent ones stay
// Undefined. Errors on surplus or unknown arguments, naming `fn`.
Status BindArgs(std::string_view fn, const CallArgs& args,
                std::initializer_list<std::string_view> names, std::vector<Value>* out);

// An optional argument that was not given, or given as None.
inline bool Absent(const Value& v) {
  return v.IsUndefined() || v.IsNone();
}

// Python str() of a value as a std::string (bounded by the renderer's limits).
Result<std::string> StrOf(Renderer& r, const Value& v);

// Python string helpers shared by filters and methods.
std::string PyStrip(std::string_view s, const Value& chars, bool left, bool right);
std::string PyCapitalize(std::string_view s);
// recv.strip(chars) (left and right) / lstrip / rstrip, keeping provenance. REQUIRES: recv is
// a string.
Value StripValue(const Value& recv, const Value& chars, bool left, bool right);
std::string PyTitle(std::string_view s);

}  // namespace tachyon::chat
