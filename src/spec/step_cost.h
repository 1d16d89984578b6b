// StepCostModel: how long the engine's forward pass takes as a function of the number of rows
// (tokens) a step computes, learnt from the engine's own steps on this machine and model, so
// speculation can tell whether verifying k more rows pays for the tokens they are expected to
// save (acceptance.h's DraftLengthController, engine/speculative_step.h).
//
// Robust to load: step times are noisy in one direction (a step is slowed by other work, never
// sped up), so one slow step must not decide for long. Each row count 1..kMaxRows keeps the
// seconds of its newest kWindow steps, and its estimate is their lower median (so one spike in
// two samples, two in five, are ignored). Samples older than kForgetAfter observations (steps of
// any row count) are forgotten, so a count that is no longer run (drafting switched off) loses
// what it learnt under old conditions and is measured again (periodic re-probing).
//
// Estimate(n) is n's own estimate where n has fresh samples, else interpolated linearly between
// the nearest counts with fresh samples below and above n (`interpolated`), else extrapolated
// along the last two counts' slope above the largest one (never falling); unknown below the
// smallest count or with a single count. An estimate is `settled` when it rests on at least
// kSettled fresh samples of n itself, or is interpolated below a settled count; extrapolations
// never are. Believed(n) is what the draft-length rules use (below). The engine feeds it steps
// of decode and verify rows: decode steps teach the batch's own count, drafted steps the
// counts above it.
// Thread-safety: none (engine thread).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

namespace tachyon::spec {

class StepCostModel {
 public:
  static constexpr int kMaxRows = 1024;         // larger steps are not recorded
  static constexpr int kWindow = 5;             // newest samples kept per row count
  static constexpr int kSettled = 2;            // fresh samples before an estimate is trusted
  static constexpr int64_t kForgetAfter = 256;  // observations a sample stays fresh

  StepCostModel() : counts_(kMaxRows + 1) {}

  // A forward pass of `rows` rows took `seconds`.
  void Observe(int64_t rows, double seconds);

  struct Estimate {
    double seconds = 0;
    bool settled = false;
    bool interpolated = false;  // between fresh counts on both sides, none of n's own
  };
  // Predicted seconds of a step of `rows` rows (rules above).
  std::optional<Estimate> Predict(int64_t rows) const;
  std::optional<double> Seconds(int64_t rows) const {
    const std::optional<Estimate> e = Predict(rows);
    return e ? std::optional<double>(e->seconds) : std::nullopt;
  }
  // What the draft-length rules below take a step of `rows` rows to cost: rows' own estimate
  // when settled; with one sample of its own, the lower of it and what the other counts say
  // (interpolated or extrapolated as Predict does without rows' own samples: one slow step may
  // be load, but a step is never sped up, so a fast one is believed), or, with nothing else to
  // go by, `fallback` (the step without drafts: drafting measures it again); with none of its
  // own, interpolated or extrapolated. nullopt: no basis at all.
  std::optional<double> Believed(int64_t rows, double fallback) const;
  // The lower median of the fresh step times of exactly `rows` rows (none: nullopt). O(1).
  std::optional<double> Measured(int64_t rows) const;

 private:
  struct Count {
    std::array<double, kWindow> seconds{};
    std::array<int64_t, kWindow> at{};  // observation index of each sample
    int n = 0;                          // samples stored (<= kWindow)
    int next = 0;                       // ring position of the next sample
    int64_t last_at = -1;               // observation index of the newest sample
  };
  bool Fresh(const Count& c) const { return c.last_at >= 0 && now_ - c.last_at < kForgetAfter; }
  // The lower median of c's fresh samples and how many there are. REQUIRES: Fresh(c).
  Estimate Own(const Count& c) const;
  // Predict(rows) from the other counts only (interpolated or extrapolated).
  std::optional<Estimate> FromNeighbours(int64_t rows) const;

  std::vector<Count> counts_;  // [rows]
  int64_t now_ = 0;            // observations so far
};

// Expected tokens a sequence emits from a step verifying k drafts when each draft is accepted
// with probability `alpha` given the ones before it were: 1 + alpha + ... + alpha^k.
double ExpectedEmitted(double alpha, int k);

// One step's drafting plan (PlanDraftLengths): which of the sequences that could draft verify
// how many drafts. Every member of the step progresses at its expected tokens (1 + the
// accepted drafts; a sequence without drafts or a prompt chunk: 1) per second of the step.
// The plan maximises the batch's expected tokens per second, and no member may lose: each
// drafting sequence's expected tokens per second, and each member without drafts' 1 / step
// seconds, must stay within `tolerance` of 1 / t(batch_rows), what the step without drafts
// gives them. (Tokens per second of the batch alone would let one sequence's drafts slow the
// others: a batch that finishes when its slowest member does, a waiting prompt, or a request
// whose own drafts fail would then lose.) The whole plan must beat no drafts by `margin`.
struct StepPlanInput {
  int64_t batch_rows = 1;  // rows the step computes without drafts (one per running sequence)
  // Members that draft nothing whatever the plan: running sequences not among the candidates
  // (a prompt chunk, a request that has nothing to draft) and requests waiting for a prompt
  // chunk. With any, the step may only grow within `tolerance`.
  int num_idle = 0;
  double margin = 1.05;     // >= 1
  double tolerance = 0.01;  // in [0, 1)
  // Seconds of one draft-model forward (0 for drafters whose cost is negligible): a plan whose
  // longest draft is k runs k of them before the step, less `free_draft_forwards` that run
  // anyway.
  double draft_seconds = 0;
  int free_draft_forwards = 0;
};
// One candidate: accept[j] = the probability that its drafts 0..j are all accepted
// (non-increasing, in [0, 1]); accept.size() = the most drafts it may verify.
struct DraftCandidate {
  std::vector<double> accept;
};
// The number of drafts each candidate verifies (same order), from the step costs
// StepCostModel::Believed gives: drafts are added in the order of their probability of
// acceptance (the most likely first, a sequence's in order) and the best feasible prefix of
// that order wins. All 0 when t(batch_rows) is unknown. A step of a row count with no basis
// at all is not planned, except one draft (the most likely) when t(batch_rows + 1) is
// unknown: that step measures it.
std::vector<int> PlanDraftLengths(const StepCostModel& cost, const StepPlanInput& in,
                                  const std::vector<DraftCandidate>& candidates);

// The fewest steps between one sequence's cost probes (a one-token draft outside the plan,
// engine/speculative_step.h) for its probes to cost at most `budget` of the batch's time: a
// probe adds one row to a step of `batch_rows` and is accepted with probability `alpha`, so the
// batch's seconds per token grow by t(batch_rows + 1) / t(batch_rows) x batch_rows /
// (batch_rows + alpha) - 1 in that step (none where that is <= 0; rounded up). Where rows are
// expensive (a small model whose two-row step costs half as much again as one) and the
// request's drafts are rarely accepted, probes come rarely; where rows are nearly free, or the
// probe is likely kept, the pause is short. 0 while either step is not settled
// (StepCostModel::Predict): a cost measured once may be load.
int ProbePause(const StepCostModel& cost, int64_t batch_rows, double alpha, double budget);

// One sequence alone in its step (PlanDraftLengths with one candidate whose drafts are each
// accepted with probability alpha given the ones before, no idle member): the draft length in
// [0, max_k]. max_k when batch_rows' own cost is unknown; 0 when alpha is 0. `batch_rows`,
// `draft_seconds`, `free_drafts` as in StepPlanInput.
int CostAwareDraftLength(const StepCostModel& cost, int64_t batch_rows, double alpha, int max_k,
                         double margin, double draft_seconds = 0, int free_drafts = 0);

}  // namespace tachyon::spec
