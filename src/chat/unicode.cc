#include "chat/unicode.h"

namespace tachyon::chat {

std::u32string DecodeUtf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = s[i];
    if (c < 0x80) {
      out.push_back(c);
      ++i;
      continue;
    }
    int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    char32_t cp = len == 4 ? (c & 0x07) : len == 3 ? (c & 0x0F) : (c & 0x1F);
    bool ok = len > 0 && c < 0xF5 && i + len <= s.size();
    for (int k = 1; ok && k < len; ++k) {
      unsigned char cc = s[i + k];
      if ((cc & 0xC0) != 0x80) ok = false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (ok) {
      static const char32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
      if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) ok = false;
    }
    if (!ok) {
      out.push_back(0xDC00 + c);  // surrogateescape
      ++i;
      continue;
    }
    out.push_back(cp);
    i += len;
  }
  return out;
}

void AppendUtf8(char32_t c, std::string* out) {
  if (c >= 0xDC80 && c <= 0xDCFF) {  // surrogateescape: the original byte
    out->push_back(static_cast<char>(c - 0xDC00));
  } else if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string EncodeUtf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) AppendUtf8(c, &out);
  return out;
}

bool IsAscii(std::string_view s) {
  for (unsigned char c : s) {
    if (c >= 0x80) return false;
  }
  return true;
}

size_t Utf8Length(std::string_view s) {
  if (IsAscii(s)) return s.size();
  return DecodeUtf8(s).size();
}

bool IsSpace(char32_t c) {
  switch (c) {
    case ' ':
    case '\t':
    case '\n':
    case '\v':
    case '\f':
    case '\r':
    case 0x1C:
    case 0x1D:
    case 0x1E:
    case 0x1F:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

bool IsLineBreak(char32_t c) {
  switch (c) {
    case '\n':
    case '\r':
    case '\v':
    case '\f':
    case 0x1C:
    case 0x1D:
    case 0x1E:
    case 0x85:
    case 0x2028:
    case 0x2029:
      return true;
    default:
      return false;
  }
}

bool IsPrintable(char32_t c) {
  if (c == ' ') return true;
  if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) return false;
  if (IsSpace(c)) return false;
  if (c == 0x180E || (c >= 0x200B && c <= 0x200F) || (c >= 0x202A && c <= 0x202E)) return false;
  if ((c >= 0x2060 && c <= 0x206F) || c == 0xFEFF || (c >= 0xFFF0 && c <= 0xFFFB)) return false;
  if (c >= 0xD800 && c <= 0xF8FF) return false;  // surrogates, private use
  if (c == 0xFFFE || c == 0xFFFF || c >= 0xF0000) return false;
  if (c == 0xE0001 || (c >= 0xE0020 && c <= 0xE007F)) return false;
  return true;
}

namespace {
// Case pairs: [lo, hi] ranges where upper = lower - delta, or alternating pairs.
bool InAlternating(char32_t c) {
  return (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 &&
          c != 0x17F) ||
         (c >= 0x460 && c <= 0x481) || (c >= 0x48A && c <= 0x4BF) || (c >= 0x1E00 && c <= 0x1EFF);
}
}  // namespace

bool IsUpper(char32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z';
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return true;
  if (c >= 0x391 && c <= 0x3AB && c != 0x3A2) return true;
  if (c >= 0x400 && c <= 0x42F) return true;
  if (InAlternating(c)) {
    // In Latin Extended-A the 0x139..0x148 and 0x179..0x17E ranges start on odd points.
    bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    return odd_upper ? (c & 1) : !(c & 1);
  }
  return false;
}

bool IsLower(char32_t c) {
  if (c < 0x80) return c >= 'a' && c <= 'z';
  if (c >= 0xDF && c <= 0xFF && c != 0xF7) return true;
  if (c >= 0x3AC && c <= 0x3CE) return true;
  if (c >= 0x430 && c <= 0x45F) return true;
  if (InAlternating(c)) return !IsUpper(c);
  return false;
}

char32_t ToUpper(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c >= 0x3B1 && c <= 0x3CB && c != 0x3C2) return c - 32;
  if (c == 0x3C2) return 0x3A3;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  if (InAlternating(c) && IsLower(c)) return c - 1;
  return c;
}

char32_t ToLower(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c == 0x178) return 0xFF;
  if (c >= 0x391 && c <= 0x3AB && c != 0x3A2) return c + 32;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  if (InAlternating(c) && IsUpper(c)) return c + 1;
  return c;
}

bool IsAlpha(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  if (c == 0xAA || c == 0xB5 || c == 0xBA) return true;
  if (c >= 0xC0 && c <= 0x24F) return c != 0xD7 && c != 0xF7;
  if (c >= 0x370 && c <= 0x52F) return c != 0x37E && c != 0x387;
  if (c >= 0x4E00 && c <= 0x9FFF) return true;  // CJK ideographs
  if (c >= 0x3040 && c <= 0x30FF) return true;  // kana
  if (c >= 0xAC00 && c <= 0xD7A3) return true;  // Hangul
  if (c >= 0x5D0 && c <= 0x6FF) return true;    // Hebrew, Arabic (approx.)
  if (c >= 0x900 && c <= 0xDFF) return true;    // Indic (approx.)
  if (c >= 0x1E00 && c <= 0x1FFF) return true;
  return false;
}

bool IsWordChar(char32_t c) {
  return c == '_' || (c >= '0' && c <= '9') || IsAlpha(c);
}

std::string PyUpper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  if (IsAscii(s)) {
    for (char c : s) out.push_back((c >= 'a' && c <= 'z') ? c - 32 : c);
    return out;
  }
  for (char32_t c : DecodeUtf8(s)) {
    if (c == 0xDF) {
      out += "SS";
      continue;
    }
    AppendUtf8(ToUpper(c), &out);
  }
  return out;
}

std::string PyLower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  if (IsAscii(s)) {
    for (char c : s) out.push_back((c >= 'A' && c <= 'Z') ? c + 32 : c);
    return out;
  }
  for (char32_t c : DecodeUtf8(s)) AppendUtf8(ToLower(c), &out);
  return out;
}

}  // namespace tachyon::chat
