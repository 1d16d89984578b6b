// Regex and choice front-ends: full-match languages and refused features.
#include "grammar/regex.h"

#include <gtest/gtest.h>

#include "grammar/testing/grammar_testing.h"

namespace tachyon::grammar {
namespace {

std::shared_ptr<const CompiledGrammar> CompileRegex(const std::string& re) {
  auto g = Compile({ConstraintSpec::Kind::kRegex, re, {}}, testing::ByteVocab());
  EXPECT_TRUE(g.ok()) << re << ": " << g.status().ToString();
  return g.ok() ? *g : nullptr;
}

void Check(const std::string& re, const std::vector<std::string>& accept,
           const std::vector<std::string>& reject) {
  auto g = CompileRegex(re);
  ASSERT_NE(g, nullptr);
  for (const auto& s : accept)
    EXPECT_TRUE(testing::MatchesBytes(*g, s)) << re << " ~ '" << s << "'";
  for (const auto& s : reject)
    EXPECT_FALSE(testing::MatchesBytes(*g, s)) << re << " !~ '" << s << "'";
}

TEST(Regex, LiteralsClassesAndEscapes) {
  Check("abc", {"abc"}, {"ab", "abcd", ""});
  Check("a.c", {"abc", "a日c"}, {"a\nc", "ac"});
  Check("\\d{3}-\\d{4}", {"555-1234"}, {"55-1234", "555-12345", "abc-defg"});
  Check("\\w+\\s\\W", {"ab_9 !"}, {"ab  !", "ab a"});
  Check("[^a-c]", {"d", "é", "\n"}, {"a", "b", "c"});
  Check("[\\d.]+", {"3.14", "..."}, {"3,14"});
  Check("[a\\-z]", {"a", "-", "z"}, {"b"});
  Check("\\D\\S", {"ab", "é!"}, {"1a", "a "});
  Check("\\.\\*\\x41\\u00e9\\t", {".*Aé\t"}, {"a*Aé\t"});
  Check("[]a]", {"]", "a"}, {"b"});
  Check("a{b", {"a{b"}, {"ab"});
}

TEST(Regex, GroupsAlternationQuantifiers) {
  Check("(ab|cd)+", {"ab", "cdab"}, {"", "abc"});
  Check("(?:x|y)?z", {"z", "xz", "yz"}, {"xyz"});
  Check("(?<year>\\d{4})-(?P<m>\\d\\d)", {"2024-05"}, {"2024-5"});
  Check("a{2,3}", {"aa", "aaa"}, {"a", "aaaa"});
  Check("a{2,}", {"aa", "aaaaaa"}, {"a"});
  Check("a{,2}b", {"b", "ab", "aab"}, {"aaab"});
  Check("a*?b+?c??", {"b", "aabbc"}, {"c"});
  Check("^(yes|no)$", {"yes", "no"}, {"yesno", ""});
  Check("^a|b$", {"a", "b"}, {"ab"});
  Check("(a|)b", {"ab", "b"}, {"aab"});
}

void ExpectRefused(const std::string& re, const std::string& needle) {
  auto g = Compile({ConstraintSpec::Kind::kRegex, re, {}}, testing::ByteVocab());
  ASSERT_FALSE(g.ok()) << re;
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find(needle), std::string::npos)
      << re << ": " << g.status().message();
}

TEST(Regex, UnsupportedFeaturesAreNamed) {
  ExpectRefused("(a)\\1", "backreference");
  ExpectRefused("(?P<x>a)(?P=x)", "backreference");
  ExpectRefused("a(?=b)", "lookahead");
  ExpectRefused("a(?!b)", "lookahead");
  ExpectRefused("(?<=a)b", "lookbehind");
  ExpectRefused("\\bword", "word boundary");
  ExpectRefused("(?i)abc", "inline flag");
  ExpectRefused("a++", "possessive");
  ExpectRefused("\\p{L}", "Unicode property");
  ExpectRefused("a^b", "'^' other than at the start");
  ExpectRefused("a$b", "'$' other than at the end");
  ExpectRefused("(ab", "unclosed '('");
  ExpectRefused("ab)", "unmatched ')'");
  ExpectRefused("[ab", "unterminated character class");
  ExpectRefused("*a", "nothing to repeat");
  ExpectRefused("a{3,1}", "n < m");
  ExpectRefused("[z-a]", "out of order");
  ExpectRefused("\\q", "unknown escape");
}

TEST(Choice, ExactlyOneOfTheStrings) {
  auto g =
      Compile({ConstraintSpec::Kind::kChoice, "", {"yes", "no", "maybe so"}}, testing::ByteVocab());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  for (const char* s : {"yes", "no", "maybe so"}) EXPECT_TRUE(testing::MatchesBytes(**g, s));
  for (const char* s : {"", "ye", "yesno", "maybe"}) EXPECT_FALSE(testing::MatchesBytes(**g, s));
  auto empty = Compile({ConstraintSpec::Kind::kChoice, "", {}}, testing::ByteVocab());
  EXPECT_FALSE(empty.ok());
}

TEST(GrammarCache, ReturnsTheSameGrammarAndEvicts) {
  GrammarCache cache(testing::ByteVocab(), 2);
  const ConstraintSpec a{ConstraintSpec::Kind::kRegex, "a+", {}};
  const ConstraintSpec b{ConstraintSpec::Kind::kRegex, "b+", {}};
  const ConstraintSpec c{ConstraintSpec::Kind::kChoice, "", {"c"}};
  auto ga = cache.Get(a);
  ASSERT_TRUE(ga.ok());
  EXPECT_EQ(cache.Get(a)->get(), ga->get());
  ASSERT_TRUE(cache.Get(b).ok());
  ASSERT_TRUE(cache.Get(c).ok());  // evicts a
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_NE(cache.Get(a)->get(), ga->get());
  EXPECT_FALSE(cache.Get({ConstraintSpec::Kind::kRegex, "(", {}}).ok());
  EXPECT_EQ(cache.size(), 2u);
}

// Past its byte bound the cache keeps only what fits (and always the grammar just added): a
// grammar that matchers walked holds its caches as well as its rules.
TEST(GrammarCache, HoldsAtMostItsBytes) {
  const ConstraintSpec a{ConstraintSpec::Kind::kRegex, "a+", {}};
  const ConstraintSpec b{ConstraintSpec::Kind::kRegex, "b+", {}};
  auto ga = Compile(a, testing::ByteVocab());
  ASSERT_TRUE(ga.ok());
  const size_t rules = (*ga)->MemoryBytes();
  EXPECT_GT(rules, 0u);
  auto m = (*ga)->NewMatcher();
  std::vector<uint32_t> mask(testing::ByteVocab()->mask_words());
  m->FillNextTokenBitmask(mask);  // computed into the grammar's caches
  EXPECT_GT((*ga)->MemoryBytes(), rules);

  GrammarCache roomy(testing::ByteVocab(), 8, {}, /*max_bytes=*/size_t{1} << 30);
  GrammarCache tight(testing::ByteVocab(), 8, {}, /*max_bytes=*/1);
  for (GrammarCache* cache : {&roomy, &tight}) {
    ASSERT_TRUE(cache->Get(a).ok());
    ASSERT_TRUE(cache->Get(b).ok());
  }
  EXPECT_EQ(roomy.size(), 2u);
  EXPECT_EQ(tight.size(), 1u);  // b only: a went when b came
}

}  // namespace
}  // namespace tachyon::grammar
