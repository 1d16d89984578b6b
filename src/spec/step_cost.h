// StepCostModel: how long the engine's forward pass takes as a function of the number of rows
// (tokens) a step computes, learnt from the engine's own steps on this machine and model, so
// speculation can tell whether verifying k more rows pays for the tokens they are expected to
// save (acceptance.h's DraftLengthController, engine/speculative_step.h).
//
// Each row count 1..kMaxRows keeps an exponential average of the seconds of the steps that had
// it. Seconds(n) is that average where n was seen, interpolated linearly between the nearest
// counts seen below and above n, extrapolated along the last two counts' slope above the
// largest one (never falling), and unknown below the smallest one or with a single count seen.
// Decode steps teach the small counts, prefill chunks the large ones, drafted steps those in
// between.
// Thread-safety: none (engine thread).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace tachyon::spec {

class StepCostModel {
 public:
  static constexpr int kMaxRows = 1024;   // larger steps are not recorded
  static constexpr double kWeight = 0.1;  // of the newest step in a row count's average

  StepCostModel() : seconds_(kMaxRows + 1, -1.0) {}

  // A forward pass of `rows` rows took `seconds`.
  void Observe(int64_t rows, double seconds);
  // Predicted seconds of a step of `rows` rows (rules above).
  std::optional<double> Seconds(int64_t rows) const;

 private:
  std::vector<double> seconds_;  // [rows]: average seconds, < 0 when never seen
};

// Expected tokens a sequence emits from a step verifying k drafts when each draft is accepted
// with probability `alpha` given the ones before it were: 1 + alpha + ... + alpha^k.
double ExpectedEmitted(double alpha, int k);

// The draft length in [0, max_k] that maximises the batch's tokens per second: a step of
// `batch_rows` rows without this sequence's drafts emits batch_rows tokens; with k drafts it
// emits batch_rows - 1 + ExpectedEmitted(alpha, k) in Seconds(batch_rows + k). Row counts
// whose cost is unknown are taken as costing what batch_rows does (drafting is tried, and
// the steps it runs teach the model); max_k when batch_rows' own cost is unknown; 0 when
// alpha is 0.
// `margin` (>= 1): a draft length must beat no drafts by this factor.
// `draft_seconds` (>= 0): what drafting one token costs before the step (a draft model's
// forward pass; 0 for drafters whose cost is negligible): k drafts add k of it to the step.
int CostAwareDraftLength(const StepCostModel& cost, int64_t batch_rows, double alpha, int max_k,
                         double margin, double draft_seconds = 0);

}  // namespace tachyon::spec
