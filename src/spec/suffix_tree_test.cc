// SuffixTree against a brute-force reference: counts of every string, the node set, and the
// greedy continuation, over random sequences on small vocabularies (many repeats).
#include "spec/suffix_tree.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

namespace tachyon::spec {
namespace {

using Seq = std::vector<int32_t>;

Seq Random(std::mt19937& rng, int len, int vocab) {
  Seq s(static_cast<size_t>(len));
  for (int32_t& t : s) t = static_cast<int32_t>(rng() % static_cast<unsigned>(vocab));
  return s;
}

// Occurrences of every string of length 1..depth in the sequences.
std::map<Seq, int> BruteCounts(const std::vector<Seq>& seqs, int depth) {
  std::map<Seq, int> counts;
  for (const Seq& s : seqs) {
    for (size_t i = 0; i < s.size(); ++i) {
      for (size_t n = 1; n <= static_cast<size_t>(depth) && i + n <= s.size(); ++n) {
        ++counts[Seq(s.begin() + i, s.begin() + i + n)];
      }
    }
  }
  return counts;
}

void ExpectSameCounts(const SuffixTree& tree, const std::vector<Seq>& seqs, int vocab) {
  const int depth = tree.max_depth();
  const std::map<Seq, int> want = BruteCounts(seqs, depth);
  EXPECT_EQ(tree.num_nodes(), static_cast<int64_t>(want.size()));
  for (const auto& [str, n] : want) {
    const int32_t node = tree.Find(str);
    ASSERT_NE(node, SuffixTree::kNone);
    EXPECT_EQ(tree.count(node), n);
    EXPECT_EQ(tree.depth(node), static_cast<int>(str.size()));
    // One token more: absent unless the reference has it.
    for (int32_t t = 0; t < vocab && str.size() < static_cast<size_t>(depth); ++t) {
      Seq longer = str;
      longer.push_back(t);
      EXPECT_EQ(tree.Find(longer) != SuffixTree::kNone, want.count(longer) > 0);
    }
  }
  EXPECT_EQ(tree.Find({}), SuffixTree::kRoot);
}

// The greedy continuation of `context` in one Append-built sequence, by scanning it: the next
// token seen most often after context (ties: whose occurrence ends latest), probability
// count / (occurrences followed by a token), multiplied along the way.
double BruteContinue(const Seq& seq, Seq context, int depth, int max_tokens, double min_prob,
                     Seq* out) {
  double score = 0, prob = 1;
  for (int n = 0; n < max_tokens && static_cast<int>(context.size()) < depth; ++n) {
    std::map<int32_t, std::pair<int, size_t>> next;  // token -> (count, latest end)
    int followed = 0;
    for (size_t i = 0; i + context.size() < seq.size(); ++i) {
      if (!std::equal(context.begin(), context.end(), seq.begin() + i)) continue;
      const size_t end = i + context.size();
      auto& [c, latest] = next[seq[end]];
      ++c;
      latest = std::max(latest, end);
      ++followed;
    }
    if (followed == 0) break;
    int32_t best = -1;
    for (const auto& [t, cl] : next) {
      if (best < 0 || cl.first > next[best].first ||
          (cl.first == next[best].first && cl.second > next[best].second)) {
        best = t;
      }
    }
    const double p = prob * next[best].first / followed;
    if (p < min_prob) break;
    out->push_back(best);
    score += p;
    prob = p;
    context.push_back(best);
  }
  return score;
}

TEST(SuffixTreeTest, AppendCountsEveryStringUpToTheDepth) {
  std::mt19937 rng(1);
  for (int vocab : {2, 3, 5}) {
    for (int depth : {1, 3, 6}) {
      SuffixTree tree(depth);
      Seq seq;
      for (int step = 0; step < 4; ++step) {
        for (int32_t t : Random(rng, 40, vocab)) {
          tree.Append(t);
          seq.push_back(t);
        }
        ExpectSameCounts(tree, {seq}, vocab);
      }
    }
  }
}

TEST(SuffixTreeTest, InsertAndRemoveKeepExactlyTheRemainingSequences) {
  std::mt19937 rng(2);
  const int depth = 5, vocab = 3;
  SuffixTree tree(depth);
  std::vector<Seq> in;
  for (int round = 0; round < 30; ++round) {
    if (in.size() < 4 || rng() % 3 != 0) {
      in.push_back(Random(rng, 1 + static_cast<int>(rng() % 30), vocab));
      tree.Insert(in.back());
    } else {
      const size_t victim = rng() % in.size();
      tree.Remove(in[victim]);
      in.erase(in.begin() + static_cast<std::ptrdiff_t>(victim));
    }
    ExpectSameCounts(tree, in, vocab);
  }
  for (const Seq& s : in) tree.Remove(s);
  EXPECT_EQ(tree.num_nodes(), 0);  // every node freed
  tree.Insert(Seq{1, 2, 1, 2});    // freed nodes are reused correctly
  ExpectSameCounts(tree, {{1, 2, 1, 2}}, vocab);
}

TEST(SuffixTreeTest, ContinueMatchesTheBruteForceGreedyPath) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 40; ++trial) {
    const int vocab = 2 + trial % 4, depth = 3 + trial % 6;
    const Seq seq = Random(rng, 60 + trial * 3, vocab);
    SuffixTree tree(depth);
    for (int32_t t : seq) tree.Append(t);
    for (int m = 0; m < depth; ++m) {
      const Seq context(seq.end() - m, seq.end());
      for (double min_prob : {0.0, 0.2, 0.5}) {
        Seq got, want;
        const double score = tree.Continue(tree.Find(context), 8, min_prob, &got);
        const double want_score = BruteContinue(seq, context, depth, 8, min_prob, &want);
        ASSERT_EQ(got, want) << "trial " << trial << " m " << m << " min_prob " << min_prob;
        EXPECT_NEAR(score, want_score, 1e-12);
      }
    }
  }
}

TEST(SuffixTreeTest, ContinueFollowsTheMostFrequentBranch) {
  // "a b c" three times, "a b d" once: after "a b" the draft is c with probability 3/4, and
  // after "a" it is b (4/4) then c (3/4).
  SuffixTree tree(4);
  for (int32_t t : {0, 1, 2, 9, 0, 1, 3, 9, 0, 1, 2, 9, 0, 1, 2, 9}) tree.Append(t);
  Seq out;
  EXPECT_NEAR(tree.Continue(tree.Find(Seq{0, 1}), 1, 0.1, &out), 0.75, 1e-12);
  EXPECT_EQ(out, (Seq{2}));
  out.clear();
  EXPECT_NEAR(tree.Continue(tree.Find(Seq{0}), 2, 0.1, &out), 1.0 + 0.75, 1e-12);
  EXPECT_EQ(out, (Seq{1, 2}));
  out.clear();
  EXPECT_EQ(tree.Continue(tree.Find(Seq{0, 1}), 3, 0.8, &out), 0.0);  // 0.75 < 0.8: nothing
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(tree.Find(Seq{0, 1, 2, 9, 0}), SuffixTree::kNone);  // deeper than 4
}

}  // namespace
}  // namespace tachyon::spec
