#include "engine/speculative_step.h"

#include <algorithm>

#include "util/logging.h"

namespace tachyon::engine {
namespace {

// Cuts r's draft before its first token r's grammar refuses (after the output so far and the
// drafts before it): the target's row there is masked by the same grammar, so that draft and
// every one after it would be rejected anyway. A draft token that ends the grammar ends the
// request if accepted, so nothing after it is kept either. The matcher ends where it started.
void CutDraftToGrammar(Request* r) {
  if (!r->matcher || r->draft_tokens.empty()) return;
  int n = 0;
  while (n < static_cast<int>(r->draft_tokens.size()) && !r->matcher->IsTerminated() &&
         r->matcher->AcceptToken(r->draft_tokens[static_cast<size_t>(n)])) {
    ++n;
  }
  r->matcher->Rollback(n);
  r->draft_tokens.resize(static_cast<size_t>(n));
}

}  // namespace

Result<std::unique_ptr<Speculator>> Speculator::Create(
    const spec::SpeculativeConfig& config, std::unique_ptr<spec::Drafter> drafter,
    std::unique_ptr<DraftModelRunner> draft_model) {
  if (config.method == spec::SpecMethod::kDraftModel && !drafter) {
    RETURN_IF_ERROR(spec::ValidateSpeculativeConfig(config));
    if (!draft_model) {
      return InvalidArgument("speculative method draft_model: no draft model was loaded");
    }
  } else if (drafter) {
    if (config.num_speculative_tokens < 1 || config.num_speculative_tokens > spec::kMaxSpecTokens) {
      return InvalidArgument("speculative config: num_speculative_tokens must be in [1, 32]");
    }
  } else {
    ASSIGN_OR_RETURN(drafter, spec::MakeDrafter(config));
  }
  if (drafter) draft_model.reset();
  return std::unique_ptr<Speculator>(
      new Speculator(config, std::move(drafter), std::move(draft_model)));
}

void Speculator::Propose(Request* r, int num_running, int64_t max_model_len) {
  r->draft_tokens.clear();
  step_running_ = num_running;
  if (num_running >= config_.disable_by_batch_size) return;
  // The next step emits up to k + 1 tokens: all must fit max_tokens and the context.
  const int64_t room = std::min(r->max_tokens - r->num_output_tokens(),
                                max_model_len - static_cast<int64_t>(r->tokens.size())) -
                       1;
  const int limit = static_cast<int>(
      std::clamp<int64_t>(room, 0, static_cast<int64_t>(config_.num_speculative_tokens)));
  if (limit <= 0) return;
  auto it = controllers_.try_emplace(r->seq_id, config_.min_acceptance_rate).first;
  spec::DraftLengthController& c = it->second;
  int k = c.NextLength(limit);
  if (k <= 0) return;
  if (config_.min_acceptance_rate <= 0) {  // no cost rule: the controller's length
    if (draft_model_) {
      queued_.push_back({r, k});
    } else {
      drafter_->Propose(r->seq_id, r->tokens, r->num_prompt_tokens, k, &r->draft_tokens);
      CutDraftToGrammar(r);
    }
    return;
  }
  if (c.probing()) k = 1;
  // The cost rule decides in Flush, for the whole step at once: each draft token is priced at
  // the probability that it and the ones before it are accepted, the request's per-position
  // acceptance (alpha^(j+1)), lowered where the drafter's own estimate is lower.
  Candidate cand{r, c.probing(), {}};
  // (Capped as the controller's rate is: no run of acceptance makes a draft certain.)
  const double alpha = std::clamp(c.priced_alpha(), 0.0, kMaxAlpha);
  if (draft_model_) {
    double p = 1;
    for (int j = 0; j < k; ++j) cand.accept.push_back(p *= alpha);
  } else {
    std::vector<double> own;
    drafter_->ProposeScored(r->seq_id, r->tokens, r->num_prompt_tokens, k, &r->draft_tokens,
                            &own);
    CutDraftToGrammar(r);
    double p = 1;
    for (size_t j = 0; j < r->draft_tokens.size(); ++j) {
      p *= alpha;
      cand.accept.push_back(std::min(p, own[j]));
    }
    // Nothing to draft this step (no match): the request is a member without drafts.
    if (cand.accept.empty()) return;
    cand.drafter_lowered = own[0] < alpha;
  }
  pending_.push_back(std::move(cand));
}

void Speculator::Plan(int num_waiting) {
  if (pending_.empty()) return;
  std::vector<int> k(pending_.size(), 0);
  const int64_t rows = step_running_;
  if (cost_.Seconds(rows)) {
    // A probe (after a pause) drafts one token outside the rule: it keeps the request's
    // acceptance current, which the rule cannot learn otherwise (a rejected probe doubles the
    // next pause, so probes that fail cost ever less).
    std::vector<spec::DraftCandidate> planned;
    std::vector<size_t> index;
    for (size_t i = 0; i < pending_.size(); ++i) {
      if (pending_[i].probe) {
        k[i] = 1;
        continue;
      }
      planned.push_back({pending_[i].accept});
      index.push_back(i);
    }
    spec::StepPlanInput in;
    in.batch_rows = rows;
    in.num_idle = static_cast<int>(std::max<int64_t>(rows - static_cast<int64_t>(pending_.size()),
                                                     0)) +
                  (num_waiting > 0 ? 1 : 0);
    // Drafts must beat no drafts by 5%: step times are noisy, and losing is worse than
    // missing a small gain. A draft model's forward per draft position counts too (what it
    // took at this batch).
    in.margin = 1.05;
    in.tolerance = kTolerance;
    in.draft_seconds = draft_model_ ? draft_model_->cost().Seconds(rows).value_or(0.0) : 0.0;
    const std::vector<int> plan = spec::PlanDraftLengths(cost_, in, planned);
    for (size_t j = 0; j < plan.size(); ++j) k[index[j]] = plan[j];
  }
  for (size_t i = 0; i < pending_.size(); ++i) {
    Candidate& cand = pending_[i];
    Request* r = cand.request;
    if (k[i] == 0) {
      r->draft_tokens.clear();
      if (!cost_.Seconds(rows)) {
        // This step runs without drafts and shows what no drafts cost at this batch. A draft
        // model still takes in a sequence's prompt right after the target did (in the step
        // that computed it, as when the cost is known), not in the next step's drafting round.
        if (draft_model_ && r->num_output_tokens() == 1) queued_.push_back({r, 0});
      } else if (!cand.probe && !cand.drafter_lowered) {
        // No length pays at the request's acceptance: pause, then probe, at most as often as
        // keeps its probes' rows within kProbeBudget of its time. (A draft the drafter itself
        // doubts is skipped without a pause: the next one may be a good match.)
        spec::DraftLengthController& c = controllers_.at(r->seq_id);
        c.DeclineForCost(spec::ProbePause(cost_, rows, c.priced_alpha(), kProbeBudget));
      }
      continue;
    }
    if (draft_model_) {
      queued_.push_back({r, k[i]});
    } else {
      r->draft_tokens.resize(static_cast<size_t>(k[i]));
    }
    if (cand.drafter_lowered && !cand.probe) doubted_.insert(r->seq_id);
  }
  pending_.clear();
}

void Speculator::Verified(const Request& r, int drafted, int accepted) {
  if (drafted <= 0) return;
  stats_.Record(drafted, accepted);
  auto it = controllers_.find(r.seq_id);
  const bool doubted = doubted_.erase(r.seq_id) > 0;
  if (it != controllers_.end()) it->second.Record(drafted, accepted, doubted);
  if (draft_model_) draft_model_->Reconcile(r);
}

void Speculator::Flush(int num_waiting) {
  Plan(num_waiting);
  if (queued_.empty()) return;
  Status st = draft_model_->Propose(queued_);
  for (const DraftModelRunner::Job& job : queued_) CutDraftToGrammar(job.request);
  queued_.clear();
  stats_.num_draft_forwards = draft_model_->num_forwards();
  stats_.draft_seconds = draft_model_->forward_seconds();
  if (!st.ok()) TLOG(WARN) << "draft model: " << st.ToString() << " (no drafts this step)";
}

spec::SpecStats Speculator::stats() const {
  spec::SpecStats s = stats_;
  s.step_seconds.assign(static_cast<size_t>(config_.num_speculative_tokens) + 1, 0.0);
  for (size_t r = 0; r < s.step_seconds.size(); ++r) {
    s.step_seconds[r] = cost_.Measured(static_cast<int64_t>(r) + 1).value_or(0.0);
  }
  if (draft_model_) s.draft_forward_seconds = draft_model_->cost().Measured(1).value_or(0.0);
  return s;
}

std::span<const float> Speculator::DraftProbs(const Request& r, int j) const {
  return draft_model_ ? draft_model_->DraftProbs(r.seq_id, j) : std::span<const float>();
}

void Speculator::Preempted(int64_t seq_id) {
  if (draft_model_) draft_model_->Free(seq_id);
}

void Speculator::Release(const Request& r) {
  controllers_.erase(r.seq_id);
  doubted_.erase(r.seq_id);
  if (drafter_) drafter_->Release(r.seq_id, r.tokens, r.num_prompt_tokens);
  if (draft_model_) draft_model_->Free(r.seq_id);
}

}  // namespace tachyon::engine
