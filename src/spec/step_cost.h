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
// kSettled fresh samples of n itself, or is interpolated below a settled count (a slow sample of
// the count below raises the cost without drafts alike, so it errs towards drafting, which
// measures again); extrapolations never are. Decode steps teach the small counts, prefill chunks
// the large ones, drafted steps those in between.
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

  std::vector<Count> counts_;  // [rows]
  int64_t now_ = 0;            // observations so far
};

// Expected tokens a sequence emits from a step verifying k drafts when each draft is accepted
// with probability `alpha` given the ones before it were: 1 + alpha + ... + alpha^k.
double ExpectedEmitted(double alpha, int k);

// The draft length in [0, max_k] that maximises the batch's tokens per second: a step of
// `batch_rows` rows without this sequence's drafts emits batch_rows tokens; with k drafts it
// emits batch_rows - 1 + ExpectedEmitted(alpha, k) in Predict(batch_rows + k). Row counts
// whose cost is unknown, extrapolated or resting on a single sample of their own are taken as
// costing what batch_rows does (drafting is tried, and the steps it runs teach the model, so one
// slow step is measured again rather than believed); interpolated ones are believed even when
// the count above has one sample (typically the prompt's prefill chunk: before any draft it is
// what tells a model whose rows are expensive, where a long draft that misses costs several
// steps, from a memory-bound one; each step of a new row count then refines it). max_k when
// batch_rows' own cost is unknown; 0 when alpha is 0.
// `margin` (>= 1): a draft length must beat no drafts by this factor.
// `draft_seconds` (>= 0): what drafting one token costs before the step (a draft model's
// forward pass; 0 for drafters whose cost is negligible): k drafts add k of it to the step,
// less `free_drafts` (>= 0) of them (forwards that run anyway: a draft model drafts every
// sequence of a step at once, so another sequence's drafts already pay for that many).
// `batch_rows` is what the step computes before these drafts (other sequences' drafts count).
int CostAwareDraftLength(const StepCostModel& cost, int64_t batch_rows, double alpha, int max_k,
                         double margin, double draft_seconds = 0, int free_drafts = 0);

}  // namespace tachyon::spec
