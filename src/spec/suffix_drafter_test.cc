#include "spec/suffix_drafter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace tachyon::spec {
namespace {

using Seq = std::vector<int32_t>;

// The draft rule of suffix_drafter.h over one sequence, by brute force: for each match length
// m, the greedy continuation of the last m tokens found by scanning the sequence; the best
// score wins, ties to the longer match.
Seq BruteDraft(const Seq& seq, const SuffixConfig& c, int max_tokens) {
  Seq best;
  double best_score = 0;
  for (int m = 1; m <= std::min<int>(c.max_tree_depth - 1, static_cast<int>(seq.size())); ++m) {
    const int limit = std::min(max_tokens, static_cast<int>(c.max_spec_factor * m + 1e-9));
    Seq context(seq.end() - m, seq.end()), draft;
    double score = 0, prob = 1;
    while (static_cast<int>(draft.size()) < limit &&
           static_cast<int>(context.size()) < c.max_tree_depth) {
      std::vector<int> count(16, 0);
      std::vector<size_t> latest(16, 0);
      int followed = 0;
      for (size_t i = 0; i + context.size() < seq.size(); ++i) {
        if (!std::equal(context.begin(), context.end(), seq.begin() + i)) continue;
        const size_t end = i + context.size();
        ++count[seq[end]];
        latest[seq[end]] = end;
        ++followed;
      }
      if (followed == 0) break;
      int32_t t = 0;
      for (int32_t x = 1; x < 16; ++x) {
        if (count[x] > count[t] || (count[x] == count[t] && latest[x] > latest[t])) t = x;
      }
      const double p = prob * count[t] / followed;
      if (p < c.min_token_prob) break;
      draft.push_back(t);
      context.push_back(t);
      score += p;
      prob = p;
    }
    if (!draft.empty() && score >= best_score) {
      best_score = score;
      best = draft;
    }
  }
  return best;
}

TEST(SuffixDrafterTest, OwnTreeDraftEqualsBruteForce) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 60; ++trial) {
    SuffixConfig c;
    c.max_tree_depth = 3 + trial % 8;
    c.max_spec_factor = trial % 3 == 0 ? 0.5 : trial % 3 == 1 ? 1.0 : 2.5;
    c.min_token_prob = trial % 4 == 0 ? 0.0 : 0.3;
    c.max_cached_requests = 0;
    SuffixDrafter d(c);
    Seq seq;
    const int vocab = 2 + trial % 5;
    for (int step = 0; step < 30; ++step) {
      for (int i = 0; i < 1 + trial % 3; ++i) seq.push_back(static_cast<int32_t>(rng() % vocab));
      Seq draft;
      d.Propose(7, seq, 4, 6, &draft);
      ASSERT_EQ(draft, BruteDraft(seq, c, 6)) << "trial " << trial << " step " << step;
    }
  }
}

TEST(SuffixDrafterTest, CopiesASpanOfThePromptAsLongAsTheMatchEarns) {
  SuffixConfig c;
  SuffixDrafter d(c);
  // The prompt holds 10..29; the output has started copying it: 10 11 12 13.
  Seq seq;
  for (int32_t t = 10; t < 30; ++t) seq.push_back(t);
  seq.push_back(1);
  for (int32_t t = 10; t < 14; ++t) seq.push_back(t);
  Seq draft;
  d.Propose(1, seq, 21, 16, &draft);
  // Match "10 11 12 13" (m = 4, factor 1): 4 tokens; the longest match with a continuation.
  EXPECT_EQ(draft, (Seq{14, 15, 16, 17}));
  draft.clear();
  d.Propose(1, seq, 21, 2, &draft);  // the caller's cap
  EXPECT_EQ(draft, (Seq{14, 15}));
  // A token never seen: nothing to draft.
  seq.push_back(99);
  draft.clear();
  d.Propose(1, seq, 21, 16, &draft);
  EXPECT_TRUE(draft.empty());
}

TEST(SuffixDrafterTest, GlobalTreeDraftsWhatEarlierOutputsSaid) {
  SuffixConfig c;
  SuffixDrafter d(c);
  const Seq prompt_a = {1, 2, 3}, output_a = {40, 41, 42, 43, 44, 45, 46, 47};
  Seq a = prompt_a;
  a.insert(a.end(), output_a.begin(), output_a.end());
  d.Release(100, a, 3);  // finished without ever drafting: its output still counts
  EXPECT_EQ(d.num_cached_outputs(), 1u);
  EXPECT_EQ(d.global_tree().count(d.global_tree().Find(Seq{40, 41})), 1);
  EXPECT_EQ(d.global_tree().Find(Seq{1, 2}), SuffixTree::kNone);  // prompts stay out
  // Another request whose own tokens never show what follows 40 41 42.
  Seq b = {5, 6, 40, 41, 42};
  Seq draft;
  d.Propose(200, b, 2, 8, &draft);
  EXPECT_EQ(draft, (Seq{43, 44, 45}));  // m = 3 from the global tree
  d.Release(200, b, 2);
  EXPECT_EQ(d.num_sequences(), 0u);
}

TEST(SuffixDrafterTest, GlobalTreeKeepsOnlyTheNewestOutputs) {
  SuffixConfig c;
  c.max_cached_requests = 3;
  c.max_tree_depth = 4;
  SuffixDrafter d(c);
  for (int32_t r = 0; r < 10; ++r) {
    const Seq seq = {0, 100 + r, 101 + r, 102 + r};  // prompt 0, output 3 tokens
    d.Release(r, seq, 1);
    EXPECT_LE(d.num_cached_outputs(), 3u);
  }
  // Outputs 7, 8, 9 remain: 107 108 109, 108 109 110, 109 110 111.
  const SuffixTree& g = d.global_tree();
  EXPECT_EQ(g.count(g.Find(Seq{109})), 3);
  EXPECT_EQ(g.count(g.Find(Seq{108, 109})), 2);
  EXPECT_EQ(g.Find(Seq{106}), SuffixTree::kNone);
  // Distinct strings of the three outputs: 5 unigrams, 4 bigrams, 3 trigrams.
  EXPECT_EQ(g.num_nodes(), 12);

  SuffixConfig none = c;
  none.max_cached_requests = 0;
  SuffixDrafter off(none);
  off.Release(1, Seq{0, 5, 6}, 1);
  EXPECT_EQ(off.global_tree().num_nodes(), 0);
}

TEST(SuffixDrafterTest, MakeDrafterBuildsIt) {
  SpeculativeConfig c;
  c.method = SpecMethod::kSuffix;
  c.num_speculative_tokens = 4;
  auto d = MakeDrafter(c);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_NE(dynamic_cast<SuffixDrafter*>(d->get()), nullptr);
}

}  // namespace
}  // namespace tachyon::spec
