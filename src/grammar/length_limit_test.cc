// Length-aware masks (TokenMatcher::SetTokenLimit): walks end within their limit, a limit the
// output fits leaves every mask as it was, rollback is exact, and the tight end game.
#include "grammar/length_limit.h"

#include <gtest/gtest.h>

#include <random>

#include "grammar/compiled.h"
#include "grammar/testing/grammar_testing.h"

namespace tachyon::grammar {
namespace {

using testing::CompileGbnf;
using testing::kJsonLikeGbnf;
using testing::MakeVocab;

std::vector<int32_t> AllowedNonEos(const std::vector<uint32_t>& mask, const Vocabulary& vocab) {
  std::vector<int32_t> out;
  for (size_t w = 0; w < mask.size(); ++w) {
    for (uint32_t bits = mask[w]; bits; bits &= bits - 1) {
      const auto t = static_cast<int32_t>(w * 32 + __builtin_ctz(bits));
      if (!vocab.IsEos(t)) out.push_back(t);
    }
  }
  return out;
}

int64_t StartDistanceOf(const CompiledGrammar& g) {
  const auto& impl = static_cast<const GrammarImpl&>(g);
  StackArena arena;
  Recognizer rec(impl.grammar(), &arena);
  Config start;
  rec.Start(&start);
  return LengthTables(impl.grammar(), impl.vocab()).Distance(start, arena);
}

std::shared_ptr<const Vocabulary> MixedVocab() {
  std::vector<std::string> toks;
  for (int b = 32; b < 127; ++b) toks.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t : {"{\"", "\":", "\",", "\"}", "[{", "}]", "},{", "true", "null", "12", "345",
                        "\"a\":[", "aaaa", "bcd", ", ", "\": {\"", "1.5e", "]}", "{}"}) {
    toks.push_back(t);
  }
  return MakeVocab(toks);
}

// Uniform walks under random limits of at least the start distance end where the grammar may
// end, within the limit; every limited mask is a subset of the unlimited one.
TEST(LengthLimit, RandomWalksEndWithinTheirLimit) {
  auto vocab = MixedVocab();
  auto g = CompileGbnf(kJsonLikeGbnf, vocab);
  ASSERT_NE(g, nullptr);
  const int64_t d0 = StartDistanceOf(*g);
  EXPECT_EQ(d0, 2);  // "{}"
  std::mt19937 rng(7);
  std::vector<uint32_t> mask(vocab->mask_words()), full(vocab->mask_words());
  for (int walk = 0; walk < 200; ++walk) {
    const int64_t limit = d0 + static_cast<int64_t>(rng() % 40);
    auto m = g->NewMatcher();
    auto free = g->NewMatcher();
    m->SetTokenLimit(limit);
    int64_t n = 0;
    for (; n < limit && !m->IsTerminated(); ++n) {
      m->FillNextTokenBitmask(mask);
      free->FillNextTokenBitmask(full);
      for (size_t w = 0; w < mask.size(); ++w) ASSERT_EQ(mask[w] & ~full[w], 0u);
      const auto allowed = AllowedNonEos(mask, *vocab);
      ASSERT_FALSE(allowed.empty()) << "walk " << walk << " step " << n;
      const int32_t t = allowed[rng() % allowed.size()];
      ASSERT_TRUE(m->AcceptToken(t));
      ASSERT_TRUE(free->AcceptToken(t));
    }
    EXPECT_TRUE(m->CanTerminate()) << "walk " << walk << " limit " << limit;
  }
}

// A limit the output never comes near gives the unlimited masks.
TEST(LengthLimit, LargeLimitLeavesMasksUnchanged) {
  auto vocab = MixedVocab();
  auto g = CompileGbnf(kJsonLikeGbnf, vocab);
  ASSERT_NE(g, nullptr);
  std::mt19937 rng(11);
  std::vector<uint32_t> mask(vocab->mask_words()), full(vocab->mask_words());
  for (int walk = 0; walk < 20; ++walk) {
    auto m = g->NewMatcher();
    auto free = g->NewMatcher();
    m->SetTokenLimit(100000);
    for (int step = 0; step < 60 && !m->IsTerminated(); ++step) {
      m->FillNextTokenBitmask(mask);
      free->FillNextTokenBitmask(full);
      ASSERT_EQ(mask, full) << "walk " << walk << " step " << step;
      const auto allowed = AllowedNonEos(mask, *vocab);
      if (allowed.empty()) break;
      const int32_t t = allowed[rng() % allowed.size()];
      ASSERT_TRUE(m->AcceptToken(t));
      ASSERT_TRUE(free->AcceptToken(t));
    }
  }
}

// After Rollback(k) the masks are those of a matcher that never took the rolled-back tokens
// (the budget they used is given back).
TEST(LengthLimit, RollbackIsExact) {
  auto vocab = MixedVocab();
  auto g = CompileGbnf(kJsonLikeGbnf, vocab);
  ASSERT_NE(g, nullptr);
  std::mt19937 rng(5);
  std::vector<uint32_t> mask(vocab->mask_words()), ref(vocab->mask_words());
  for (int walk = 0; walk < 50; ++walk) {
    const int64_t limit = 3 + static_cast<int64_t>(rng() % 20);
    auto m = g->NewMatcher();
    m->SetTokenLimit(limit);
    std::vector<int32_t> taken;
    std::vector<std::vector<uint32_t>> masks;
    while (static_cast<int64_t>(taken.size()) < limit && !m->IsTerminated()) {
      m->FillNextTokenBitmask(mask);
      masks.push_back(mask);
      const auto allowed = AllowedNonEos(mask, *vocab);
      ASSERT_FALSE(allowed.empty());
      taken.push_back(allowed[rng() % allowed.size()]);
      ASSERT_TRUE(m->AcceptToken(taken.back()));
    }
    const int back = static_cast<int>(rng() % (taken.size() + 1));
    m->Rollback(back);
    const size_t kept = taken.size() - back;
    if (kept < masks.size()) {
      m->FillNextTokenBitmask(mask);
      EXPECT_EQ(mask, masks[kept]) << "walk " << walk << " back " << back;
    }
    auto fresh = g->NewMatcher();
    fresh->SetTokenLimit(limit);
    for (size_t i = 0; i < kept; ++i) ASSERT_TRUE(fresh->AcceptToken(taken[i]));
    fresh->FillNextTokenBitmask(ref);
    m->FillNextTokenBitmask(mask);
    EXPECT_EQ(mask, ref) << "walk " << walk;
  }
}

// The end game on single bytes: "a"+ "b" with 3 tokens allows "a", then "a" or "b", then
// only "b".
TEST(LengthLimit, TightLimitLeavesOnlyTokensThatStillFit) {
  auto g = CompileGbnf("root ::= \"a\"+ \"b\"");
  ASSERT_NE(g, nullptr);
  auto m = g->NewMatcher();
  m->SetTokenLimit(3);
  std::vector<uint32_t> mask(testing::ByteVocab()->mask_words());
  auto has = [&](int t) { return ((mask[t >> 5] >> (t & 31)) & 1u) != 0; };
  m->FillNextTokenBitmask(mask);
  EXPECT_TRUE(has('a'));
  EXPECT_FALSE(has('b'));
  ASSERT_TRUE(m->AcceptToken('a'));
  m->FillNextTokenBitmask(mask);
  EXPECT_TRUE(has('a'));
  EXPECT_TRUE(has('b'));
  ASSERT_TRUE(m->AcceptToken('a'));
  m->FillNextTokenBitmask(mask);
  EXPECT_FALSE(has('a'));
  EXPECT_TRUE(has('b'));
  m->SetTokenLimit(-1);  // no limit again
  m->FillNextTokenBitmask(mask);
  EXPECT_TRUE(has('a'));
}

// Distances: counted repetitions count their missing iterations; a byte no single-byte token
// spells makes a path unreachable.
TEST(LengthLimit, DistanceCountsRepetitionsAndSingleByteTokens) {
  auto g = CompileGbnf("root ::= \"x\" [0-9]{12,20} \"y\"");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(StartDistanceOf(*g), 14);
  auto vocab = MakeVocab({"a", "bc"});
  auto g2 = CompileGbnf("root ::= \"a\" \"bc\" | \"aaaa\"", vocab);
  ASSERT_NE(g2, nullptr);
  EXPECT_EQ(StartDistanceOf(*g2), 4);
}

// The ceiling bounds every distance a walk meets (finite without nesting recursion) and is
// unbounded for a recursion that nests deeper.
TEST(LengthLimit, CeilingBoundsEveryReachableDistance) {
  auto flat = CompileGbnf(R"(
root ::= "{" ("\"a\":" [0-9]+ ",")? "\"b\":[" item ("," item)* "]}"
item ::= "{\"x\":" [0-9]{3,5} "}"
)");
  ASSERT_NE(flat, nullptr);
  const auto& impl = static_cast<const GrammarImpl&>(*flat);
  LengthTables lengths(impl.grammar(), impl.vocab());
  std::mt19937 rng(3);
  std::vector<int32_t> scratch;
  for (int walk = 0; walk < 100; ++walk) {
    StackArena arena;
    Recognizer rec(impl.grammar(), &arena);
    Config cfg, next;
    rec.Start(&cfg);
    const int64_t ceiling = lengths.Ceiling(cfg, arena, &scratch);
    ASSERT_LT(ceiling, kUnreachable);
    for (int step = 0; step < 80 && !cfg.heads.empty(); ++step) {
      EXPECT_LE(lengths.Distance(cfg, arena), ceiling);
      EXPECT_LE(lengths.Ceiling(cfg, arena, &scratch), ceiling);
      std::vector<uint8_t> ok;
      for (int b = 0; b < 256; ++b) {
        rec.Advance(cfg, static_cast<uint8_t>(b), &next);
        if (!next.heads.empty() || next.accepting) ok.push_back(static_cast<uint8_t>(b));
      }
      if (ok.empty()) break;
      rec.Advance(cfg, ok[rng() % ok.size()], &next);
      cfg = next;
    }
  }
  auto nested = CompileGbnf(R"(root ::= "[" root? "]")");
  ASSERT_NE(nested, nullptr);
  const auto& nimpl = static_cast<const GrammarImpl&>(*nested);
  StackArena arena;
  Recognizer rec(nimpl.grammar(), &arena);
  Config cfg;
  rec.Start(&cfg);
  EXPECT_EQ(LengthTables(nimpl.grammar(), nimpl.vocab()).Ceiling(cfg, arena, &scratch),
            kUnreachable);
}

}  // namespace
}  // namespace tachyon::grammar
