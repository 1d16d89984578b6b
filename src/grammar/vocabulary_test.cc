// Vocabulary bytes from real tokenizers and the token trie's layout.
#include "grammar/vocabulary.h"

#include <gtest/gtest.h>

#include "grammar/testing/grammar_testing.h"

namespace tachyon::grammar {
namespace {

TEST(TokenTrie, PreorderSubtreesAndDuplicates) {
  const std::vector<std::string> bytes = {"ab", "a", "", "abc", "b", "ab", "ba"};
  TokenTrie trie(bytes);
  const auto& n = trie.nodes();
  // Nodes: root, a, ab, abc, b, ba.
  ASSERT_EQ(n.size(), 6u);
  EXPECT_EQ(trie.tokens(), (std::vector<int32_t>{1, 0, 5, 3, 4, 6}));
  EXPECT_EQ(n[0].end, 6u);
  EXPECT_EQ(n[1].byte, 'a');
  EXPECT_EQ(n[1].end, 4u);
  EXPECT_EQ(n[2].depth, 2);
  EXPECT_EQ(n[2].own_end - n[2].tok_begin, 2u);  // "ab" twice
  EXPECT_EQ(n[2].sub_end - n[2].tok_begin, 3u);
  EXPECT_EQ(n[4].byte, 'b');
  EXPECT_EQ(n[4].end, 6u);
}

TEST(Vocabulary, EosIdsAreCheckedAndGetNoBytes) {
  auto bad = Vocabulary::FromTokenBytes({"a", "b"}, {2});
  EXPECT_FALSE(bad.ok());
  auto v = Vocabulary::FromTokenBytes({"a", "b", "c"}, {2, 2});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ((*v)->eos_ids(), (std::vector<int32_t>{2}));
  EXPECT_TRUE((*v)->bytes(2).empty());
  EXPECT_EQ((*v)->bytes(1), "b");
  EXPECT_TRUE((*v)->bytes(3).empty());
  EXPECT_EQ((*v)->mask_words(), 1u);
}

TEST(Vocabulary, ByteLevelBpeBytes) {
  for (const char* name : {"qwen3"}) {
    auto v = testing::TestdataVocab(name);
    if (v == nullptr) GTEST_SKIP() << "testdata tokenizers not found";
    int with_space = 0, with_g = 0, multibyte_partial = 0;
    for (int32_t t = 0; t < v->size(); ++t) {
      const std::string_view b = v->bytes(t);
      if (!b.empty() && b[0] == ' ') ++with_space;
      if (b.find("\xC4\xA0") != std::string_view::npos) ++with_g;
      if (b.size() == 1 && static_cast<uint8_t>(b[0]) >= 0x80) ++multibyte_partial;
    }
    EXPECT_GT(with_space, 10000) << name;  // "Ġword" decodes to " word"
    EXPECT_LT(with_g, with_space / 100) << name;
    EXPECT_GE(multibyte_partial, 64) << name;  // every non-ASCII byte has its own token
    for (int32_t e : v->eos_ids()) EXPECT_TRUE(v->bytes(e).empty());
  }
}

TEST(Vocabulary, SentencePieceBytes) {
  auto v = testing::TestdataVocab("llama2");
  if (v == nullptr) GTEST_SKIP() << "testdata tokenizers not found";
  // <unk>, <s>, </s> have no bytes; <0x0A> is a newline; "▁the" is " the".
  EXPECT_TRUE(v->bytes(0).empty());
  EXPECT_TRUE(v->bytes(1).empty());
  EXPECT_TRUE(v->bytes(2).empty());
  EXPECT_EQ(v->bytes(3 + 0x0A), "\n");
  bool found_the = false;
  for (int32_t t = 0; t < v->size(); ++t) found_the = found_the || v->bytes(t) == " the";
  EXPECT_TRUE(found_the);
}

}  // namespace
}  // namespace tachyon::grammar
