// CheckDraftVocabulary: a draft model must share the target's tokenizer.
#include "engine/draft_compat.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace tachyon::engine {
namespace {

// A small WordPiece tokenizer.json; `vocab` and `added` replace parts of it.
std::string Json(const std::string& vocab, const std::string& sep_special = "true") {
  return R"({"added_tokens": [{"id": 0, "content": "[UNK]", "special": true},
                             {"id": 1, "content": "[CLS]", "special": true},
                             {"id": 2, "content": "[SEP]", "special": )" +
         sep_special + R"(}],
  "normalizer": {"type": "BertNormalizer", "lowercase": true},
  "pre_tokenizer": {"type": "BertPreTokenizer"},
  "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
  "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
            "vocab": {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, )" +
         vocab + "}}}";
}

std::unique_ptr<tokenizer::Tokenizer> Tok(const std::string& json) {
  auto t = tokenizer::Tokenizer::FromHfJson(json, "", "t.json");
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(t).value() : nullptr;
}

TEST(DraftCompatTest, SameTokenizerPasses) {
  auto a = Tok(Json(R"("hello": 3, "world": 4)"));
  auto b = Tok(Json(R"("hello": 3, "world": 4)"));
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(CheckDraftVocabulary(*a, 5, *b, 5).ok());
}

TEST(DraftCompatTest, EachDifferenceIsNamed) {
  auto target = Tok(Json(R"("hello": 3, "world": 4)"));
  ASSERT_TRUE(target);
  const struct {
    std::string draft_json;
    int64_t draft_rows;
    std::string want;
  } cases[] = {
      {Json(R"("hello": 3, "word": 4)"), 5, "token 4 is 'world' in the target and 'word'"},
      {Json(R"("hello": 3, "world": 4, "again": 5)"), 6, "vocabulary has 6 tokens"},
      {Json(R"("hello": 3, "world": 4)", "false"), 5, "token 2 ('[SEP]') has type"},
      {Json(R"("hello": 3, "world": 4)"), 8, "scores 8 tokens, the target 5"},
  };
  for (const auto& c : cases) {
    auto draft = Tok(c.draft_json);
    ASSERT_TRUE(draft);
    Status st = CheckDraftVocabulary(*target, 5, *draft, c.draft_rows);
    ASSERT_FALSE(st.ok()) << c.want;
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("does not share the target's tokenizer"), std::string::npos);
    EXPECT_NE(st.message().find(c.want), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace tachyon::engine
