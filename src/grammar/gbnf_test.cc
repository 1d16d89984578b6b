// GBNF front-end: what grammars accept and reject (fed byte by byte), and the errors.
#include "grammar/gbnf.h"

#include <gtest/gtest.h>

#include "grammar/testing/grammar_testing.h"

namespace tachyon::grammar {
namespace {

using testing::CompileGbnf;
using testing::MatchesBytes;

struct Case {
  const char* gbnf;
  std::vector<std::string> accept;
  std::vector<std::string> reject;
};

void Check(const Case& c) {
  auto g = CompileGbnf(c.gbnf);
  ASSERT_NE(g, nullptr);
  for (const auto& s : c.accept)
    EXPECT_TRUE(MatchesBytes(*g, s)) << c.gbnf << " should accept '" << s << "'";
  for (const auto& s : c.reject)
    EXPECT_FALSE(MatchesBytes(*g, s)) << c.gbnf << " should reject '" << s << "'";
}

TEST(Gbnf, LiteralsAlternationGrouping) {
  Check({R"(root ::= "ab" | "c" ("d" | "e"))", {"ab", "cd", "ce"}, {"", "a", "abc", "c", "cf"}});
  Check({"root ::= \"\"", {""}, {"a"}});
  Check({"root ::= x y\nx ::= \"x\"\ny ::= \"y\"", {"xy"}, {"x", "yx"}});
}

TEST(Gbnf, RepetitionOperators) {
  Check({R"(root ::= "a"* "b")", {"b", "ab", "aaaab"}, {"", "a", "ba"}});
  Check({R"(root ::= "a"+)", {"a", "aaa"}, {""}});
  Check({R"(root ::= "a"? "b")", {"b", "ab"}, {"aab"}});
  Check({R"(root ::= "a"{3})", {"aaa"}, {"aa", "aaaa"}});
  Check({R"(root ::= "a"{2,})", {"aa", "aaaaa"}, {"a"}});
  Check({R"(root ::= "a"{1,3})", {"a", "aa", "aaa"}, {"", "aaaa"}});
  Check({R"(root ::= "a"{,2})", {"", "a", "aa"}, {"aaa"}});
  Check({R"(root ::= ("ab" | "c"){2})", {"abab", "cab", "cc"}, {"ab", "abc a"}});
  Check({R"(root ::= "x" { 1 , 2 } "y")", {"xy", "xxy"}, {"y", "xxxy"}});
  // Counts above GrammarBuilder::kExpandUpTo run as counted repetitions.
  Check({R"(root ::= "a"{7})", {"aaaaaaa"}, {"aaaaaa", "aaaaaaaa"}});
  Check({R"(root ::= "a"{6,})", {"aaaaaa", std::string(300, 'a')}, {"aaaaa", "aaaaaab"}});
  Check({R"(root ::= ("ab" | "c"){2,6} "d")",
         {"ababd", "ccd", "abcabcabcd"},
         {"abd", "cccccccd", "d"}});
  Check({R"(root ::= ("x" "y"?){0,5})", {"", "x", "xyxxyxx"}, {"xxxxxx", "y"}});
  Check({R"(root ::= ("a"?){3,8} "b")", {"b", "ab", "aaaaaaaab"}, {"aaaaaaaaab"}});
  Check({"root ::= [0-9]{0,100000}", {"", "123", std::string(5000, '7')}, {"12a"}});
  Check({"root ::= (\"[\" x{5,} \"]\"){0,9}\nx ::= [a-z] | \"(\" [0-9]{1,30} \")\"",
         {"", "[abcde]", "[abc(12)de][zzzzzzz]"},
         {"[abcd]", "[ab(1)c]", "[abcd()e]"}});
}

TEST(Gbnf, CharClasses) {
  Check({"root ::= [a-c0-9_]+", {"a", "b9_", "000"}, {"d", "A", ""}});
  Check({"root ::= [^\"\\\\]*", {"", "abc", "héllo", "日本"}, {"\"", "\\", "a\"b"}});
  Check({"root ::= .", {"a", "é", "日", "\xF0\x9F\x98\x80"}, {"", "ab", "\xFF", "\xC3"}});
  // UTF-8 ranges in classes: Cyrillic lower case.
  Check({"root ::= [а-я]+", {"да", "я"}, {"z", "Д", "\xD0"}});
  Check({"root ::= [\\u00e0-\\u00ff\\U0001F600]", {"à", "ÿ", "\xF0\x9F\x98\x80"}, {"a", "Ā"}});
  Check({"root ::= [\\[\\]\\-]", {"[", "]", "-"}, {"a"}});
  Check({"root ::= [-a]", {"-", "a"}, {"b"}});
  // Invalid UTF-8 is never allowed, not even by a negated class.
  Check({"root ::= [^a]", {"b", "é"}, {"a", "\x80", "\xED\xA0\x80"}});
}

TEST(Gbnf, EscapesCommentsAndLines) {
  Check({"root ::= \"\\n\\t\\\"\\\\\\x41\\u00e9\"  # trailing comment\n", {"\n\t\"\\Aé"}, {"A"}});
  Check({"# leading comment\nroot ::=\n  \"a\"\n  | \"b\" # alt\n\n  | \"c\"\nother ::= \"z\"",
         {"a", "b", "c"},
         {"z"}});
  Check({"root ::= (\n  \"a\"\n  \"b\"\n)\r\n", {"ab"}, {"a"}});
}

TEST(Gbnf, RecursionAndNullableLoops) {
  Check({R"g(root ::= "(" root ")" | "x")g", {"x", "((x))"}, {"(x", "(x))"}});
  Check({R"(root ::= "a" root | "b")", {"b", std::string(5000, 'a') + "b"}, {"a"}});
  Check({R"(root ::= ("a"?)* "b")", {"b", "aab"}, {"ba"}});
  Check({"root ::= x* \"!\"\nx ::= y\ny ::= \"\" | \"y\"", {"!", "yy!"}, {"y"}});
  // A rule whose only alternative can never complete is dropped, the rest still works.
  Check({"root ::= \"a\" | loop\nloop ::= \"b\" loop", {"a"}, {"b", "bb"}});
}

TEST(Gbnf, HelperRulesNeverClashWithNamedRules) {
  // Repetitions and groups in `item` make helper rules; names like item-1 stay the user's.
  Check(
      {"root ::= item (\",\" item)* item-1 item-2\nitem ::= (\"a\" | \"b\")+\n"
       "item-1 ::= \"!\"\nitem-2 ::= \"?\"",
       {"a!?", "ab,b!?"},
       {"a", "a?!"}});
}

TEST(Gbnf, JsonLikeGrammar) {
  Check({testing::kJsonLikeGbnf,
         {"{}", "{\"a\": 1}", "{\"a\":[1,2.5e3,\"x\\u00e9\"],\"b\":{\"c\":null}}", "{ }"},
         {"[]", "{\"a\"}", "{\"a\": 01}", "{\"a\":1,}", "{   }", "{\"\x01\":1}"}});
}

Status CompileError(const std::string& gbnf) {
  ConstraintSpec spec{ConstraintSpec::Kind::kGbnf, gbnf, {}};
  auto g = Compile(spec, testing::ByteVocab());
  EXPECT_FALSE(g.ok()) << gbnf;
  return g.ok() ? OkStatus() : g.status();
}

void ExpectError(const std::string& gbnf, const std::string& needle) {
  const Status st = CompileError(gbnf);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << gbnf;
  EXPECT_NE(st.message().find(needle), std::string::npos)
      << "'" << st.message() << "' lacks '" << needle << "' for\n"
      << gbnf;
}

TEST(Gbnf, ErrorsNameTheProblemAndPlace) {
  ExpectError("root ::= foo", "1:10: undefined rule 'foo'");
  ExpectError("root = \"a\"", "1:6: expected '::=' after rule name 'root'");
  ExpectError("root ::= \"abc", "1:10: unterminated string literal");
  ExpectError("root ::= [abc", "1:10: unterminated character class");
  ExpectError("root ::= \"a\"\nroot ::= \"b\"", "2:1: rule 'root' defined twice (first at 1:1)");
  ExpectError("root ::= \"\\q\"", "1:11: unknown escape '\\q'");
  ExpectError("x ::= \"a\"", "no rule named 'root'");
  ExpectError("root ::= (\"a\"", "1:10: unclosed '('");
  ExpectError("root ::= \"a\" )", "1:14: unmatched ')'");
  ExpectError("root ::= \"a\"{3,1}", "repetition {m,n} with n < m");
  ExpectError("root ::= [z-a]", "character range out of order");
  ExpectError("root ::= \"a\" @", "1:14: unexpected character '@'");
  ExpectError("root ::= \"\\uD800\"", "not a Unicode scalar value");
  ExpectError("root ::= \"\xff\"", "invalid UTF-8");
  ExpectError("root ::= \"a\"{999999999}", "above the limit");
  ExpectError("root ::= root \"a\" | \"b\"", "left recursion: rule 'root'");
  ExpectError("root ::= x\nx ::= y? root \"a\" | \"b\"\ny ::= \"y\"", "left recursion");
  ExpectError("root ::= \"a\" root", "grammar matches nothing");
  ExpectError("root ::= [^\\x00-\\U0010FFFF]", "grammar matches nothing");
  ExpectError("root ::= \"a\" b ::= \"c\"", "expected the end of the line before rule 'b'");
}

TEST(Gbnf, CompileBudgetIsEnforced) {
  ConstraintSpec spec{ConstraintSpec::Kind::kGbnf, "", {}};
  for (int i = 0; i < 20000; ++i) {
    spec.source += "r" + std::to_string(i) + " ::= \"a\"{0,50} r" + std::to_string(i + 1) + "\n";
  }
  spec.source += "r20000 ::= \"b\"\nroot ::= r0\n";
  CompileOptions opts;
  opts.budget = std::chrono::microseconds(1000);
  auto g = Compile(spec, testing::ByteVocab(), opts);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("compile budget"), std::string::npos)
      << g.status().ToString();
}

}  // namespace
}  // namespace tachyon::grammar
