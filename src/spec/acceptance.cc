#include "spec/acceptance.h"

#include <algorithm>
#include <cmath>

namespace tachyon::spec {

void SpecStats::Record(int drafted, int accepted) {
  if (drafted <= 0) return;
  ++num_drafts;
  num_draft_tokens += drafted;
  num_accepted_tokens += accepted;
  if (accepted_per_position.size() < static_cast<size_t>(drafted)) {
    accepted_per_position.resize(static_cast<size_t>(drafted), 0);
  }
  for (int i = 0; i < accepted; ++i) ++accepted_per_position[static_cast<size_t>(i)];
}

int DraftLengthController::NextLength(int max_tokens) {
  if (max_tokens <= 0) return 0;
  if (pause_left_ > 0) {
    --pause_left_;
    return 0;
  }
  const double r = std::min(rate_, 0.95);
  const int run = static_cast<int>(std::floor(r / (1.0 - r))) + 1;
  return std::clamp(std::max(run, 2 * full_run_), 1, max_tokens);
}

void DraftLengthController::Record(int drafted, int accepted, bool doubted) {
  if (drafted <= 0) return;
  const double share = static_cast<double>(accepted) / drafted;
  const double kept = static_cast<double>(accepted) / std::min(accepted + 1, drafted);
  // alpha (which prices longer drafts) always moves by kWeight from its optimistic start, so
  // neither one lucky probe buys a long draft nor one early miss (the first draft of a copy
  // that starts a few tokens later) stops drafting.
  alpha_ = (1 - kWeight) * alpha_ + kWeight * kept;
  ++num_drafts_;
  full_run_ = accepted == drafted ? drafted : 0;
  if (cost_probe_) {
    next_cost_pause_ = accepted > 0 ? kCostPause : std::min(2 * next_cost_pause_, kMaxCostPause);
  }
  cost_probe_ = false;
  if (doubted && !probing_) return;
  // The first counted draft, and the probe after a pause, set the rate alone.
  rate_ = num_rated_ == 0 || probing_ ? share : (1 - kWeight) * rate_ + kWeight * share;
  probing_ = false;
  ++num_rated_;
  if (num_rated_ < kWarmupDrafts) return;
  if (rate_ < min_rate_) {
    Decline();
  } else {
    next_pause_ = 16;
  }
}

void DraftLengthController::DeclineForCost(int min_pause) {
  pause_left_ = std::max(next_cost_pause_, std::min(min_pause, kMaxCostPause));
  cost_probe_ = true;
}

void DraftLengthController::Decline() {
  pause_left_ = next_pause_;
  next_pause_ = std::min(next_pause_ * 2, 1024);
  probing_ = true;
}

}  // namespace tachyon::spec
