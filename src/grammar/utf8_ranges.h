// Code point ranges as UTF-8 byte-range sequences: every code point in [lo, hi] encodes to
// exactly the byte strings matched by one of the returned sequences (each a list of inclusive
// byte ranges, one per byte), and nothing else does. Surrogates (U+D800..U+DFFF) must not be
// in the range.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tachyon::grammar {

using ByteRangeSeq = std::vector<std::pair<uint8_t, uint8_t>>;

// REQUIRES: lo <= hi <= 0x10FFFF and [lo, hi] holds no surrogate.
void Utf8Sequences(uint32_t lo, uint32_t hi, std::vector<ByteRangeSeq>* out);

// Decodes one UTF-8 character at s[*pos] and advances *pos; -1 on invalid UTF-8 (overlong,
// surrogate, truncated, > U+10FFFF) or at the end, *pos then unchanged. (tokenizer/unicode.h
// decodes; this is its strict form. The encoder is tokenizer::AppendUtf8.)
int32_t DecodeUtf8(std::string_view s, size_t* pos);

}  // namespace tachyon::grammar
