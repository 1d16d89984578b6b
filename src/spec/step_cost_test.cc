#include "spec/step_cost.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace tachyon::spec {
namespace {

// Two equal samples: a settled estimate of `rows`.
void ObserveSettled(StepCostModel* m, int64_t rows, double seconds) {
  m->Observe(rows, seconds);
  m->Observe(rows, seconds);
}

TEST(StepCostModelTest, MediansInterpolatesAndExtrapolates) {
  StepCostModel m;
  EXPECT_FALSE(m.Seconds(4).has_value());
  m.Observe(2, 1.0);
  EXPECT_DOUBLE_EQ(*m.Seconds(2), 1.0);
  EXPECT_FALSE(m.Predict(2)->settled);     // one sample
  EXPECT_FALSE(m.Seconds(1).has_value());  // nothing below
  EXPECT_FALSE(m.Seconds(3).has_value());  // one count: no slope
  m.Observe(2, 2.0);                       // lower median of {1, 2}
  EXPECT_DOUBLE_EQ(*m.Seconds(2), 1.0);
  EXPECT_TRUE(m.Predict(2)->settled);
  m.Observe(2, 1.2);  // {1, 1.2, 2}
  EXPECT_DOUBLE_EQ(*m.Seconds(2), 1.2);
  m.Observe(10, 3.1);
  EXPECT_DOUBLE_EQ(*m.Seconds(6), 1.2 + 1.9 * 4 / 8);  // between 2 and 10
  EXPECT_FALSE(m.Predict(6)->settled);                 // 10 has one sample
  m.Observe(10, 3.1);
  EXPECT_TRUE(m.Predict(6)->settled);
  m.Observe(1, 0.5);
  EXPECT_TRUE(m.Predict(6)->settled);  // below a settled count
  EXPECT_FALSE(m.Predict(1)->settled);
  EXPECT_DOUBLE_EQ(*m.Seconds(14), 3.1 + 0.2375 * 4);  // along the last slope
  EXPECT_FALSE(m.Predict(14)->settled);                // extrapolated
  m.Observe(20, 1.0);                                  // a faster larger step: never falls
  EXPECT_DOUBLE_EQ(*m.Seconds(30), 1.0);
  m.Observe(0, 5.0);  // ignored
  m.Observe(StepCostModel::kMaxRows + 1, 5.0);
  EXPECT_DOUBLE_EQ(*m.Seconds(StepCostModel::kMaxRows + 1), 1.0);
  EXPECT_DOUBLE_EQ(*m.Seconds(1), 0.5);
}

TEST(StepCostModelTest, SpikesAreOutvotedAndOldSamplesForgotten) {
  StepCostModel m;
  // Two spikes among five samples do not move the estimate; the window holds the newest five.
  for (double s : {9.0, 1.0, 1.1, 8.0, 1.05}) m.Observe(9, s);
  EXPECT_DOUBLE_EQ(*m.Seconds(9), 1.1);
  for (double s : {3.0, 3.0, 3.0}) m.Observe(9, s);  // {3, 3, 3, 8, 1.05}: now it is 3
  EXPECT_DOUBLE_EQ(*m.Seconds(9), 3.0);
  // Steps of another count age them: after kForgetAfter observations 9 is measured afresh.
  for (int64_t i = 0; i < StepCostModel::kForgetAfter; ++i) m.Observe(1, 1.0);
  EXPECT_FALSE(m.Predict(9).has_value());  // 1 alone: no slope
  m.Observe(2, 1.0);
  m.Observe(2, 1.0);
  EXPECT_FALSE(m.Predict(9)->settled);  // extrapolated along 1 and 2
  m.Observe(9, 1.5);
  EXPECT_DOUBLE_EQ(*m.Seconds(9), 1.5);
  EXPECT_FALSE(m.Predict(9)->settled);
  m.Observe(9, 1.4);
  EXPECT_DOUBLE_EQ(*m.Seconds(9), 1.4);
  EXPECT_TRUE(m.Predict(9)->settled);
  // Measured: a count's own fresh samples only, never interpolated or extrapolated.
  EXPECT_DOUBLE_EQ(*m.Measured(9), 1.4);
  EXPECT_DOUBLE_EQ(*m.Measured(2), 1.0);
  EXPECT_TRUE(m.Seconds(5).has_value());
  EXPECT_FALSE(m.Measured(5).has_value());
  EXPECT_FALSE(m.Measured(10).has_value());
  EXPECT_FALSE(m.Measured(0).has_value());
  EXPECT_FALSE(m.Measured(StepCostModel::kMaxRows + 1).has_value());
}

TEST(ExpectedEmittedTest, GeometricSeries) {
  EXPECT_DOUBLE_EQ(ExpectedEmitted(0.5, 0), 1.0);
  EXPECT_DOUBLE_EQ(ExpectedEmitted(0.5, 3), 1.875);
  EXPECT_DOUBLE_EQ(ExpectedEmitted(1.0, 4), 5.0);
}

TEST(CostAwareDraftLengthTest, DraftsWhatPaysAtThisCost) {
  // Memory-bound (a step costs the same whatever its rows): draft as much as allowed.
  StepCostModel flat;
  ObserveSettled(&flat, 1, 1.0);
  ObserveSettled(&flat, 64, 1.0);
  EXPECT_EQ(CostAwareDraftLength(flat, 1, 0.5, 8, 1.05), 8);
  EXPECT_EQ(CostAwareDraftLength(flat, 1, 0.0, 8, 1.05), 0);  // nothing accepted
  // A small model: t(n) = 3 + 1.4 n ms, like a 135M model's decode vs prefill on two cores.
  StepCostModel small;
  ObserveSettled(&small, 1, 4.4);
  ObserveSettled(&small, 64, 3 + 1.4 * 64);
  EXPECT_EQ(CostAwareDraftLength(small, 1, 0.25, 8, 1.05), 0);  // 1.25 tokens for 1.3x cost
  const int k = CostAwareDraftLength(small, 1, 0.95, 8, 1.05);
  EXPECT_GE(k, 4);  // long runs of acceptance pay even there
  // Batch 32 of the small model: compute-bound, the same acceptance no longer pays.
  ObserveSettled(&small, 32, 3 + 1.4 * 32);
  EXPECT_EQ(CostAwareDraftLength(small, 32, 0.95, 8, 1.05), 0);
  // Unknown cost of the batch's own size: try the longest (the steps teach the model).
  StepCostModel none;
  EXPECT_EQ(CostAwareDraftLength(none, 4, 0.5, 6, 1.05), 6);
  // Before any draft: 1 row measured twice, 64 (the prompt's prefill) once. The rows between
  // are interpolated and believed: at alpha 0.5 the small model drafts one token, the
  // memory-bound one the longest draft that pays.
  StepCostModel first;
  ObserveSettled(&first, 1, 4.4);
  first.Observe(64, 3 + 1.4 * 64);
  EXPECT_TRUE(first.Predict(9)->interpolated);
  EXPECT_FALSE(first.Predict(9)->settled);
  EXPECT_EQ(CostAwareDraftLength(first, 1, 0.5, 8, 1.05), 1);
  StepCostModel first_flat;
  ObserveSettled(&first_flat, 1, 1.0);
  first_flat.Observe(64, 1.0);
  EXPECT_EQ(CostAwareDraftLength(first_flat, 1, 0.5, 8, 1.05), 8);
  // One slow sample of 9 rows is not believed (drafting measures it again); two are.
  StepCostModel spiked;
  spiked.Observe(1, 1.0);
  spiked.Observe(1, 1.0);
  spiked.Observe(9, 10.0);
  EXPECT_EQ(CostAwareDraftLength(spiked, 1, 0.9, 8, 1.05), 8);
  spiked.Observe(9, 10.0);
  EXPECT_EQ(CostAwareDraftLength(spiked, 1, 0.9, 8, 1.05), 0);
}

TEST(CostAwareDraftLengthTest, ADraftModelsForwardsCountPerDraftedToken) {
  // A flat target step of 1 s: free drafts pay at any length, but a draft model's forward per
  // drafted token needs long accepted runs, and at 1 s per token it never pays.
  StepCostModel flat;
  ObserveSettled(&flat, 1, 1.0);
  ObserveSettled(&flat, 64, 1.0);
  EXPECT_EQ(CostAwareDraftLength(flat, 1, 0.5, 8, 1.05, 0.0), 8);
  // alpha 0.5 at 0.5 s a draft: k = 1 gives 1.5 tokens in 1.5 s, no better than 1 in 1 s.
  EXPECT_EQ(CostAwareDraftLength(flat, 1, 0.5, 8, 1.05, 0.5), 0);
  // alpha 0.9: 1 + 0.9 + ... over 1 + 0.4 k peaks at a few tokens (not all 8).
  const int k = CostAwareDraftLength(flat, 1, 0.9, 8, 1.05, 0.4);
  EXPECT_GE(k, 2);
  EXPECT_LT(k, 8);
  const double best = ExpectedEmitted(0.9, k) / (1.0 + 0.4 * k);
  for (int j = 1; j <= 8; ++j) EXPECT_GE(best, ExpectedEmitted(0.9, j) / (1.0 + 0.4 * j)) << j;
  EXPECT_EQ(CostAwareDraftLength(flat, 1, 0.99, 8, 1.05, 1.0), 0);
  // Forwards another sequence's drafts run anyway are free: up to them, only the rows count.
  EXPECT_EQ(CostAwareDraftLength(flat, 1, 0.5, 8, 1.05, 0.5, /*free_drafts=*/8), 8);
  EXPECT_EQ(CostAwareDraftLength(flat, 1, 0.99, 8, 1.05, 1.0, /*free_drafts=*/3), 3);
}

TEST(StepCostModelTest, OneSampleIsBelievedUpToWhatTheOtherCountsSay) {
  StepCostModel m;
  ObserveSettled(&m, 1, 1.0);
  ObserveSettled(&m, 2, 1.5);
  // Nothing measured of 5: along 1 and 2.
  EXPECT_DOUBLE_EQ(*m.Believed(5, 1.0), 3.0);
  // One fast sample is believed (a step is never sped up), one slow one is not.
  m.Observe(5, 2.0);
  EXPECT_DOUBLE_EQ(*m.Believed(5, 1.0), 2.0);
  StepCostModel spike;
  ObserveSettled(&spike, 1, 1.0);
  ObserveSettled(&spike, 2, 1.5);
  spike.Observe(5, 30.0);
  EXPECT_DOUBLE_EQ(*spike.Believed(5, 1.0), 3.0);
  spike.Observe(5, 30.0);  // twice: settled
  EXPECT_DOUBLE_EQ(*spike.Believed(5, 1.0), 30.0);
  // One sample and nothing else to go by: the fallback.
  StepCostModel lone;
  lone.Observe(9, 10.0);
  EXPECT_DOUBLE_EQ(*lone.Believed(9, 1.0), 1.0);
  EXPECT_FALSE(lone.Believed(4, 1.0).has_value());
}

TEST(ProbePauseTest, ProbesCostAtMostTheBudgetOfTheTime) {
  StepCostModel m;
  EXPECT_EQ(ProbePause(m, 1, 0, 0.005), 0);  // nothing known
  ObserveSettled(&m, 1, 1.0);
  m.Observe(2, 1.5);
  EXPECT_EQ(ProbePause(m, 1, 0, 0.005), 0);  // one sample of 2 rows: maybe load
  m.Observe(2, 1.5);
  // A probe that is never kept adds half a step: 100 steps between probes keep them at 0.5%
  // of the time.
  EXPECT_EQ(ProbePause(m, 1, 0, 0.005), 100);
  EXPECT_EQ(ProbePause(m, 1, 0, 0.01), 50);
  // Kept a fifth of the time: 1.5 steps' time for 1.2 tokens, 25% more per token.
  EXPECT_EQ(ProbePause(m, 1, 0.2, 0.005), 50);
  // Kept half the time or more: a probe costs nothing on average.
  EXPECT_EQ(ProbePause(m, 1, 0.5, 0.005), 0);
  EXPECT_EQ(ProbePause(m, 1, 0.9, 0.005), 0);
  // Nearly free rows: a short pause.
  StepCostModel cheap;
  ObserveSettled(&cheap, 1, 1.0);
  ObserveSettled(&cheap, 2, 1.02);
  EXPECT_EQ(ProbePause(cheap, 1, 0, 0.005), 4);
  // A batch of 4: its own row's share of the step, shared by 4 tokens; between settled counts
  // the costs are interpolated.
  ObserveSettled(&cheap, 8, 2.0);
  const double t4 = 1.02 + 0.98 * 2 / 6, t5 = 1.02 + 0.98 * 3 / 6;
  EXPECT_EQ(ProbePause(cheap, 4, 0, 0.005), static_cast<int>(std::ceil((t5 / t4 - 1) / 0.005)));
  EXPECT_EQ(ProbePause(cheap, 4, 0.1, 0.005),
            static_cast<int>(std::ceil((t5 / t4 * 4 / 4.1 - 1) / 0.005)));
  // A faster step of more rows (noise) costs nothing.
  StepCostModel odd;
  ObserveSettled(&odd, 1, 1.0);
  ObserveSettled(&odd, 2, 0.9);
  EXPECT_EQ(ProbePause(odd, 1, 0, 0.005), 0);
}

// t(n) = a + b n for n = 1..64, each measured twice.
StepCostModel Linear(double a, double b) {
  StepCostModel m;
  for (int64_t n = 1; n <= 64; ++n) ObserveSettled(&m, n, a + b * static_cast<double>(n));
  return m;
}

DraftCandidate Geometric(double alpha, int k) {
  DraftCandidate c;
  double p = 1;
  for (int j = 0; j < k; ++j) c.accept.push_back(p *= alpha);
  return c;
}

TEST(PlanDraftLengthsTest, NoMemberOfAStepLosesWhereRowsAreExpensive) {
  // A small model (a 9-row step costs 3.6 one-row steps): at batch 2, one sequence's drafts
  // would slow the other by a row per draft; even well-accepted drafts are not planned.
  const StepCostModel small = Linear(2.0, 1.0);
  StepPlanInput in;
  in.batch_rows = 2;
  in.num_idle = 1;
  EXPECT_EQ(PlanDraftLengths(small, in, {Geometric(0.9, 8)}), std::vector<int>{0});
  // Alone, the same sequence drafts (tokens per second of the batch = its own).
  in.batch_rows = 1;
  in.num_idle = 0;
  EXPECT_GT(PlanDraftLengths(small, in, {Geometric(0.9, 8)})[0], 0);
  // Both sequences of the batch drafting well: both gain, so both draft.
  in.batch_rows = 2;
  const std::vector<int> both = PlanDraftLengths(small, in, {Geometric(0.9, 8), Geometric(0.9, 8)});
  EXPECT_GT(both[0], 0);
  EXPECT_GT(both[1], 0);
  // One drafting well, one badly: the bad one would lose by the good one's rows, and its own
  // drafts do not make up for them. Nothing.
  EXPECT_EQ(PlanDraftLengths(small, in, {Geometric(0.9, 8), Geometric(0.05, 8)}),
            (std::vector<int>{0, 0}));
}

TEST(PlanDraftLengthsTest, AWaitingPromptIsNotSlowed) {
  // Memory-bound up to 4 rows, then each row costs a tenth of a step: alone, 8 drafts pay; with
  // a prompt waiting for the step, only the rows that do not slow it.
  StepCostModel m;
  for (int64_t n = 1; n <= 64; ++n) {
    ObserveSettled(&m, n, n <= 4 ? 1.0 : 1.0 + 0.1 * static_cast<double>(n - 4));
  }
  StepPlanInput in;
  in.batch_rows = 1;
  EXPECT_EQ(PlanDraftLengths(m, in, {Geometric(0.95, 8)}), std::vector<int>{8});
  in.num_idle = 1;
  EXPECT_EQ(PlanDraftLengths(m, in, {Geometric(0.95, 8)}), std::vector<int>{3});
}

TEST(PlanDraftLengthsTest, LikelierDraftsFirstAndTheDrafterSaysWhereToStop) {
  // Flat up to 4 rows, then a step more per row: the free rows go to the likeliest drafts,
  // across sequences.
  StepCostModel m;
  for (int64_t n = 1; n <= 64; ++n) {
    ObserveSettled(&m, n, n <= 4 ? 1.0 : 1.0 + 1.0 * static_cast<double>(n - 4));
  }
  StepPlanInput in;
  in.batch_rows = 1;
  EXPECT_EQ(PlanDraftLengths(m, in, {Geometric(0.9, 8)}), std::vector<int>{3});
  // Where each row costs a third of a step, a drafter that doubts its second token stops
  // before it; at the request's acceptance alone the draft would be 5 long.
  const StepCostModel small = Linear(2.0, 1.0);
  DraftCandidate unsure;
  unsure.accept = {0.9, 0.05, 0.04};
  EXPECT_EQ(PlanDraftLengths(small, in, {unsure}), std::vector<int>{1});
  EXPECT_EQ(PlanDraftLengths(small, in, {Geometric(0.9, 8)}), std::vector<int>{5});
  // Two sequences in a step flat up to 4 rows: 2 + 2 drafts fill it, highest first.
  in.batch_rows = 2;
  const std::vector<int> two = PlanDraftLengths(m, in, {Geometric(0.9, 8), Geometric(0.6, 8)});
  EXPECT_EQ(two[0] + two[1], 2);
  EXPECT_GE(two[0], two[1]);
  // Nothing known of a step with a draft row: one draft, the likeliest, measures it.
  StepCostModel bare;
  ObserveSettled(&bare, 2, 1.0);
  EXPECT_EQ(PlanDraftLengths(bare, in, {Geometric(0.6, 8), Geometric(0.9, 8)}),
            (std::vector<int>{0, 1}));
  // Nothing known of the step without drafts: none.
  EXPECT_EQ(PlanDraftLengths(StepCostModel(), in, {Geometric(0.9, 8)}), std::vector<int>{0});
}

}  // namespace
}  // namespace tachyon::spec
