// UTF-8 helpers, the GPT-2 byte<->unicode alphabet, and Unicode normalization / properties
// (utf8proc) used by the tokenizer pipeline. All functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tachyon::tokenizer {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Decodes the code point at s[pos]. Returns its byte length (>= 1). An invalid or truncated
// sequence yields *cp = kReplacementChar and length 1.
size_t DecodeUtf8(std::string_view s, size_t pos, uint32_t* cp);
void AppendUtf8(uint32_t cp, std::string* out);
std::string CodepointToUtf8(uint32_t cp);
bool IsValidUtf8(std::string_view s);
// Like Rust's String::from_utf8_lossy: each maximal invalid subpart becomes U+FFFD.
std::string Utf8Lossy(std::string_view s);
// Number of trailing bytes of `s` that form a valid but incomplete UTF-8 sequence (0..3).
size_t IncompleteUtf8Tail(std::string_view s);

// GPT-2 byte-level alphabet: byte -> the code point that stands for it in the vocabulary, and
// back (-1 for code points outside the alphabet).
uint32_t ByteToUnicode(uint8_t b);
int ByteFromUnicode(uint32_t cp);
// Maps every byte of `bytes` to its alphabet character (UTF-8).
std::string BytesToByteLevel(std::string_view bytes);
// Inverse; false if some character is outside the alphabet.
bool ByteLevelToBytes(std::string_view text, std::string* bytes);

enum class NormalForm { kNfc, kNfkc, kNfd, kNfkd };
// Normalizes valid UTF-8 text.
std::string Normalize(std::string_view text, NormalForm form);
// Full lowercase mapping of each code point.
std::string Lowercase(std::string_view text);

// Unicode properties of a code point.
bool IsWhitespace(uint32_t cp);     // White_Space (as Rust char::is_whitespace)
bool IsPunctuation(uint32_t cp);    // general category P* (Pc Pd Ps Pe Pi Pf Po)
bool IsAsciiPunctuation(uint32_t cp);
bool IsControl(uint32_t cp);        // Cc / Cf (BERT's notion, minus \t \n \r)
bool IsNonspacingMark(uint32_t cp); // Mn
bool IsNumeric(uint32_t cp);        // N* categories
bool IsAlphabetic(uint32_t cp);     // L* categories (and Nl)
bool IsCjk(uint32_t cp);            // CJK ideograph blocks (BERT's tokenize_chinese_chars)

}  // namespace tachyon::tokenizer
