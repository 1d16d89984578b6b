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
  if (config_.min_acceptance_rate > 0) {
    if (c.probing()) {
      k = 1;
    } else if (!cost_.Seconds(num_running)) {
      // This step runs without drafts and shows what no drafts cost at this batch. A draft
      // model still takes in a sequence's prompt right after the target did (in the step that
      // computed it, as when the cost is known), not in the next step's drafting round.
      if (draft_model_ && r->num_output_tokens() == 1) queued_.push_back({r, 0});
      return;
    } else {
      // Drafts must beat no drafts by 5%: step times are noisy, and losing is worse than
      // missing a small gain. The rows other sequences drafted for the same step count.
      // A draft model's forward per drafted token counts too (what it took at this batch),
      // beyond the forwards the drafts already proposed for this step run anyway.
      const double draft_s =
          draft_model_ ? draft_model_->cost().Seconds(num_running).value_or(0.0) : 0.0;
      k = spec::CostAwareDraftLength(cost_, num_running + step_draft_rows_, c.alpha(), k,
                                     /*margin=*/1.05, draft_s, step_max_draft_);
      if (k == 0) {
        c.DeclineForCost();
        return;
      }
    }
  }
  step_draft_rows_ += k;
  step_max_draft_ = std::max(step_max_draft_, k);
  if (draft_model_) {
    queued_.push_back({r, k});
    return;
  }
  drafter_->Propose(r->seq_id, r->tokens, r->num_prompt_tokens, k, &r->draft_tokens);
  CutDraftToGrammar(r);
}

void Speculator::Verified(const Request& r, int drafted, int accepted) {
  if (drafted <= 0) return;
  stats_.Record(drafted, accepted);
  auto it = controllers_.find(r.seq_id);
  if (it != controllers_.end()) it->second.Record(drafted, accepted);
  if (draft_model_) draft_model_->Reconcile(r);
}

void Speculator::Flush() {
  step_draft_rows_ = 0;
  step_max_draft_ = 0;
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
  if (drafter_) drafter_->Release(r.seq_id, r.tokens, r.num_prompt_tokens);
  if (draft_model_) draft_model_->Free(r.seq_id);
}

}  // namespace tachyon::engine
