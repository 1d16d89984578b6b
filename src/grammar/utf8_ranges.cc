#include "grammar/utf8_ranges.h"

#include <string_view>

#include "tokenizer/unicode.h"

namespace tachyon::grammar {
namespace {

int Utf8Length(uint32_t cp) {
  return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

uint32_t MaxOfLength(int n) {
  return n == 1 ? 0x7F : n == 2 ? 0x7FF : n == 3 ? 0xFFFF : 0x10FFFF;
}

}  // namespace

int32_t DecodeUtf8(std::string_view s, size_t* pos) {
  if (*pos >= s.size()) return -1;
  uint32_t cp;
  const size_t n = tokenizer::DecodeUtf8(s, *pos, &cp);
  // An invalid or truncated sequence decodes as U+FFFD of one byte (a real U+FFFD is three).
  if (cp == tokenizer::kReplacementChar && n == 1) return -1;
  *pos += n;
  return static_cast<int32_t>(cp);
}

void Utf8Sequences(uint32_t lo, uint32_t hi, std::vector<ByteRangeSeq>* out) {
  // Split at encoded-length boundaries first.
  for (int n = 1; n < 4; ++n) {
    const uint32_t m = MaxOfLength(n);
    if (lo <= m && hi > m) {
      Utf8Sequences(lo, m, out);
      Utf8Sequences(m + 1, hi, out);
      return;
    }
  }
  if (hi < 0x80) {
    out->push_back({{static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)}});
    return;
  }
  // Split until every continuation byte below the first differing one spans its full range.
  const int n = Utf8Length(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (uint32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        Utf8Sequences(lo, lo | m, out);
        Utf8Sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        Utf8Sequences(lo, (hi & ~m) - 1, out);
        Utf8Sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  tokenizer::AppendUtf8(lo, &a);
  tokenizer::AppendUtf8(hi, &b);
  ByteRangeSeq seq;
  for (size_t i = 0; i < a.size(); ++i) {
    seq.push_back({static_cast<uint8_t>(a[i]), static_cast<uint8_t>(b[i])});
  }
  out->push_back(std::move(seq));
}

}  // namespace tachyon::grammar
