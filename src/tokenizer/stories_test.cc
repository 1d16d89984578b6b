// stories260K: llama2.c's own encodings (with BOS) of assorted strings, and its decode.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tokenizer/test_util.h"
#include "util/testing/testdata.h"

namespace tachyon::tokenizer {
namespace {

TEST(Stories260K, MatchesLlama2cEncodings) {
  const Tokenizer* tok = testing_util::GgufTokenizer("stories260K/stories260K.gguf");
  if (tok == nullptr) GTEST_SKIP() << "testdata/stories260K not found";
  std::ifstream in(TestdataDir() + "/stories260K/reference/tokenizer_cases.json");
  ASSERT_TRUE(in.good());
  const nlohmann::json data = nlohmann::json::parse(in);
  ASSERT_GT(data["cases"].size(), 10u);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_TRUE(tok->add_bos());
  for (const auto& c : data["cases"]) {
    const std::string text = c["text"].get<std::string>();
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok->Encode(text, /*add_special=*/true), ids) << "'" << text << "'";
    EXPECT_EQ(tok->Decode(ids, /*skip_special=*/true), c["decoded"].get<std::string>()) << text;
    IncrementalDetokenizer detok(*tok);
    std::string streamed;
    for (int32_t id : ids) streamed += detok.Push(id);
    streamed += detok.Flush();
    EXPECT_EQ(streamed, c["decoded"].get<std::string>()) << text;
  }
}

TEST(Stories260K, SpecialTokenText) {
  const Tokenizer* tok = testing_util::GgufTokenizer("stories260K/stories260K.gguf");
  if (tok == nullptr) GTEST_SKIP() << "testdata/stories260K not found";
  // Parsed: "<s>" becomes BOS; as plain text it is spelled out with ordinary pieces.
  const auto parsed = tok->Encode("a<s>b", false, /*parse_special=*/true);
  EXPECT_NE(std::find(parsed.begin(), parsed.end(), 1), parsed.end());
  const auto plain = tok->Encode("a<s>b", false, /*parse_special=*/false);
  EXPECT_EQ(std::find(plain.begin(), plain.end(), 1), plain.end());
  EXPECT_EQ(tok->Decode(plain), "a<s>b");
}

}  // namespace
}  // namespace tachyon::tokenizer
