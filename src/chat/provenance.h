// Provenance of template output: which bytes of a string came from client data (the request's
// JSON: messages, tools, extra variables) and which from the template's own text.
//
// String values carry their client byte ranges (Value::client_spans). The evaluator keeps them
// exact through output, concatenation (+, ~), join, str.format, slicing and indexing, iteration,
// strip / trim, split / rsplit / splitlines / partition, replace and removeprefix/-suffix;
// tojson and repr mark each printed value that holds client text as client in full. Any other
// operation that builds a new string from client text marks its whole result as client (the
// safe default: client text can only ever grow, never be laundered into template text).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chat/value.h"

namespace tachyon::chat {

// Appends [begin, end) (ignored when empty), merging with the last span when they touch.
// REQUIRES: begin >= the last span's end.
void AddSpan(Spans* spans, size_t begin, size_t end);
// Appends `src` (may be null) shifted by `offset`.
void AppendSpans(Spans* dst, const Spans* src, size_t offset);
// The part of `src` (may be null) inside [begin, end), shifted so that `begin` becomes 0.
Spans SubSpans(const Spans* src, size_t begin, size_t end);
// Whether any byte of [begin, end) lies in `spans` (may be null).
bool AnyClientByte(const Spans* spans, size_t begin, size_t end);

// Whether `v` holds client text anywhere: a string with client spans, or such a string among
// the items, keys or values of a list / dict / namespace (nested). Bounded: a value too large
// or deep to scan counts as holding client text.
bool HasClientText(const Value& v);

// v.str()[begin, end) (byte offsets at code point boundaries) with its provenance and
// Markup-ness. REQUIRES: v is a string.
Value Substring(const Value& v, size_t begin, size_t end);
// `s` as a string value, marked client in full when `client` (Markup when `markup`).
Value MaybeClient(std::string s, bool client, bool markup = false);

// Byte offset of each code point of DecodeUtf8(s), then s.size(); empty when re-encoding the
// decoded code points would not give back `s` byte for byte.
std::vector<size_t> CodepointOffsets(std::string_view s);
// The code points [cb, ce) of v as a substring with its provenance. REQUIRES: `offsets` is
// CodepointOffsets(v.str()) and non-empty, cb <= ce < offsets.size().
Value CodepointSubstring(const Value& v, const std::vector<size_t>& offsets, size_t cb, size_t ce);

// A string built piece by piece, keeping the provenance of each piece.
class TrackedText {
 public:
  const std::string& text() const { return text_; }
  const Spans& spans() const { return spans_; }
  size_t size() const { return text_.size(); }
  // Template text.
  void Append(std::string_view s) { text_.append(s); }
  // A string value with its spans. REQUIRES: v is a string.
  void AppendValue(const Value& v);
  // Marks bytes [begin, size()) as client text.
  void MarkClientFrom(size_t begin);
  std::string* mutable_text() { return &text_; }
  // The result as a string value (Markup when `markup`).
  Value TakeValue(bool markup = false);
  std::string TakeText() { return std::move(text_); }
  Spans TakeSpans() { return std::move(spans_); }

 private:
  std::string text_;
  Spans spans_;
};

}  // namespace tachyon::chat

namespace tachyon::chat {

// Python str(v) appended to `out`: a string keeps its spans; any other value prints as its
// repr, marked client in full when it holds client text. Undefined prints nothing.
Status AppendStr(const Value& v, TrackedText* out, size_t max_bytes);
// Python str(v) as a string value with its provenance.
Result<Value> StrValue(const Value& v, size_t max_bytes);

}  // namespace tachyon::chat
