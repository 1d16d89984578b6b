#include "server/tool_grammar.h"

#include <gtest/gtest.h>

#include "grammar/testing/grammar_testing.h"

namespace tachyon::server {
namespace {

using grammar::testing::CompileGbnf;
using grammar::testing::MatchesBytes;

const std::vector<ToolSchema> kTools = {
    {"get_weather",
     R"({"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},)"
     R"("required":["city"]})"},
    {"get_time", ""}};

std::shared_ptr<const grammar::CompiledGrammar> Grammar(
    ToolCallFormat format, bool parallel, ToolGrammarStart start,
    std::span<const ToolSchema> tools = kTools) {
  auto gbnf = ToolCallGrammar(format, tools, parallel, start);
  EXPECT_TRUE(gbnf.ok()) << gbnf.status().ToString();
  return gbnf.ok() ? CompileGbnf(*gbnf) : nullptr;
}

TEST(ToolGrammarTest, PrefixRenamesRulesOnly) {
  const std::string gbnf =
      "root ::= \"{\" ws item{2,3} \"}\" # root-ish comment\n"
      "item ::= [a-z\\]] | \"root\\\"s\" | ( ws item )\n"
      "ws ::= [ \\t]{0,2}\n";
  EXPECT_EQ(PrefixGbnfRules(gbnf, "t0-"),
            "t0-root ::= \"{\" t0-ws t0-item{2,3} \"}\" # root-ish comment\n"
            "t0-item ::= [a-z\\]] | \"root\\\"s\" | ( t0-ws t0-item )\n"
            "t0-ws ::= [ \\t]{0,2}\n");
}

TEST(ToolGrammarTest, LiteralEscapes) {
  EXPECT_EQ(GbnfLiteral("a\"b\\c\nd\x01"), "\"a\\\"b\\\\c\\nd\\x01\"");
}

// The grammars accept exactly the calls of each format: allowed names, arguments valid under
// the schema, the format's closing, one call unless parallel.
TEST(ToolGrammarTest, HermesCallsFollowTheSchemas) {
  auto g = Grammar(ToolCallFormat::kHermes, /*parallel=*/true, ToolGrammarStart::kAtName);
  ASSERT_NE(g, nullptr);
  const std::string one =
      "get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>";
  EXPECT_TRUE(MatchesBytes(*g, one));
  EXPECT_TRUE(MatchesBytes(*g, one + "\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": "
                                     "{\"zone\": [1]}}\n</tool_call>"));
  EXPECT_FALSE(MatchesBytes(*g, "get_wether\", \"arguments\": {\"city\": \"P\"}}\n</tool_call>"));
  EXPECT_FALSE(MatchesBytes(*g, "get_weather\", \"arguments\": {\"days\": 3}}\n</tool_call>"))
      << "the required city is missing";
  EXPECT_FALSE(MatchesBytes(*g, "get_weather\", \"arguments\": {\"city\": 3}}\n</tool_call>"));
  EXPECT_FALSE(MatchesBytes(*g, "get_weather\", \"arguments\": {\"city\": \"P\"}}"))
      << "not closed";

  auto single = Grammar(ToolCallFormat::kHermes, /*parallel=*/false, ToolGrammarStart::kAtName);
  ASSERT_NE(single, nullptr);
  EXPECT_TRUE(MatchesBytes(*single, one));
  EXPECT_FALSE(MatchesBytes(*single, one + "\n<tool_call>\n{\"name\": \"get_time\", "
                                           "\"arguments\": {}}\n</tool_call>"));

  auto after = Grammar(ToolCallFormat::kHermes, false, ToolGrammarStart::kAfterTrigger);
  ASSERT_NE(after, nullptr);
  EXPECT_TRUE(MatchesBytes(*after, "\n{\"name\": \"" + one));
  auto whole = Grammar(ToolCallFormat::kHermes, false, ToolGrammarStart::kAtTrigger);
  ASSERT_NE(whole, nullptr);
  EXPECT_TRUE(MatchesBytes(*whole, "<tool_call>\n{\"name\": \"" + one));
  EXPECT_FALSE(MatchesBytes(*whole, "\n{\"name\": \"" + one));
}

TEST(ToolGrammarTest, Llama3AndMistralSyntax) {
  auto llama = Grammar(ToolCallFormat::kLlama3, true, ToolGrammarStart::kAtName);
  ASSERT_NE(llama, nullptr);
  EXPECT_TRUE(MatchesBytes(*llama, "get_time\", \"parameters\": {}}"));
  EXPECT_TRUE(MatchesBytes(*llama,
                           "get_time\", \"parameters\": {}}; {\"name\": \"get_weather\", "
                           "\"parameters\": {\"city\": \"x\"}}"));
  EXPECT_FALSE(MatchesBytes(*llama, "get_time\", \"arguments\": {}}"));
  auto llama_whole = Grammar(ToolCallFormat::kLlama3, false, ToolGrammarStart::kAtTrigger);
  ASSERT_NE(llama_whole, nullptr);
  EXPECT_TRUE(MatchesBytes(*llama_whole, "{\"name\": \"get_time\", \"parameters\": {}}"));

  auto mistral = Grammar(ToolCallFormat::kMistral, true, ToolGrammarStart::kAtName);
  ASSERT_NE(mistral, nullptr);
  EXPECT_TRUE(MatchesBytes(*mistral, "get_time\", \"arguments\": {}}]"));
  EXPECT_TRUE(MatchesBytes(*mistral,
                           "get_time\", \"arguments\": {}}, {\"name\": \"get_time\", "
                           "\"arguments\": {}}]"));
  EXPECT_FALSE(MatchesBytes(*mistral, "get_time\", \"arguments\": {}}"));
  auto mistral_after = Grammar(ToolCallFormat::kMistral, false, ToolGrammarStart::kAfterTrigger);
  ASSERT_NE(mistral_after, nullptr);
  EXPECT_TRUE(MatchesBytes(*mistral_after, "[{\"name\": \"get_time\", \"arguments\": {}}]"));
}

TEST(ToolGrammarTest, TriggersAndOpeningsMakeTheForcedPrefix) {
  for (ToolCallFormat f :
       {ToolCallFormat::kHermes, ToolCallFormat::kLlama3, ToolCallFormat::kMistral}) {
    EXPECT_EQ(std::string(ToolCallTrigger(f)) + std::string(ToolCallOpening(f)),
              ForcedToolCallPrefix(f, ""));
  }
}

TEST(ToolGrammarTest, Errors) {
  const std::vector<ToolSchema> bad = {{"f", R"({"type":"object","not":{}})"}};
  auto r = ToolCallGrammar(ToolCallFormat::kHermes, bad, false, ToolGrammarStart::kAtName);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("'f'"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("'not'"), std::string::npos) << r.status().message();
  EXPECT_FALSE(
      ToolCallGrammar(ToolCallFormat::kNone, kTools, false, ToolGrammarStart::kAtName).ok());
  EXPECT_FALSE(ToolCallGrammar(ToolCallFormat::kHermes, {}, false, ToolGrammarStart::kAtName).ok());
}

}  // namespace
}  // namespace tachyon::server
