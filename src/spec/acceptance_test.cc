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
