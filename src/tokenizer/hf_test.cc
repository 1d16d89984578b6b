// Hugging Face tokenizer.json sets in testdata/tokenizers/*: every line of cases.jsonl and
// fuzz.jsonl must match ids (with and without special tokens) and decoded text exactly.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tokenizer/pipeline.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/test_util.h"

namespace tachyon::tokenizer {
namespace {

using nlohmann::json;

std::vector<int32_t> Ids(const json& j) { return j.get<std::vector<int32_t>>(); }

class HfCases : public ::testing::TestWithParam<std::string> {};

TEST_P(HfCases, MatchReference) {
  const Tokenizer* tok = testing_util::HfTokenizer(GetParam());
  if (tok == nullptr) GTEST_SKIP() << "testdata/tokenizers/" << GetParam() << " not found";
  int checked = 0;
  for (const char* file : {"cases.jsonl", "fuzz.jsonl"}) {
    std::ifstream in(testing_util::TokenizerDir(GetParam()) + "/" + file);
    ASSERT_TRUE(in.good()) << file;
    std::string line;
    int lineno = 0;
    while (std::getline(in, line)) {
      ++lineno;
      if (line.empty()) continue;
      const json c = json::parse(line);
      const std::string text = c["text"].get<std::string>();
      const std::string where = std::string(file) + ":" + std::to_string(lineno);
      const auto no_special = Ids(c["ids_no_special"]);
      EXPECT_EQ(tok->Encode(text, false), no_special) << where << " text=" << text;
      EXPECT_EQ(tok->Encode(text, true), Ids(c["ids_with_special"])) << where;
      EXPECT_EQ(tok->Decode(no_special, false), c["decoded"].get<std::string>()) << where;
      if (c.contains("decoded_with_special")) {
        EXPECT_EQ(tok->Decode(Ids(c["ids_with_special"]), false),
                  c["decoded_with_special"].get<std::string>())
            << where;
      }
      if (c.contains("decoded_clean_up")) {
        EXPECT_TRUE(tok->clean_up_tokenization_spaces());
        EXPECT_EQ(Tokenizer::CleanUpTokenizationSpaces(tok->Decode(no_special, false)),
                  c["decoded_clean_up"].get<std::string>())
            << where;
      }
      // Streaming decode equals the one-shot decode.
      for (bool skip : {false, true}) {
        IncrementalDetokenizer detok(*tok, skip);
        std::string streamed;
        for (int32_t id : Ids(c["ids_with_special"])) streamed += detok.Push(id);
        streamed += detok.Flush();
        EXPECT_EQ(streamed, tok->Decode(Ids(c["ids_with_special"]), skip)) << where;
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 300);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, HfCases, ::testing::Values("llama2", "llama3", "qwen3"));

}  // namespace
}  // namespace tachyon::tokenizer
