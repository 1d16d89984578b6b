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

// Printable ASCII bytes (all bytes with all_bytes: then every byte set is reachable and
// Growth is finite) and some multi-byte tokens.
std::shared_ptr<const Vocabulary> MixedVocab(bool all_bytes = false) {
  std::vector<std::string> toks;
  for (int b = all_bytes ? 0 : 32; b < (all_bytes ? 256 : 127); ++b) {
    toks.push_back(std::string(1, static_cast<char>(b)));
  }
  for (const char* t : {"{\"",   "\":",     "\",",  "\"}", "[{",      "}]",   "},{",
                        "true",  "null",    "12",   "345", "\"a\":[", "aaaa", "bcd",
                        ", ",    "\": {\"", "1.5e", "]}",  "{}",      "[[[[", "\"a\":[[[{\"b\":[[",
                        "\u00e9"}) {
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
  const int64_t d0 = g->MinTokenLimit();
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

// Every limited mask is exactly the unlimited one's tokens after which the distance is at most
// the budget left less one (EOS as unlimited), whether the walk was skipped, partial (only the
// tokens too long for Growth to clear) or whole.
TEST(LengthLimit, LimitedMasksKeepExactlyTheTokensThatStillFit) {
  for (bool all_bytes : {false, true}) {
    auto vocab = MixedVocab(all_bytes);
    auto g = CompileGbnf(kJsonLikeGbnf, vocab);
    ASSERT_NE(g, nullptr);
    const auto& impl = static_cast<const GrammarImpl&>(*g);
    LengthTables lengths(impl.grammar(), impl.vocab());
    ASSERT_EQ(lengths.Growth() < kUnreachable, all_bytes);
    std::mt19937 rng(13);
    std::vector<uint32_t> mask(vocab->mask_words()), full(vocab->mask_words());
    for (int walk = 0; walk < 80; ++walk) {
      const int64_t limit = 2 + static_cast<int64_t>(rng() % 60);
      auto m = g->NewMatcher();
      auto free = g->NewMatcher();
      m->SetTokenLimit(limit);
      StackArena arena;
      Recognizer rec(impl.grammar(), &arena);
      Config cfg, after, tmp;
      rec.Start(&cfg);
      for (int64_t n = 0; n < limit && !m->IsTerminated(); ++n) {
        m->FillNextTokenBitmask(mask);
        free->FillNextTokenBitmask(full);
        const int64_t room = limit - n - 1;
        ASSERT_LE(lengths.Distance(cfg, arena), room + 1);
        for (int32_t t = 0; t < vocab->size(); ++t) {
          const bool in_full = ((full[t >> 5] >> (t & 31)) & 1u) != 0;
          bool expect = in_full;
          if (in_full && !vocab->IsEos(t)) {
            ASSERT_TRUE(rec.AdvanceAll(cfg, vocab->bytes(t), &after, &tmp));
            expect = lengths.Distance(after, arena) <= room;
          }
          ASSERT_EQ(((mask[t >> 5] >> (t & 31)) & 1u) != 0, expect)
              << "walk " << walk << " step " << n << " token '" << vocab->bytes(t) << "'";
        }
        const auto allowed = AllowedNonEos(mask, *vocab);
        ASSERT_FALSE(allowed.empty());
        const int32_t t = allowed[rng() % allowed.size()];
        ASSERT_TRUE(m->AcceptToken(t));
        ASSERT_TRUE(free->AcceptToken(t));
        ASSERT_TRUE(rec.AdvanceAll(cfg, vocab->bytes(t), &after, &tmp));
        cfg = after;
      }
    }
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

// Distances: counted repetitions count their missing iterations; a run of byte sets that one
// token spells costs one token; a byte that neither a single-byte token nor such a run spells
// makes a path unreachable.
TEST(LengthLimit, DistanceCountsRepetitionsRunsAndSingleByteTokens) {
  auto g = CompileGbnf("root ::= \"x\" [0-9]{12,20} \"y\"");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->MinTokenLimit(), 14);
  auto vocab = MakeVocab({"a", "bc", "abc", "aab"});
  // "abc" is one token; "a" + "abc" two; "aab" (a byte set's b) + "bc" two.
  EXPECT_EQ(CompileGbnf("root ::= \"a\" \"bc\" | \"aaaa\"", vocab)->MinTokenLimit(), 1);
  EXPECT_EQ(CompileGbnf("root ::= \"aaaa\" | \"aabc\"", vocab)->MinTokenLimit(), 2);
  EXPECT_EQ(CompileGbnf("root ::= \"aa\" [b-c] \"bc\"", vocab)->MinTokenLimit(), 2);
  EXPECT_EQ(CompileGbnf("root ::= \"bc\"", vocab)->MinTokenLimit(), 1);
  EXPECT_EQ(CompileGbnf("root ::= \"b\" | \"cb\"", vocab)->MinTokenLimit(),
            CompiledGrammar::kNoTokenLimit);
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

// Growth bounds what one byte adds to any head's cost, recursion or not: along random byte
// walks MostHead never rises by more than Growth per byte (so a token of n bytes leaves no head
// costlier than MostHead + n * Growth), and the grammar's distances stay within MostHead.
TEST(LengthLimit, GrowthBoundsWhatEachByteAddsToEveryHead) {
  for (const char* text : {kJsonLikeGbnf, R"(root ::= "[" root? "]")",
                           R"(root ::= "{" ("\"a\":" [0-9]{2,4} ",")? "\"b\":" v "}"
v ::= "[" (v ("," v)*)? "]" | "tru" "e" | [0-9]+ | "\"" [a-z]* "\"")"}) {
    auto g = CompileGbnf(text);
    ASSERT_NE(g, nullptr) << text;
    const auto& impl = static_cast<const GrammarImpl&>(*g);
    LengthTables lengths(impl.grammar(), impl.vocab());
    const int64_t growth = lengths.Growth();
    ASSERT_GE(growth, 0);
    ASSERT_LT(growth, 16) << text;
    std::mt19937 rng(11);
    for (int walk = 0; walk < 100; ++walk) {
      StackArena arena;
      Recognizer rec(impl.grammar(), &arena);
      Config cfg, next;
      rec.Start(&cfg);
      for (int step = 0; step < 60 && !cfg.heads.empty(); ++step) {
        const int64_t most = lengths.MostHead(cfg, arena);
        EXPECT_LE(lengths.Distance(cfg, arena), most);
        std::vector<uint8_t> ok;
        for (int b = 0; b < 256; ++b) {
          rec.Advance(cfg, static_cast<uint8_t>(b), &next);
          if (next.heads.empty()) continue;
          ok.push_back(static_cast<uint8_t>(b));
          EXPECT_LE(lengths.MostHead(next, arena), most + growth) << text << " byte " << b;
        }
        if (ok.empty()) break;
        rec.Advance(cfg, ok[rng() % ok.size()], &next);
        cfg = next;
      }
    }
  }
}

}  // namespace
}  // namespace tachyon::grammar
