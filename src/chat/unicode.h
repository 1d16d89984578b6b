// Small Unicode helpers for the Jinja interpreter's Python string semantics. Strings are
// UTF-8; invalid bytes decode as U+FFFD-free raw code points 0xDC80+byte (Python's
// surrogateescape) so that decoding and re-encoding is lossless.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tachyon::chat {

std::u32string DecodeUtf8(std::string_view s);
std::string EncodeUtf8(std::u32string_view s);
void AppendUtf8(char32_t c, std::string* out);
// Number of code points.
size_t Utf8Length(std::string_view s);
bool IsAscii(std::string_view s);

// Python str.isspace() for one code point.
bool IsSpace(char32_t c);
// Python str.isprintable() for one code point (approximation of the Unicode tables).
bool IsPrintable(char32_t c);
// Letters / digits / underscore as regex \w (approximation beyond Latin, Greek, Cyrillic).
bool IsWordChar(char32_t c);
bool IsAlpha(char32_t c);
bool IsUpper(char32_t c);
bool IsLower(char32_t c);
char32_t ToUpper(char32_t c);
char32_t ToLower(char32_t c);
// Python str.splitlines() line boundaries.
bool IsLineBreak(char32_t c);

std::string PyUpper(std::string_view s);
std::string PyLower(std::string_view s);

}  // namespace tachyon::chat
