#include "server/triggered_grammar.h"

#include <gtest/gtest.h>

#include "grammar/testing/grammar_testing.h"

namespace tachyon::server {
namespace {

using grammar::testing::CompileGbnf;
using grammar::testing::MakeVocab;

// A tiny vocabulary where the trigger "</think>" is a token sequence: "</", "think", ">" (and
// single bytes), plus tokens that would complete it mid-token.
const std::vector<std::string> kTokens = {
    "</",       "think", ">", "<", "/", "t", "h", "i", "n", "k", "a", "b", "{", "}", "\"", ":",
    "k>x",       // after "</thin": completes the trigger, then 'x'
    ">\n",       // after "</think": completes it, then '\n'
    "</think>",  // the whole trigger as one token: allowed (it ends on a token boundary)
    "nk>"};      // after "</thi": completes it exactly at its end: allowed
// MakeVocab appends EOS as the last id.
const int32_t kEos = static_cast<int32_t>(kTokens.size());

int32_t Id(const std::string& s) {
  for (size_t i = 0; i < kTokens.size(); ++i) {
    if (kTokens[i] == s) return static_cast<int32_t>(i);
  }
  ADD_FAILURE() << "no token " << s;
  return -1;
}

std::shared_ptr<const std::vector<std::string>> Bytes() {
  auto b = std::make_shared<std::vector<std::string>>(kTokens);
  b->push_back("");  // EOS
  return b;
}

struct Fixture {
  std::shared_ptr<const grammar::Vocabulary> vocab = MakeVocab(kTokens);
  std::shared_ptr<const grammar::CompiledGrammar> inner =
      CompileGbnf("root ::= \"{\" [ab]* \"}\"", vocab);
  std::shared_ptr<const TriggerTable> table = TriggerTable::Build(Bytes(), "</think>").value();
};

bool Allowed(grammar::TokenMatcher& m, int32_t id) {
  std::vector<uint32_t> mask(2);
  m.FillNextTokenBitmask(mask);
  return (mask[id / 32] >> (id % 32)) & 1u;
}

TEST(TriggeredGrammarTest, FreeUntilTheTriggerThenConstrained) {
  Fixture f;
  ASSERT_NE(f.inner, nullptr);
  TriggeredGrammar g(f.table, f.inner, /*free_may_end=*/true);
  auto m = g.NewMatcher();
  // Free: anything, EOS included; a token completing the trigger mid-token is not allowed.
  for (const char* t : {"a", "}", "\"", "</", "think", "</think>"}) {
    EXPECT_TRUE(Allowed(*m, Id(t))) << t;
  }
  EXPECT_TRUE(Allowed(*m, kEos));
  EXPECT_TRUE(m->CanTerminate());
  for (const char* t : {"a", "</", "thin"}) {
    if (std::string(t) == "thin") {
      for (const char* b : {"t", "h", "i", "n"}) ASSERT_TRUE(m->AcceptToken(Id(b)));
    } else {
      ASSERT_TRUE(m->AcceptToken(Id(t))) << t;
    }
  }
  // "</thin" so far: "k>x" would complete it before its end.
  EXPECT_FALSE(Allowed(*m, Id("k>x")));
  EXPECT_FALSE(m->AcceptToken(Id("k>x")));
  EXPECT_TRUE(Allowed(*m, Id("k")));
  ASSERT_TRUE(m->AcceptToken(Id("k")));
  EXPECT_FALSE(Allowed(*m, Id(">\n")));
  ASSERT_TRUE(m->AcceptToken(Id(">")));
  // Constrained now: only "{" starts the inner grammar; EOS is not allowed until it ends.
  EXPECT_TRUE(Allowed(*m, Id("{")));
  EXPECT_FALSE(Allowed(*m, Id("a")));
  EXPECT_FALSE(Allowed(*m, kEos));
  EXPECT_FALSE(m->CanTerminate());
  EXPECT_FALSE(m->AcceptToken(Id("a")));
  ASSERT_TRUE(m->AcceptToken(Id("{")));
  ASSERT_TRUE(m->AcceptToken(Id("b")));
  ASSERT_TRUE(m->AcceptToken(Id("}")));
  EXPECT_TRUE(m->CanTerminate());
  EXPECT_TRUE(m->IsTerminated());
}

TEST(TriggeredGrammarTest, TheWholeTriggerTokenAndAnExactEndingStartTheGrammar) {
  Fixture f;
  TriggeredGrammar g(f.table, f.inner, /*free_may_end=*/false);
  auto m = g.NewMatcher();
  EXPECT_FALSE(m->CanTerminate());
  ASSERT_TRUE(m->AcceptToken(Id("</think>")));
  EXPECT_FALSE(Allowed(*m, Id("a")));
  EXPECT_TRUE(Allowed(*m, Id("{")));

  auto m2 = g.NewMatcher();
  for (const char* t : {"</", "t", "h", "i"}) ASSERT_TRUE(m2->AcceptToken(Id(t)));
  EXPECT_TRUE(Allowed(*m2, Id("nk>")));
  ASSERT_TRUE(m2->AcceptToken(Id("nk>")));
  EXPECT_FALSE(m2->AcceptToken(Id("a")));
  EXPECT_TRUE(m2->AcceptToken(Id("{")));
}

TEST(TriggeredGrammarTest, RollbackAcrossTheTrigger) {
  Fixture f;
  TriggeredGrammar g(f.table, f.inner, true);
  auto m = g.NewMatcher();
  for (const char* t : {"a", "</", "think", ">", "{", "a"}) ASSERT_TRUE(m->AcceptToken(Id(t)));
  m->Rollback(1);  // inside the inner grammar
  EXPECT_TRUE(Allowed(*m, Id("b")));
  EXPECT_FALSE(Allowed(*m, Id("{")));
  m->Rollback(2);  // back before ">": free again, "</think" matched
  EXPECT_TRUE(Allowed(*m, Id("a")));
  EXPECT_FALSE(Allowed(*m, Id(">\n")));
  EXPECT_TRUE(m->CanTerminate());
  ASSERT_TRUE(m->AcceptToken(Id(">")));
  EXPECT_FALSE(Allowed(*m, Id("a")));
  m->Rollback(4);  // before "</": nothing of the trigger matched
  EXPECT_TRUE(Allowed(*m, Id(">\n")));
  EXPECT_TRUE(Allowed(*m, Id("k>x")));
  EXPECT_TRUE(m->AcceptToken(Id("k>x")));
}

TEST(TriggeredGrammarTest, TableErrors) {
  EXPECT_FALSE(TriggerTable::Build(Bytes(), "").ok());
  EXPECT_FALSE(TriggerTable::Build(Bytes(), std::string(65, 'x')).ok());
  // A self-overlapping trigger: "aab" after "aa" + "a" stays at "aa".
  auto t = TriggerTable::Build(Bytes(), "aab").value();
  EXPECT_EQ(t->Next(2, 'a'), 2);
  EXPECT_EQ(t->Next(2, 'b'), 3);
  EXPECT_EQ(t->Next(1, 'b'), 0);
}

}  // namespace
}  // namespace tachyon::server
