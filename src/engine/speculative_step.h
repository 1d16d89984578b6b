// Speculator: the engine's speculative decoding, around the normal step (docs/speculative.md).
//
// After a sequence generates, Propose() asks the drafter (spec/drafter.h) for up to K tokens
// to follow it and stores them in Request::draft_tokens; the scheduler adds them to the
// sequence's next step within the token budget; the runner asks logits for the last known
// token and each draft; the engine verifies them in order with the request's own sampler
// (spec/rejection_sampler.h) and emits the accepted prefix plus one corrected or bonus token;
// Scheduler::OnDraftsVerified rolls the KV of rejected drafts back. Verified() keeps the
// per-request acceptance (which sets the next draft length, or pauses drafting for a request
// that does not pay) and the /metrics counters.
//
// Drafting stops for the whole batch while disable_by_batch_size or more sequences run: a
// large batch is compute-bound, and extra tokens then cost as much as they save. Below that,
// unless min_acceptance_rate is 0 (drafting never switches itself off), Flush decides the
// drafts of all the step's sequences together (spec::PlanDraftLengths) under the step costs
// measured so far (ObserveStep: steps of decode and verify rows only, spec/step_cost.h): each
// draft token priced at its probability of acceptance (the request's per-position acceptance,
// lowered to the drafter's own estimate where it has one), the batch's expected tokens per
// second maximised, and no member of the step (a sequence without drafts, a waiting prompt)
// slowed by the others' drafts. A request given none pauses for a while (probing again
// later). While the cost of a step of the batch's size without drafts is unknown, a step runs
// without them (a draft model still takes in the prompt of a sequence that just finished it).
//
// Structured output: a request whose tokens must follow a grammar verifies drafts the same way
// (each row's mask is that of the state after the tokens emitted before it, which are exactly
// the accepted drafts, so the matcher only ever advances over emitted tokens). Every draft is
// cut before its first token the grammar refuses (AcceptToken over the draft, then Rollback):
// those rows could never be accepted; the cut saves their compute and changes no output.
// Thread-safety: none (engine thread).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/draft_runner.h"
#include "engine/request.h"
#include "spec/acceptance.h"
#include "spec/drafter.h"
#include "spec/speculative_config.h"
#include "spec/step_cost.h"
#include "util/status.h"

namespace tachyon::engine {

class Speculator {
 public:
  // Errors: a config the engine cannot run (ValidateSpeculativeConfig). REQUIRES: enabled().
  // `drafter`: null for the config's method's own (spec::MakeDrafter), else used instead.
  // `draft_model`: method draft_model's runner (required for that method, else unused).
  static Result<std::unique_ptr<Speculator>> Create(
      const spec::SpeculativeConfig& config, std::unique_ptr<spec::Drafter> drafter,
      std::unique_ptr<DraftModelRunner> draft_model = nullptr);

  // Proposes r->draft_tokens for r's next step (possibly none): at most
  // num_speculative_tokens, the request's controller's length, what max_tokens and the context
  // leave after the next emitted token. `num_running`: sequences running now (the same for
  // every call of a step). Under the cost rule the lengths are decided by Flush(), for all the
  // step's sequences at once, and a draft model drafts there. Call Flush() after the step's
  // last Propose (for every method: it ends the step's proposal round).
  void Propose(Request* r, int num_running, int64_t max_model_len);
  // Decides the draft lengths of the sequences Propose saw since the last Flush (the cost rule:
  // spec::PlanDraftLengths, `num_waiting` requests waiting for a prompt chunk count as members
  // without drafts), then runs the draft model for them (one draft forward per draft position
  // for all of them). A failed draft forward is logged and costs only the drafts.
  void Flush(int num_waiting = 0);
  // q of r's draft j (the draft model's distribution it was drawn from, [n_vocab]); empty for
  // deterministic drafts (n-gram, suffix, greedy drafting).
  std::span<const float> DraftProbs(const Request& r, int j) const;
  // r was preempted: its draft KV goes (recomputed when it resumes).
  void Preempted(int64_t seq_id);
  // Records the verification of `drafted` tokens of r, of which the first `accepted` were kept.
  void Verified(const Request& r, int drafted, int accepted);
  // r finished or was aborted.
  void Release(const Request& r);
  // A forward pass computed `rows` tokens in `seconds`. The engine reports steps of decode and
  // verify rows only (a prompt chunk's rows cost differently).
  void ObserveStep(int64_t rows, double seconds) { cost_.Observe(rows, seconds); }

  // The most of a request's step time its cost probes may take (spec::ProbePause).
  static constexpr double kProbeBudget = 0.005;

  // The counters, with the cost rule's current estimates (SpecStats::step_seconds).
  spec::SpecStats stats() const;
  const spec::SpeculativeConfig& config() const { return config_; }
  const DraftModelRunner* draft_model() const { return draft_model_.get(); }  // null: none

 private:
  Speculator(const spec::SpeculativeConfig& config, std::unique_ptr<spec::Drafter> drafter,
             std::unique_ptr<DraftModelRunner> draft_model)
      : config_(config), drafter_(std::move(drafter)), draft_model_(std::move(draft_model)) {}

  spec::SpeculativeConfig config_;
  std::unique_ptr<spec::Drafter> drafter_;                                // null with a draft model
  std::unique_ptr<DraftModelRunner> draft_model_;                         // method draft_model
  std::vector<DraftModelRunner::Job> queued_;                             // Propose -> Flush
  std::unordered_map<int64_t, spec::DraftLengthController> controllers_;  // by seq_id
  spec::StepCostModel cost_;
  spec::SpecStats stats_;
  // A member of the step may lose at most this share of its tokens per second to the others'
  // drafts (spec::StepPlanInput::tolerance).
  static constexpr double kTolerance = 0.01;
  // The most a draft token's acceptance is priced at, given the ones before it were.
  static constexpr double kMaxAlpha = 0.97;

  // A sequence whose draft length the cost rule decides at Flush.
  struct Candidate {
    Request* request;
    bool probe;  // the controller's one-token probe after a pause
    std::vector<double> accept;  // spec::DraftCandidate::accept
    bool drafter_lowered = false;  // the drafter's own estimate of the first draft was lower
  };
  // Decides the pending candidates' lengths (trims their drafts, or queues draft-model jobs).
  void Plan(int num_waiting);

  std::vector<Candidate> pending_;  // Propose -> Flush
  // Sequences whose drafts of this step the drafter doubted (Candidate::drafter_lowered): their
  // verification moves alpha but not the acceptance rate (DraftLengthController::Record).
  std::unordered_set<int64_t> doubted_;
  int step_running_ = 0;            // num_running of this step's Propose calls
};

}  // namespace tachyon::engine
