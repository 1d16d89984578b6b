#include "tokenizer/unicode.h"

#include <utf8proc.h>

#include <array>
#include <cstdlib>

namespace tachyon::tokenizer {
namespace {

// Length of the valid prefix of a UTF-8 sequence starting at s[pos] (WHATWG / Unicode
// "maximal subpart" rules): returns the number of bytes that are valid so far and sets
// *complete when they form a whole code point.
size_t ValidPrefix(std::string_view s, size_t pos, bool* complete, uint32_t* cp) {
  *complete = false;
  const auto b0 = static_cast<uint8_t>(s[pos]);
  if (b0 < 0x80) {
    *complete = true;
    *cp = b0;
    return 1;
  }
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;
  uint32_t v;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
    v = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    v = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    v = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  size_t i = 1;
  for (; i <= need; ++i) {
    if (pos + i >= s.size()) return i;
    const auto b = static_cast<uint8_t>(s[pos + i]);
    if (b < lo || b > hi) return i;
    lo = 0x80;
    hi = 0xBF;
    v = (v << 6) | (b & 0x3F);
  }
  *complete = true;
  *cp = v;
  return i;
}

struct ByteTables {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 512> from_cp{};  // the alphabet lies below U+0200
  ByteTables() {
    from_cp.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_cp[b] = printable ? b : 256 + n++;
      from_cp[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteTables& Tables() {
  static const ByteTables tables;
  return tables;
}

}  // namespace

size_t DecodeUtf8(std::string_view s, size_t pos, uint32_t* cp) {
  bool complete;
  const size_t n = ValidPrefix(s, pos, &complete, cp);
  if (!complete) {
    *cp = kReplacementChar;
    return 1;
  }
  return n;
}

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

std::string CodepointToUtf8(uint32_t cp) {
  std::string s;
  AppendUtf8(cp, &s);
  return s;
}

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    bool complete;
    uint32_t cp;
    const size_t n = ValidPrefix(s, i, &complete, &cp);
    if (!complete) return false;
    i += n;
  }
  return true;
}

std::string Utf8Lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    bool complete;
    uint32_t cp;
    const size_t n = ValidPrefix(s, i, &complete, &cp);
    if (complete) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      AppendUtf8(kReplacementChar, &out);
      i += n == 0 ? 1 : n;
    }
  }
  return out;
}

size_t IncompleteUtf8Tail(std::string_view s) {
  const size_t start = s.size() > 3 ? s.size() - 3 : 0;
  for (size_t i = start; i < s.size(); ++i) {
    const auto b = static_cast<uint8_t>(s[i]);
    if (b < 0x80 || (b >= 0xC0)) {  // a lead byte (or ASCII)
      bool complete;
      uint32_t cp;
      const size_t n = ValidPrefix(s, i, &complete, &cp);
      if (!complete && n > 0 && i + n == s.size()) return n;
    }
  }
  return 0;
}

uint32_t ByteToUnicode(uint8_t b) { return Tables().to_cp[b]; }

int ByteFromUnicode(uint32_t cp) { return cp < 512 ? Tables().from_cp[cp] : -1; }

std::string BytesToByteLevel(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) AppendUtf8(ByteToUnicode(static_cast<uint8_t>(c)), &out);
  return out;
}

bool ByteLevelToBytes(std::string_view text, std::string* bytes) {
  size_t i = 0;
  while (i < text.size()) {
    uint32_t cp;
    const size_t n = DecodeUtf8(text, i, &cp);
    const int b = ByteFromUnicode(cp);
    if (b < 0 || (cp == kReplacementChar && n == 1 && static_cast<uint8_t>(text[i]) >= 0x80)) {
      return false;
    }
    bytes->push_back(static_cast<char>(b));
    i += n;
  }
  return true;
}

std::string Normalize(std::string_view text, NormalForm form) {
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::kNfc: options |= UTF8PROC_COMPOSE; break;
    case NormalForm::kNfkc: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalForm::kNfd: options |= UTF8PROC_DECOMPOSE; break;
    case NormalForm::kNfkd: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  // Fast path: pure ASCII is invariant under every form.
  bool ascii = true;
  for (char c : text) {
    if (static_cast<uint8_t>(c) >= 0x80) {
      ascii = false;
      break;
    }
  }
  if (ascii) return std::string(text);
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                          static_cast<utf8proc_ssize_t>(text.size()), &out,
                                          static_cast<utf8proc_option_t>(options));
  if (n < 0) return std::string(text);  // invalid input: leave unchanged
  std::string result(reinterpret_cast<char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

std::string Lowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    uint32_t cp;
    const size_t n = DecodeUtf8(text, i, &cp);
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp));
    } else if (cp == 0x130) {  // İ lowercases to i + combining dot above
      out.append("i\xCC\x87");
    } else {
      AppendUtf8(static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))), &out);
    }
    i += n;
  }
  return out;
}

bool IsWhitespace(uint32_t cp) {
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0x85: case 0xA0:
    case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

namespace {
utf8proc_category_t Category(uint32_t cp) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(cp));
}
}  // namespace

bool IsPunctuation(uint32_t cp) {
  const auto c = Category(cp);
  return c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO;
}

bool IsAsciiPunctuation(uint32_t cp) {
  return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
         (cp >= 123 && cp <= 126);
}

bool IsControl(uint32_t cp) {
  if (cp == '\t' || cp == '\n' || cp == '\r') return false;
  const auto c = Category(cp);
  return c == UTF8PROC_CATEGORY_CC || c == UTF8PROC_CATEGORY_CF;
}

bool IsNonspacingMark(uint32_t cp) { return Category(cp) == UTF8PROC_CATEGORY_MN; }

bool IsNumeric(uint32_t cp) {
  const auto c = Category(cp);
  return c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO;
}

bool IsAlphabetic(uint32_t cp) {
  const auto c = Category(cp);
  return (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) || c == UTF8PROC_CATEGORY_NL;
}

bool IsCjk(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

}  // namespace tachyon::tokenizer
