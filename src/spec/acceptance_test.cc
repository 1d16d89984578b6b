#include "spec/acceptance.h"

#include <gtest/gtest.h>

namespace tachyon::spec {
namespace {

TEST(SpecStatsTest, CountsPerPosition) {
  SpecStats s;
  s.Record(4, 2);
  s.Record(3, 3);
  s.Record(5, 0);
  s.Record(0, 0);  // no draft: not counted
  EXPECT_EQ(s.num_drafts, 3);
  EXPECT_EQ(s.num_draft_tokens, 12);
  EXPECT_EQ(s.num_accepted_tokens, 5);
  EXPECT_EQ(s.accepted_per_position, (std::vector<int64_t>{2, 2, 1, 0, 0}));
}

TEST(DraftLengthControllerTest, LengthFollowsAcceptance) {
  DraftLengthController c(0.2);
  EXPECT_EQ(c.NextLength(8), 8);  // optimistic start, capped
  EXPECT_EQ(c.NextLength(0), 0);
  c.Record(8, 8);
  EXPECT_EQ(c.NextLength(8), 8);
  c.Record(8, 4);  // rate 0.7 * 1 + 0.3 * 0.5 = 0.85: run 5.67 -> 6
  EXPECT_NEAR(c.rate(), 0.85, 1e-12);
  EXPECT_EQ(c.NextLength(8), 6);
  c.Record(6, 0);
  c.Record(6, 0);  // rate 0.4165: run 0.71 -> 1
  EXPECT_EQ(c.NextLength(8), 1);
}

TEST(DraftLengthControllerTest, DraftsAcceptedWholeDoubleTheNextLength) {
  DraftLengthController c(0.2);
  c.Record(1, 0);  // two early misses: the rate says one token
  c.Record(1, 0);
  EXPECT_EQ(c.NextLength(16), 1);
  c.Record(1, 1);  // rate 0.3 (run 1), but the whole draft was kept: twice it
  EXPECT_EQ(c.NextLength(16), 2);
  c.Record(2, 2);
  EXPECT_EQ(c.NextLength(16), 4);
  c.Record(4, 4);
  EXPECT_EQ(c.NextLength(16), 8);
  EXPECT_EQ(c.NextLength(5), 5);  // capped
  c.Record(8, 8);
  EXPECT_EQ(c.NextLength(32), 16);
  c.Record(16, 3);  // a miss inside: the rate's run again (0.3, 0.51, 0.657, 0.7599, then 0.588)
  EXPECT_NEAR(c.rate(), 0.7 * 0.7599 + 0.3 * 3.0 / 16, 1e-12);
  EXPECT_EQ(c.NextLength(32), 2);
  c.Record(2, 0);  // nothing kept: no doubling
  EXPECT_EQ(c.NextLength(32), 1);
}

TEST(DraftLengthControllerTest, MissesTheDrafterDoubtedDoNotPause) {
  // Four one-token drafts the drafter itself doubted, three missed: alpha learns, the rate
  // (mechanism 1) does not, so no pause; the same drafts undoubted pause the request.
  DraftLengthController doubted(0.25), sure(0.25);
  for (int accepted : {0, 0, 1, 0}) {
    ASSERT_GT(doubted.NextLength(8), 0);
    ASSERT_GT(sure.NextLength(8), 0);
    doubted.Record(1, accepted, /*doubted=*/true);
    sure.Record(1, accepted);
  }
  EXPECT_TRUE(sure.paused());
  EXPECT_FALSE(doubted.paused());
  EXPECT_DOUBLE_EQ(doubted.alpha(), sure.alpha());
  EXPECT_DOUBLE_EQ(doubted.rate(), 1.0);  // nothing counted yet
  EXPECT_GT(doubted.NextLength(8), 1);
  // Counted drafts then decide as usual: the first sets the rate alone.
  doubted.Record(4, 0);
  EXPECT_DOUBLE_EQ(doubted.rate(), 0.0);
  EXPECT_EQ(doubted.NextLength(8), 1);
}

TEST(DraftLengthControllerTest, AlphaMovesByItsWeightFromOne) {
  DraftLengthController c(0.2);
  // Nothing verified yet: the first draft is priced at the prior.
  EXPECT_DOUBLE_EQ(c.alpha(), DraftLengthController::kFirstDraftAlpha);
  c.Record(8, 0);  // a first draft missed at once: the rate says so, alpha only leans
  EXPECT_DOUBLE_EQ(c.rate(), 0.0);
  EXPECT_DOUBLE_EQ(c.alpha(), 0.7);
  c.Record(1, 1);  // kept 1 of 1
  EXPECT_DOUBLE_EQ(c.alpha(), 0.79);
  c.Record(4, 2);  // 2 kept, the third missed: 2 of 3 tries
  EXPECT_DOUBLE_EQ(c.alpha(), 0.7 * 0.79 + 0.3 * 2.0 / 3.0);
}

TEST(DraftLengthControllerTest, PoorAcceptancePausesThenProbes) {
  DraftLengthController c(0.5);
  for (int i = 0; i < DraftLengthController::kWarmupDrafts; ++i) {
    ASSERT_GT(c.NextLength(4), 0);
    c.Record(4, 0);
  }
  EXPECT_TRUE(c.paused());
  for (int i = 0; i < 16; ++i) EXPECT_EQ(c.NextLength(4), 0);
  const int probe = c.NextLength(4);
  EXPECT_EQ(probe, 1);
  c.Record(1, 0);  // poor again: a longer pause
  for (int i = 0; i < 32; ++i) EXPECT_EQ(c.NextLength(4), 0);
  EXPECT_EQ(c.NextLength(4), 1);
  c.Record(1, 1);  // the probe alone sets the rate: drafting resumes at full length
  EXPECT_FALSE(c.paused());
  EXPECT_EQ(c.NextLength(4), 4);
}

TEST(DraftLengthControllerTest, PricedAlphaLeansOnThePriorOverTheFirstDrafts) {
  DraftLengthController c(0.2);
  EXPECT_DOUBLE_EQ(c.priced_alpha(), DraftLengthController::kFirstDraftAlpha);
  c.Record(1, 1);  // one lucky token: alpha says 1, the price (1 + 2 x 0.5) / 3
  EXPECT_DOUBLE_EQ(c.alpha(), 1.0);
  EXPECT_DOUBLE_EQ(c.priced_alpha(), 2.0 / 3.0);
  DraftLengthController miss(0.2);
  miss.Record(8, 0);  // one miss: alpha leans to 0.7, the price a third of the way there
  EXPECT_DOUBLE_EQ(miss.priced_alpha(), (0.7 + 2 * 0.5) / 3);
  for (int i = 1; i < DraftLengthController::kWarmupDrafts; ++i) c.Record(1, 1);
  EXPECT_DOUBLE_EQ(c.priced_alpha(), c.alpha());  // warmed up: alpha itself
}

}  // namespace
}  // namespace tachyon::spec
