#include "grammar/utf8_ranges.h"

#include <gtest/gtest.h>

#include "tokenizer/unicode.h"

namespace tachyon::grammar {
namespace {

bool InSeqs(const std::vector<ByteRangeSeq>& seqs, const std::string& s) {
  for (const auto& seq : seqs) {
    if (seq.size() != s.size()) continue;
    bool ok = true;
    for (size_t i = 0; i < s.size(); ++i) {
      const auto b = static_cast<uint8_t>(s[i]);
      ok = ok && b >= seq[i].first && b <= seq[i].second;
    }
    if (ok) return true;
  }
  return false;
}

// Every code point of a range is matched, its neighbours are not (exhaustive on spans that
// cross encoded-length and continuation-byte boundaries).
TEST(Utf8Ranges, ExactlyTheRange) {
  for (auto [lo, hi] : std::vector<std::pair<uint32_t, uint32_t>>{{0x41, 0x5A},
                                                                  {0x70, 0x90},
                                                                  {0x7F0, 0x1234},
                                                                  {0xE000, 0x10FFFF},
                                                                  {0x1F600, 0x1F64F},
                                                                  {0xFFF0, 0x10010},
                                                                  {0x0, 0xD7FF}}) {
    std::vector<ByteRangeSeq> seqs;
    Utf8Sequences(lo, hi, &seqs);
    for (uint32_t cp = (lo > 300 ? lo - 300 : 0); cp <= std::min<uint32_t>(hi + 300, 0x10FFFF);
         cp += (hi - lo > 100000 ? 97 : 1)) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      std::string s;
      tokenizer::AppendUtf8(cp, &s);
      EXPECT_EQ(InSeqs(seqs, s), cp >= lo && cp <= hi) << std::hex << cp;
    }
  }
}

TEST(Utf8Ranges, DecodeRejectsInvalid) {
  for (const char* bad : {"\x80", "\xC0\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xE6\x97"}) {
    size_t pos = 0;
    EXPECT_EQ(DecodeUtf8(bad, &pos), -1) << bad;
    EXPECT_EQ(pos, 0u);
  }
  size_t pos = 0;
  EXPECT_EQ(DecodeUtf8("日", &pos), 0x65E5);
  EXPECT_EQ(pos, 3u);
}

}  // namespace
}  // namespace tachyon::grammar
