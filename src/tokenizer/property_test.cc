// Property tests over random input: decode(encode(s)) == s for lossless tokenizers, and the
// streaming detokenizer equals the one-shot decode for arbitrary id sequences.
#include <gtest/gtest.h>

#include <random>

#include "tokenizer/test_util.h"
#include "tokenizer/unicode.h"

namespace tachyon::tokenizer {
namespace {

// Random text from a mix of scripts, whitespace, digits, punctuation and emoji.
std::string RandomText(std::mt19937& rng, int max_chars) {
  static const std::vector<std::pair<uint32_t, uint32_t>> kRanges = {
      {0x20, 0x7E},     {0x20, 0x20},     {0x0A, 0x0A},   {0x09, 0x09},   {0x30, 0x39},
      {0xC0, 0x17F},    {0x391, 0x3C9},   {0x410, 0x44F}, {0x5D0, 0x5EA}, {0x627, 0x64A},
      {0xE01, 0xE3A},   {0x3041, 0x3096}, {0x4E00, 0x9FA5}, {0xAC00, 0xD7A3},
      {0x1F300, 0x1F64F}, {0x2000, 0x200D}, {0x1F900, 0x1F9FF}, {0x3000, 0x3000}};
  std::uniform_int_distribution<int> len_dist(0, max_chars);
  std::uniform_int_distribution<size_t> range_dist(0, kRanges.size() - 1);
  std::string s;
  const int n = len_dist(rng);
  for (int i = 0; i < n; ++i) {
    const auto [lo, hi] = kRanges[range_dist(rng)];
    AppendUtf8(std::uniform_int_distribution<uint32_t>(lo, hi)(rng), &s);
  }
  return s;
}

struct RoundTripCase {
  const char* name;
  bool gguf;
  bool nfc;  // the tokenizer normalizes to NFC
};

class RoundTrip : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(RoundTrip, DecodeEncodeIsIdentity) {
  const RoundTripCase& c = GetParam();
  const Tokenizer* tok = c.gguf ? testing_util::GgufTokenizer(c.name) : testing_util::HfTokenizer(c.name);
  if (tok == nullptr) GTEST_SKIP() << c.name << " not found in testdata";
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 300; ++iter) {
    const std::string text = RandomText(rng, 40);
    const auto ids = tok->Encode(text, /*add_special=*/false, /*parse_special=*/false);
    const std::string expect = c.nfc ? Normalize(text, NormalForm::kNfc) : text;
    ASSERT_EQ(tok->Decode(ids), expect) << c.name << " iteration " << iter;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Tokenizers, RoundTrip,
    ::testing::Values(RoundTripCase{"llama3", false, false}, RoundTripCase{"qwen3", false, true},
                      RoundTripCase{"llama2", false, false},
                      RoundTripCase{"vocab/ggml-vocab-gpt-2.gguf", true, false},
                      RoundTripCase{"vocab/ggml-vocab-llama-spm.gguf", true, false},
                      RoundTripCase{"stories260K/stories260K.gguf", true, false}),
    [](const auto& info) {
      std::string n;
      for (char ch : std::string(info.param.name)) n.push_back(std::isalnum(ch) ? ch : '_');
      return n;
    });

class StreamingRandom : public ::testing::TestWithParam<RoundTripCase> {};

// Arbitrary ids (byte pieces that never complete, specials, anything) stream to the same
// text as the one-shot decode, and never emit broken UTF-8.
TEST_P(StreamingRandom, EqualsOneShotDecode) {
  const RoundTripCase& c = GetParam();
  const Tokenizer* tok = c.gguf ? testing_util::GgufTokenizer(c.name) : testing_util::HfTokenizer(c.name);
  if (tok == nullptr) GTEST_SKIP() << c.name << " not found in testdata";
  std::mt19937 rng(99);
  std::uniform_int_distribution<int32_t> any(0, tok->vocab_size() - 1);
  std::uniform_int_distribution<int32_t> low(0, std::min(tok->vocab_size() - 1, 600));
  for (int iter = 0; iter < 200; ++iter) {
    std::vector<int32_t> ids;
    const int n = std::uniform_int_distribution<int>(0, 30)(rng);
    for (int i = 0; i < n; ++i) ids.push_back(rng() % 2 ? any(rng) : low(rng));
    for (bool skip : {false, true}) {
      IncrementalDetokenizer detok(*tok, skip);
      std::string streamed;
      for (int32_t id : ids) {
        const std::string piece = detok.Push(id);
        ASSERT_TRUE(IsValidUtf8(piece));
        streamed += piece;
      }
      streamed += detok.Flush();
      ASSERT_EQ(streamed, tok->Decode(ids, skip)) << c.name << " iteration " << iter;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Tokenizers, StreamingRandom,
    ::testing::Values(RoundTripCase{"llama3", false, false}, RoundTripCase{"llama2", false, false},
                      RoundTripCase{"vocab/ggml-vocab-bert-bge.gguf", true, false},
                      RoundTripCase{"vocab/ggml-vocab-deepseek-coder.gguf", true, false},
                      RoundTripCase{"stories260K/stories260K.gguf", true, false}),
    [](const auto& info) {
      std::string n;
      for (char ch : std::string(info.param.name)) n.push_back(std::isalnum(ch) ? ch : '_');
      return n;
    });

TEST(InvalidUtf8, EncodesAsReplacementCharacter) {
  const Tokenizer* tok = testing_util::HfTokenizer("llama3");
  if (tok == nullptr) GTEST_SKIP() << "llama3 not found in testdata";
  const std::string bad = "ab\xFF\xC3(c\xE4\xBD";
  const auto ids = tok->Encode(bad, false);
  EXPECT_EQ(tok->Decode(ids), Utf8Lossy(bad));
  // Embedded NUL is text.
  const std::string nul("a\0b", 3);
  EXPECT_EQ(tok->Decode(tok->Encode(nul, false)), nul);
}

}  // namespace
}  // namespace tachyon::tokenizer
