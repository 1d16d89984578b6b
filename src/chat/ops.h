// Python / Jinja operator semantics on Values: arithmetic, `in`, len, iteration, attribute
// and item access (Jinja's getattr/getitem fallbacks and Undefined hints), slicing.
#pragma once

#include <string_view>
#include <vector>

#include "chat/value.h"
#include "util/status.h"

namespace tachyon::chat {

struct SizeLimits {
  size_t max_string_bytes = 32u << 20;
  size_t max_list_items = 1u << 20;
};

// op: + - * / // % ** ~
Result<Value> BinaryOp(std::string_view op, const Value& a, const Value& b,
                       const SizeLimits& limits);
Result<Value> UnaryOp(std::string_view op, const Value& a);
// `needle in haystack`.
Result<bool> Contains(const Value& haystack, const Value& needle);
// Python len(); Undefined has length 0.
Result<int64_t> Length(const Value& v);
// Python iteration: list items, dict keys, string characters; Undefined is empty.
Result<std::vector<Value>> Iterate(const Value& v);
// Jinja `obj.name` (attributes first, then items) and `obj[key]` (items first). Missing →
// Undefined with Jinja's hint; Undefined receivers fail.
Result<Value> GetAttr(const Value& obj, std::string_view name);
Result<Value> GetItem(const Value& obj, const Value& key);
// obj[start:stop:step]; each bound may be Undefined/None (absent).
Result<Value> Slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// Python `fmt % args` (printf-style: %s %r %d %i %x %o %c %f %e %g, flags, width,
// precision, %(name)s with a dict).
Result<Value> PercentFormat(const std::string& fmt, const Value& args, size_t max_bytes);

// Methods of str / list / dict values (Python's, minus the mutating ones, which the
// immutable sandbox refuses).
bool IsMethodName(const Value& receiver, std::string_view name);
bool IsUnsafeMethod(const Value& receiver, std::string_view name);
// A callable bound to receiver.name.
Value BindMethod(const Value& receiver, std::string_view name);

}  // namespace tachyon::chat
