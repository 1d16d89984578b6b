#include "grammar/utf8_ranges.h"

#include <string_view>

namespace tachyon::grammar {
namespace {

int Utf8Length(uint32_t cp) {
  return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

uint32_t MaxOfLength(int n) {
  return n == 1 ? 0x7F : n == 2 ? 0x7FF : n == 3 ? 0xFFFF : 0x10FFFF;
}

}  // namespace

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

int32_t DecodeUtf8(std::string_view s, size_t* pos) {
  size_t p = *pos;
  if (p >= s.size()) return -1;
  const auto b0 = static_cast<uint8_t>(s[p]);
  int n;
  uint32_t cp;
  if (b0 < 0x80) {
    *pos = p + 1;
    return b0;
  } else if ((b0 & 0xE0) == 0xC0) {
    n = 2, cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3, cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4, cp = b0 & 0x07;
  } else {
    return -1;
  }
  if (p + n > s.size()) return -1;
  for (int i = 1; i < n; ++i) {
    const auto b = static_cast<uint8_t>(s[p + i]);
    if ((b & 0xC0) != 0x80) return -1;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (Utf8Length(cp) != n || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
  *pos = p + n;
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
  AppendUtf8(lo, &a);
  AppendUtf8(hi, &b);
  ByteRangeSeq seq;
  for (size_t i = 0; i < a.size(); ++i) {
    seq.push_back({static_cast<uint8_t>(a[i]), static_cast<uint8_t>(b[i])});
  }
  out->push_back(std::move(seq));
}

}  // namespace tachyon::grammar
