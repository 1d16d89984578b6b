#include "spec/ngram_drafter.h"

#include <gtest/gtest.h>

namespace tachyon::spec {
namespace {

std::vector<int32_t> Lookup(const std::vector<int32_t>& t, int min_n, int max_n, int k) {
  std::vector<int32_t> d;
  NgramLookup(t, min_n, max_n, k, &d);
  return d;
}

TEST(NgramDrafterTest, ProposesWhatFollowedTheLastNTokens) {
  // ... 1 2 3 [4 5 6 7] ... 1 2 3 -> 4 5 6
  const std::vector<int32_t> t = {9, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3};
  EXPECT_EQ(Lookup(t, 1, 3, 3), (std::vector<int32_t>{4, 5, 6}));
  // Past the end of the sequence the copy continues over the draft: 4 5 6 7 8 1 2 3, 4 5.
  EXPECT_EQ(Lookup(t, 1, 3, 10), (std::vector<int32_t>{4, 5, 6, 7, 8, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(Lookup(t, 1, 3, 0).empty());
}

TEST(NgramDrafterTest, LongestNgramWinsThenLatestOccurrence) {
  // Suffix "5 6": the 2-gram occurs once (followed by 7); "6" alone occurs later (then 1).
  const std::vector<int32_t> t = {5, 6, 7, 6, 1, 0, 5, 6};
  EXPECT_EQ(Lookup(t, 1, 2, 1), (std::vector<int32_t>{7}));
  EXPECT_EQ(Lookup(t, 1, 1, 1), (std::vector<int32_t>{1}));  // latest "6" (index 3)
  // Only 3-grams and longer: no match.
  EXPECT_TRUE(Lookup(t, 3, 4, 2).empty());
}

TEST(NgramDrafterTest, NoMatchShortOrOverlapping) {
  EXPECT_TRUE(Lookup({}, 1, 3, 4).empty());
  EXPECT_TRUE(Lookup({4}, 1, 3, 4).empty());
  EXPECT_TRUE(Lookup({1, 2, 3, 4}, 1, 3, 4).empty());
  // A run: the suffix "7 7" also occurs one token earlier, and the run goes on.
  EXPECT_EQ(Lookup({7, 7, 7}, 2, 2, 4), (std::vector<int32_t>{7, 7, 7, 7}));
  // Period 2: "1 2 1 2" -> 1 2 1.
  EXPECT_EQ(Lookup({1, 2, 1, 2}, 1, 2, 3), (std::vector<int32_t>{1, 2, 1}));
}

TEST(NgramDrafterTest, DrafterFromConfig) {
  SpeculativeConfig c;
  c.method = SpecMethod::kNgram;
  c.num_speculative_tokens = 2;
  c.prompt_lookup_min = 1;
  c.prompt_lookup_max = 2;
  auto d = MakeDrafter(c);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  std::vector<int32_t> draft;
  const std::vector<int32_t> t = {3, 4, 5, 3, 4};
  (*d)->Propose(0, t, 3, 2, &draft);
  EXPECT_EQ(draft, (std::vector<int32_t>{5, 3}));
  c.method = SpecMethod::kDraftModel;
  c.model = "draft.gguf";
  EXPECT_FALSE(MakeDrafter(c).ok());
}

}  // namespace
}  // namespace tachyon::spec
