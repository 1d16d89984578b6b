// Token masks against brute force (every token tried with AcceptToken), EOS placement,
// termination and rollback, on small vocabularies and on the testdata tokenizers.
#include "grammar/matcher.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "grammar/testing/grammar_testing.h"

namespace tachyon::grammar {
namespace {

using testing::BruteForceMask;
using testing::CompileGbnf;
using testing::kJsonLikeGbnf;
using testing::MakeVocab;


std::vector<int32_t> Bits(const std::vector<uint32_t>& mask) {
  std::vector<int32_t> out;
  for (size_t w = 0; w < mask.size(); ++w) {
    for (int b = 0; b < 32; ++b) {
      if ((mask[w] >> b) & 1u) out.push_back(static_cast<int32_t>(w * 32 + b));
    }
  }
  return out;
}

// Random walk: at each step the mask must equal brute force; then a random allowed token
// (EOS only at the end) is accepted. Returns the number of steps taken.
int WalkAndCompare(const CompiledGrammar& g, const Vocabulary& vocab, int steps, uint32_t seed,
                   bool brute_force = true) {
  std::mt19937 rng(seed);
  auto m = g.NewMatcher();
  std::vector<uint32_t> mask(vocab.mask_words());
  int i = 0;
  for (; i < steps; ++i) {
    m->FillNextTokenBitmask(mask);
    if (brute_force) {
      const auto ref = BruteForceMask(*m, vocab);
      if (mask != ref) {
        ADD_FAILURE() << "step " << i << ": mask differs from brute force";
        return i;
      }
    }
    std::vector<int32_t> allowed;
    for (int32_t t : Bits(mask)) {
      if (!vocab.IsEos(t)) allowed.push_back(t);
    }
    bool eos = false;
    for (int32_t t : vocab.eos_ids()) eos = eos || ((mask[t >> 5] >> (t & 31)) & 1u);
    EXPECT_EQ(eos, m->CanTerminate()) << "step " << i;
    if (allowed.empty()) {
      EXPECT_TRUE(m->IsTerminated());
      break;
    }
    EXPECT_FALSE(m->IsTerminated());
    // Prefer tokens after which the grammar goes on (a walk should not stop at "{}").
    for (int tries = 0;; ++tries) {
      const int32_t t = allowed[rng() % allowed.size()];
      EXPECT_TRUE(m->AcceptToken(t)) << "step " << i << " token " << t;
      if (!m->CanTerminate() || tries == 20 || i + 1 == steps) break;
      m->Rollback(1);
    }
  }
  return i;
}

std::vector<std::string> SmallTokens() {
  // Multi-byte tokens over JSON's alphabet, including ones that span string boundaries,
  // partial UTF-8 and whole words.
  std::vector<std::string> t;
  for (int b = 0; b < 128; ++b) t.push_back(std::string(1, static_cast<char>(b)));
  for (const char* s :
       {"{\"",  "\":",  "\",",      "\"}",  "\": \"", "true", "fal", "se",   "null",
        "nu",   "12",   "3.",       "e+",   "ab",     "a\"",  "\\u", "00",   "é",
        "\xC3", "\xA9", "\xE6\x97", "\xA5", "日本",   "[{",   "}]",  "}}",   ", ",
        "  ",   "\n",   "-0",       "\"\"", "{}",     "[]",   "1e",  "\\\"", "x\\"}) {
    t.push_back(s);
  }
  return t;
}

TEST(Matcher, MasksEqualBruteForceOnSmallVocab) {
  auto vocab = MakeVocab(SmallTokens());
  for (const char* gbnf :
       {kJsonLikeGbnf, "root ::= [a-z]+ (\" \" [a-z]+)*", "root ::= \"ab\" | \"abc\" \"d\"*",
        "root ::= (\"a\" | \"é\" | [日-本])* \"\\n\"", "root ::= x \"\\\"\" x\nx ::= [a\"]{0,3}"}) {
    auto g = CompileGbnf(gbnf, vocab);
    ASSERT_NE(g, nullptr);
    for (uint32_t seed = 1; seed <= 8; ++seed) WalkAndCompare(*g, *vocab, 40, seed);
  }
}

// Counted repetitions (above GrammarBuilder::kExpandUpTo) run with counters; their token
// classes are shared across counts far from the bounds. Tokens longer than the class headroom
// (GrammarImpl::kFarHeadroom) and counts near both bounds must still give exact masks.
TEST(Matcher, CountedRepetitionsEqualBruteForce) {
  std::vector<std::string> toks;
  for (int b = 0; b < 128; ++b) toks.push_back(std::string(1, static_cast<char>(b)));
  for (int k = 2; k <= 45; ++k) toks.push_back(std::string(k, 'a'));
  for (const std::string& s :
       {std::string(33, 'b'), std::string(40, 'c') + ".", std::string(34, 'a') + ".",
        std::string("aaaaa."), std::string("ab"), std::string("abc"), std::string("[a"),
        std::string("]["), std::string("[abc]"), std::string("]"), std::string("xa"),
        std::string("\xC3\xA9"),
        std::string("a\xC3\xA9"
                    "b"),
        std::string("qqqq"), std::string("qqqqqqqqz"), std::string(36, 'a') + "]x",
        std::string(20, 'b') + "][", std::string("a]x")}) {
    toks.push_back(s);
  }
  // Long tokens that take fewer iterations than bytes (2-byte characters), or leave the
  // repetition and go on after it, or pop out of it.
  std::string e17, ae;
  for (int k = 0; k < 17; ++k) e17 += "\xC3\xA9";
  for (int k = 0; k < 12; ++k) ae += "a\xC3\xA9";
  for (const std::string& s : {e17, ae, e17 + "a", ae + "..", std::string(33, 'a') + "xy",
                               std::string(34, 'c') + "xyzab", std::string(35, 'b') + ">", ae + ">",
                               std::string(34, 'a') + "><", std::string(33, 'a') + "><"}) {
    toks.push_back(s);
  }
  auto vocab = MakeVocab(toks);
  for (const char* gbnf :
       {"root ::= [a-c]{5,80} \".\"", "root ::= (\"x\" [ab]){0,3} [ab]{60,200} \"!\"",
        "root ::= (\"[\" [a-z]{0,40} \"]\"){2,12}", "root ::= (\"a\"?){0,10} \"b\"",
        "root ::= \"q\"{7,} \"z\"", "root ::= ([a-c] | \"é\"){3,50}",
        "root ::= [a-c]{0,5000} \".\"", "root ::= (\"[\" [a-c]{0,80} \"]\")+ \"x\"",
        "root ::= ([a-c] | \"é\"){0,70} \"..\"", "root ::= [a-c]{10,75} \"xyz\" [a-c]* \">\"",
        "root ::= \"<\" ([a-c] | \"é\"){0,64} \">\" root?"}) {
    auto g = CompileGbnf(gbnf, vocab);
    ASSERT_NE(g, nullptr) << gbnf;
    for (uint32_t seed = 1; seed <= 6; ++seed) WalkAndCompare(*g, *vocab, 40, seed);
  }
  // A long token that a parse keeps inside the repetition and another one pops out of (after
  // "aaa...>", the next w takes "<"): near the bound only the pop fits.
  auto g = CompileGbnf("root ::= w w \".\"\nw ::= \"<\" ([a-c] | \"><\"){0,70} \">\"", vocab);
  ASSERT_NE(g, nullptr);
  for (uint32_t seed = 1; seed <= 40; ++seed) WalkAndCompare(*g, *vocab, 12, seed);
}

// Token classes are shared by every grammar of one vocabulary when their grammar fragments are
// equal (GrammarImpl::FragmentKey). Grammars that differ from a first one only in a byte set,
// a repetition bound or what follows a string must not take its classes.
TEST(Matcher, ClassesSharedAcrossGrammarsOnlyForEqualFragments) {
  auto vocab = MakeVocab(SmallTokens());
  for (const char* gbnf : {
           R"(root ::= "{" s ":" s "}"
s ::= "\"" [^"\\\x00-\x1F]* "\"")",
           R"(root ::= "{" s ":" s "}"
s ::= "\"" [^"\\\x00-\x1Fa]* "\"")",
           R"(root ::= "{" s "," s "}"
s ::= "\"" [^"\\\x00-\x1F]* "\"")",
           R"(root ::= "[" s ":" s "]"
s ::= "\"" [^"\\\x00-\x1F]* "\"")",
           R"(root ::= "{" s ":" s "}"
s ::= "\"" [^"\\\x00-\x1F]{0,40} "\"")",
           R"(root ::= "{" s ":" s "}"
s ::= "\"" [^"\\\x00-\x1F]{0,41} "\"")",
           R"(root ::= "{" s ":" s "}"
s ::= "\"" [^"\\\x00-\x1F]{2,41} "\"")",
           R"(root ::= "{" s ":" s "}"
s ::= "\"" [^"\\\x00-\x1F]* "\"" "!"?)",
       }) {
    auto g = CompileGbnf(gbnf, vocab);
    ASSERT_NE(g, nullptr) << gbnf;
    for (uint32_t seed = 1; seed <= 6; ++seed) WalkAndCompare(*g, *vocab, 30, seed);
  }
}

// Configurations with many heads at once (the alternatives of a choice, the partial matches of
// an unanchored alternation).
TEST(Matcher, ManyHeadsEqualBruteForce) {
  auto vocab = MakeVocab(SmallTokens());
  for (
      const char* gbnf : {
          R"(root ::= "ab" | "a\"" | "nu" | "null" | "12" | "1e" | "true" | "fal" | "se" |
                    "x" | "{}" | "[]" | "\\u00")",
          R"(root ::= [a-z]* ("ab" | "abc" | "bc" | "cab" | "null" | "nu" | "se" | "fal" |
                            "true" | "e+") [a-z ]* "\n")",
          R"(root ::= ([a-c]* ("ab" | "ba" | "abc" | "cc" | "ca" | "aa" | "bb" | "cb" | "bca"))+ "!")",
      }) {
    auto g = CompileGbnf(gbnf, vocab);
    ASSERT_NE(g, nullptr) << gbnf;
    for (uint32_t seed = 1; seed <= 8; ++seed) WalkAndCompare(*g, *vocab, 30, seed);
  }
}

TEST(Matcher, EosOnlyWhereTheGrammarMayEnd) {
  auto vocab = MakeVocab({"a", "b", "ab"});
  const int32_t eos = 3;
  auto g = CompileGbnf("root ::= \"a\" \"b\"?", vocab);
  ASSERT_NE(g, nullptr);
  auto m = g->NewMatcher();
  std::vector<uint32_t> mask(1);
  m->FillNextTokenBitmask(mask);
  EXPECT_EQ(Bits(mask), (std::vector<int32_t>{0, 2}));
  EXPECT_FALSE(m->CanTerminate());
  EXPECT_FALSE(m->AcceptToken(eos));
  EXPECT_FALSE(m->AcceptToken(1));
  EXPECT_FALSE(m->AcceptToken(-1));
  EXPECT_FALSE(m->AcceptToken(99));
  ASSERT_TRUE(m->AcceptToken(0));
  m->FillNextTokenBitmask(mask);
  EXPECT_EQ(Bits(mask), (std::vector<int32_t>{1, eos}));
  EXPECT_TRUE(m->CanTerminate());
  EXPECT_FALSE(m->IsTerminated());
  ASSERT_TRUE(m->AcceptToken(1));
  EXPECT_TRUE(m->IsTerminated());
  m->FillNextTokenBitmask(mask);
  EXPECT_EQ(Bits(mask), (std::vector<int32_t>{eos}));
  ASSERT_TRUE(m->AcceptToken(eos));
  EXPECT_TRUE(m->IsTerminated());
  m->FillNextTokenBitmask(mask);
  EXPECT_TRUE(Bits(mask).empty());
  EXPECT_FALSE(m->AcceptToken(0));
  m->Rollback(2);  // back to after "a"
  EXPECT_FALSE(m->IsTerminated());
  m->FillNextTokenBitmask(mask);
  EXPECT_EQ(Bits(mask), (std::vector<int32_t>{1, eos}));
}

TEST(Matcher, RollbackRestoresEveryEarlierMask) {
  auto vocab = MakeVocab(SmallTokens());
  auto g = CompileGbnf(kJsonLikeGbnf, vocab);
  ASSERT_NE(g, nullptr);
  auto m = g->NewMatcher();
  std::mt19937 rng(7);
  std::vector<std::vector<uint32_t>> masks;
  std::vector<uint32_t> mask(vocab->mask_words());
  for (int i = 0; i < 30; ++i) {
    m->FillNextTokenBitmask(mask);
    masks.push_back(mask);
    std::vector<int32_t> allowed;
    for (int32_t t : Bits(mask)) {
      if (!vocab->IsEos(t)) allowed.push_back(t);
    }
    if (allowed.empty()) break;
    ASSERT_TRUE(m->AcceptToken(allowed[rng() % allowed.size()]));
  }
  const int n = static_cast<int>(masks.size()) - 1;
  // Roll back in uneven chunks, checking the mask at each point.
  int at = n;
  for (int chunk : {1, 3, 2, 5}) {
    if (chunk > at) break;
    m->Rollback(chunk);
    at -= chunk;
    m->FillNextTokenBitmask(mask);
    EXPECT_EQ(mask, masks[at]) << "after rolling back to step " << at;
  }
  m->Rollback(at);
  m->FillNextTokenBitmask(mask);
  EXPECT_EQ(mask, masks[0]);
  m->Rollback(0);
}

TEST(Matcher, RejectedTokenLeavesStateUnchanged) {
  auto vocab = MakeVocab(SmallTokens());
  auto g = CompileGbnf(kJsonLikeGbnf, vocab);
  ASSERT_NE(g, nullptr);
  auto m = g->NewMatcher();
  std::vector<uint32_t> before(vocab->mask_words()), after(vocab->mask_words());
  ASSERT_TRUE(m->AcceptToken('{'));
  m->FillNextTokenBitmask(before);
  EXPECT_FALSE(m->AcceptToken('}' + 0 == '}' ? ']' : ']'));
  EXPECT_FALSE(m->AcceptToken(static_cast<int32_t>(SmallTokens().size()) - 1));  // "x\\"
  m->FillNextTokenBitmask(after);
  EXPECT_EQ(before, after);
}

// Matchers of one grammar on several threads share its class and mask caches; each thread's
// masks must equal what a fresh single-threaded run computes.
TEST(Matcher, ConcurrentMatchersShareOneGrammar) {
  auto vocab = MakeVocab(SmallTokens());
  auto g = CompileGbnf(kJsonLikeGbnf, vocab);
  ASSERT_NE(g, nullptr);
  auto walk = [&](uint32_t seed, std::vector<std::vector<uint32_t>>* masks) {
    std::mt19937 rng(seed);
    auto m = g->NewMatcher();
    std::vector<uint32_t> mask(vocab->mask_words());
    for (int i = 0; i < 60; ++i) {
      m->FillNextTokenBitmask(mask);
      masks->push_back(mask);
      std::vector<int32_t> allowed;
      for (int32_t t : Bits(mask)) {
        if (!vocab->IsEos(t)) allowed.push_back(t);
      }
      if (allowed.empty() || !m->AcceptToken(allowed[rng() % allowed.size()])) return;
    }
  };
  std::vector<std::vector<std::vector<uint32_t>>> got(4);
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < 4; ++t) threads.emplace_back(walk, t % 2 + 1, &got[t]);
  for (auto& t : threads) t.join();
  for (uint32_t t = 0; t < 4; ++t) {
    auto fresh = CompileGbnf(kJsonLikeGbnf, vocab);
    ASSERT_NE(fresh, nullptr);
    std::vector<std::vector<uint32_t>> ref;
    std::swap(g, fresh);
    walk(t % 2 + 1, &ref);
    std::swap(g, fresh);
    EXPECT_EQ(got[t], ref) << "thread " << t;
  }
}

class RealTokenizer : public ::testing::TestWithParam<std::string> {};

// One test per tokenizer (loading one costs more than the checks).
TEST_P(RealTokenizer, MasksEqualBruteForceAndNeverAllowSpecialTokens) {
  auto vocab = testing::TestdataVocab(GetParam());
  if (vocab == nullptr) GTEST_SKIP() << "testdata tokenizers not found";
  auto g = CompileGbnf(kJsonLikeGbnf, vocab);
  ASSERT_NE(g, nullptr);
  // Brute force costs a full-vocabulary AcceptToken sweep per step: a few steps with it, a
  // longer walk checking only that every masked token is accepted.
  EXPECT_EQ(WalkAndCompare(*g, *vocab, 4, 11), 4);
  EXPECT_EQ(WalkAndCompare(*g, *vocab, 12, 12, /*brute_force=*/false), 12);
  // A counted string: classes shared while far from the bound, exact near it.
  auto counted = CompileGbnf(R"(root ::= ("\"" [^"\\\x00-\x1F]{0,40} "\"" ", ")+)", vocab);
  ASSERT_NE(counted, nullptr);
  EXPECT_EQ(WalkAndCompare(*counted, *vocab, 6, 13), 6);
  // Many heads at once (an unanchored alternation).
  auto heads = CompileGbnf(
      R"(root ::= [a-zA-Z_]* ("QTABLE_INT_TYPE" | "QTABLE_DOUBLE_TYPE" | "QTABLE_INT64_TYPE" |
                  "QTABLE_TIME_TYPE" | "QTABLE_DATE_TYPE" | "QTABLE_STRING_TYPE") [a-zA-Z_]*)",
      vocab);
  ASSERT_NE(heads, nullptr);
  EXPECT_EQ(WalkAndCompare(*heads, *vocab, 4, 14), 4);

  auto any = CompileGbnf("root ::= [^\\x00]*", vocab);
  ASSERT_NE(any, nullptr);
  auto m = any->NewMatcher();
  std::vector<uint32_t> mask(vocab->mask_words());
  m->FillNextTokenBitmask(mask);
  int allowed = 0;
  for (int32_t t = 0; t < vocab->size(); ++t) {
    const bool bit = (mask[t >> 5] >> (t & 31)) & 1u;
    if (vocab->IsEos(t)) {
      EXPECT_TRUE(bit) << "EOS " << t << " (the grammar may end at once)";
    } else if (vocab->bytes(t).empty()) {
      EXPECT_FALSE(bit) << "token without bytes " << t;
    } else {
      allowed += bit;
    }
  }
  EXPECT_GT(allowed, vocab->size() / 2);
}

INSTANTIATE_TEST_SUITE_P(Testdata, RealTokenizer, ::testing::Values("qwen3", "llama2"));

}  // namespace
}  // namespace tachyon::grammar
