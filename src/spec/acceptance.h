// Acceptance bookkeeping for speculative decoding: the counters /metrics reports (as vLLM
// names them: drafts, draft tokens, accepted tokens, accepted per position) and the per-request
// controller that picks the next draft length from recent acceptance.
// Thread-safety: none (engine thread); SpecStats is plain data, copied into metrics.
#pragma once

#include <cstdint>
#include <vector>

namespace tachyon::spec {

struct SpecStats {
  int64_t num_drafts = 0;           // verification steps of a sequence with >= 1 drafted token
  int64_t num_draft_tokens = 0;     // tokens drafted (and verified)
  int64_t num_accepted_tokens = 0;  // of which accepted
  // [i]: drafts whose token at position i was accepted (so [0] >= [1] >= ...).
  std::vector<int64_t> accepted_per_position;
  // Method draft_model: the draft model's forward passes and their seconds.
  int64_t num_draft_forwards = 0;
  double draft_seconds = 0;
  // What the cost rule measured lately (StepCostModel::Measured, 0: no fresh sample):
  // [r - 1] = seconds of a target step of r rows, r = 1 .. num_speculative_tokens + 1, and of
  // the draft model's one-row forward (draft_model).
  std::vector<double> step_seconds;
  double draft_forward_seconds = 0;

  // Records one verification: `drafted` tokens of which the first `accepted` were kept.
  // REQUIRES: 0 <= accepted <= drafted.
  void Record(int drafted, int accepted);
};

// Per request: how many tokens to draft next. Tracks an exponential average of the share of
// drafted tokens accepted (starting optimistic at 1; drafts the drafter doubted not counted,
// Record). The draft length is the expected run of
// accepted tokens plus one, r / (1 - r) + 1, or twice the last draft where that was accepted
// whole, if longer (the average climbs slowly after early misses, while a request that starts
// copying keeps every draft: 1, 2, 4, 8 ... as TCP's slow start; the engine's cost rule still
// prices each token), capped at max_tokens. After kWarmupDrafts drafts,
// a request whose average falls below min_rate stops drafting for a pause (16 steps, doubling
// each time up to 1024) and then probes again with one draft, so a request that copies poorly
// costs almost nothing and one whose output turns repetitive later still gains.
//
// It also tracks alpha, the per-position acceptance (a draft token kept given the ones before
// it were: accepted / min(accepted + 1, drafted) per verification, averaged the same way from
// the start at 1, never set by one draft alone), for the engine's cost-aware length
// (step_cost.h). Before the request's first draft is verified nothing is known about it, and
// alpha() is kFirstDraftAlpha: the first draft is sized by the cost model as if each token were
// as likely kept as not, so where rows are expensive it stays short (a long first draft on a
// workload that copies nothing costs a whole extra step or more), and where they are nearly
// free (a memory-bound model) it is still several tokens long. When that finds no length that
// pays, DeclineForCost() pauses for kCostPause steps (the cost rule is evaluated again after
// it, and what it decides on changes as the steps are measured), then probes with one token,
// which keeps alpha current. A probe that is rejected doubles the next cost pause (up to
// kMaxCostPause), one that is accepted resets it: a request whose drafts keep failing where
// rows are expensive probes ever more rarely, so its probes cost a vanishing share of steps.
class DraftLengthController {
 public:
  static constexpr int kWarmupDrafts = 4;
  static constexpr double kWeight = 0.3;  // of the newest draft in the average
  static constexpr int kCostPause = 16;
  static constexpr int kMaxCostPause = 256;
  static constexpr double kFirstDraftAlpha = 0.5;  // alpha() before any draft was verified

  explicit DraftLengthController(double min_rate) : min_rate_(min_rate) {}

  // Tokens to draft at this step (0: not now); call once per step the request generates.
  int NextLength(int max_tokens);
  // The verification of the draft NextLength asked for. `doubted`: the drafter itself gave the
  // draft's first token a lower probability than alpha() (it went out because rows are cheap
  // enough to try it): its outcome moves alpha but not the rate, so misses the drafter
  // expected (a one-token match with many continuations) do not pause a request that has not
  // started copying yet. A probe after an acceptance pause counts whatever the drafter said.
  void Record(int drafted, int accepted, bool doubted = false);

  // Poor acceptance: pause (16 steps, doubling up to 1024), then probe; the probe's result
  // alone sets rate().
  void Decline();
  // No draft length pays at this step (the caller's cost model): pause the current cost pause
  // (kCostPause, doubled by each rejected probe up to kMaxCostPause) or `min_pause` steps if
  // that is longer (at most kMaxCostPause: what a probe costs, ProbePause in step_cost.h), then
  // draft one token (probing(); the rate averages it as usual).
  void DeclineForCost(int min_pause = 0);

  double rate() const { return rate_; }
  double alpha() const { return num_drafts_ == 0 ? kFirstDraftAlpha : alpha_; }
  // alpha() as the engine's cost rule prices drafts: over the first kWarmupDrafts verified
  // drafts it is shrunk towards kFirstDraftAlpha as if two drafts at that prior had been seen
  // too, so one lucky token does not buy a long draft where rows are expensive (the price
  // moves a third of the way per draft at first, not all the way); from then on alpha().
  double priced_alpha() const {
    return num_drafts_ >= kWarmupDrafts
               ? alpha_
               : (num_drafts_ * alpha_ + 2 * kFirstDraftAlpha) / (num_drafts_ + 2);
  }
  bool paused() const { return pause_left_ > 0; }
  // The next draft follows a pause: a one-token probe, outside the cost rule.
  bool probing() const { return probing_ || cost_probe_; }

 private:
  double min_rate_;
  double rate_ = 1.0;
  double alpha_ = 1.0;
  int num_drafts_ = 0;  // verified drafts
  int num_rated_ = 0;   // of which counted in the rate
  int full_run_ = 0;  // the last draft's length if every token of it was accepted, else 0
  int pause_left_ = 0;
  bool probing_ = false;     // the next Record follows an acceptance pause (sets rate alone)
  bool cost_probe_ = false;  // the next draft follows a cost pause
  int next_pause_ = 16;
  int next_cost_pause_ = kCostPause;
};

}  // namespace tachyon::spec
