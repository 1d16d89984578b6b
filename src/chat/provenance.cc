#include "chat/provenance.h"

#include <algorithm>

#include "chat/unicode.h"

namespace tachyon::chat {

void AddSpan(Spans* spans, size_t begin, size_t end) {
  if (end <= begin) return;
  if (!spans->empty() && spans->back().end >= begin) {
    spans->back().end = std::max(spans->back().end, end);
    return;
  }
  spans->push_back({begin, end});
}

void AppendSpans(Spans* dst, const Spans* src, size_t offset) {
  if (!src) return;
  for (const Span& s : *src) AddSpan(dst, s.begin + offset, s.end + offset);
}

Spans SubSpans(const Spans* src, size_t begin, size_t end) {
  Spans out;
  if (!src) return out;
  for (const Span& s : *src) {
    const size_t b = std::max(s.begin, begin), e = std::min(s.end, end);
    if (b < e) AddSpan(&out, b - begin, e - begin);
  }
  return out;
}

bool AnyClientByte(const Spans* spans, size_t begin, size_t end) {
  if (!spans || begin >= end) return false;
  for (const Span& s : *spans) {
    if (s.begin < end && begin < s.end) return true;
  }
  return false;
}

namespace {

// Visits at most `*budget` values; an exhausted budget or excessive depth answers true.
bool Scan(const Value& v, int depth, int64_t* budget) {
  if (--*budget < 0 || depth > kMaxPrintDepth) return true;
  switch (v.kind()) {
    case Value::Kind::kString:
      return v.client_spans() != nullptr;
    case Value::Kind::kList:
      for (const Value& item : v.list().items) {
        if (Scan(item, depth + 1, budget)) return true;
      }
      return false;
    case Value::Kind::kDict:
      for (const auto& [k, item] : v.dict().items) {
        if (Scan(k, depth + 1, budget) || Scan(item, depth + 1, budget)) return true;
      }
      return false;
    default:
      return false;
  }
}

}  // namespace

bool HasClientText(const Value& v) {
  if (v.IsString()) return v.client_spans() != nullptr;
  if (!v.IsList() && v.kind() != Value::Kind::kDict) return false;
  int64_t budget = 1 << 20;
  return Scan(v, 0, &budget);
}

Value Substring(const Value& v, size_t begin, size_t end) {
  const std::string& s = v.str();
  end = std::min(end, s.size());
  begin = std::min(begin, end);
  return Value::Tracked(s.substr(begin, end - begin), SubSpans(v.client_spans(), begin, end),
                        v.IsMarkup());
}

std::vector<size_t> CodepointOffsets(std::string_view s) {
  std::vector<size_t> offsets;
  offsets.reserve(s.size() + 1);
  size_t pos = 0;
  std::string buf;
  for (char32_t c : DecodeUtf8(s)) {
    offsets.push_back(pos);
    buf.clear();
    AppendUtf8(c, &buf);
    if (s.compare(pos, buf.size(), buf) != 0) return {};
    pos += buf.size();
  }
  if (pos != s.size()) return {};
  offsets.push_back(pos);
  return offsets;
}

Value CodepointSubstring(const Value& v, const std::vector<size_t>& offsets, size_t cb, size_t ce) {
  return Substring(v, offsets[cb], offsets[ce]);
}

Value MaybeClient(std::string s, bool client, bool markup) {
  const size_t n = s.size();
  Spans spans;
  if (client) AddSpan(&spans, 0, n);
  return Value::Tracked(std::move(s), std::move(spans), markup);
}

void TrackedText::AppendValue(const Value& v) {
  AppendSpans(&spans_, v.client_spans(), text_.size());
  text_ += v.str();
}

void TrackedText::MarkClientFrom(size_t begin) {
  AddSpan(&spans_, begin, text_.size());
}

Value TrackedText::TakeValue(bool markup) {
  return Value::Tracked(std::move(text_), std::move(spans_), markup);
}

}  // namespace tachyon::chat

namespace tachyon::chat {

Status AppendStr(const Value& v, TrackedText* out, size_t max_bytes) {
  if (v.IsString()) {
    if (out->size() + v.str().size() > max_bytes) {
      return ResourceExhausted("template output exceeds the limit of " + std::to_string(max_bytes) +
                               " bytes");
    }
    out->AppendValue(v);
    return OkStatus();
  }
  const size_t begin = out->size();
  RETURN_IF_ERROR(AppendStr(v, out->mutable_text(), max_bytes));
  if (HasClientText(v)) out->MarkClientFrom(begin);
  return OkStatus();
}

Result<Value> StrValue(const Value& v, size_t max_bytes) {
  if (v.IsString()) return v;
  TrackedText t;
  RETURN_IF_ERROR(AppendStr(v, &t, max_bytes));
  return t.TakeValue();
}

}  // namespace tachyon::chat
