#include "engine/speculative_step.h"

#include <algorithm>

namespace tachyon::engine {

Result<std::unique_ptr<Speculator>> Speculator::Create(const spec::SpeculativeConfig& config,
                                                       std::unique_ptr<spec::Drafter> drafter) {
  if (drafter) {
    if (config.num_speculative_tokens < 1 || config.num_speculative_tokens > spec::kMaxSpecTokens) {
      return InvalidArgument("speculative config: num_speculative_tokens must be in [1, 32]");
    }
  } else {
    ASSIGN_OR_RETURN(drafter, spec::MakeDrafter(config));
  }
  return std::unique_ptr<Speculator>(new Speculator(config, std::move(drafter)));
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
      return;  // this step runs without drafts and shows what no drafts cost at this batch
    } else {
      // Drafts must beat no drafts by 5%: step times are noisy, and losing is worse than
      // missing a small gain.
      k = spec::CostAwareDraftLength(cost_, num_running, c.alpha(), k, /*margin=*/1.05);
      if (k == 0) {
        c.Decline();
        return;
      }
    }
  }
  drafter_->Propose(r->seq_id, r->tokens, r->num_prompt_tokens, k, &r->draft_tokens);
}

void Speculator::Verified(const Request& r, int drafted, int accepted) {
  if (drafted <= 0) return;
  stats_.Record(drafted, accepted);
  auto it = controllers_.find(r.seq_id);
  if (it != controllers_.end()) it->second.Record(drafted, accepted);
}

void Speculator::Release(const Request& r) {
  controllers_.erase(r.seq_id);
  drafter_->Release(r.seq_id, r.tokens, r.num_prompt_tokens);
}

}  // namespace tachyon::engine
