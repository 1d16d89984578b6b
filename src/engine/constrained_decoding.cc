#include "engine/constrained_decoding.h"

#include <algorithm>
#include <string>

namespace tachyon::engine {

MaskWorker::MaskWorker(int32_t n_vocab) : words_((static_cast<size_t>(n_vocab) + 31) / 32) {}

MaskWorker::~MaskWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void MaskWorker::Start(const SchedulerOutput& out) {
  jobs_.clear();
  slot_.assign(out.seqs.size(), -1);
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    const ScheduledSeq& s = out.seqs[i];
    if (!s.sample || !s.request->matcher) continue;
    slot_[i] = static_cast<int>(jobs_.size());
    jobs_.push_back(s.request->matcher.get());
  }
  if (jobs_.empty()) return;
  if (storage_.size() < jobs_.size() * words_) storage_.resize(jobs_.size() * words_);
  if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_ = true;
  }
  cv_.notify_all();
}

void MaskWorker::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !pending_; });
}

std::span<const uint32_t> MaskWorker::Mask(size_t i) const {
  if (i >= slot_.size() || slot_[i] < 0) return {};
  return std::span<const uint32_t>(storage_).subspan(static_cast<size_t>(slot_[i]) * words_,
                                                     words_);
}

void MaskWorker::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return pending_ || stop_; });
    if (stop_) return;
    lock.unlock();
    // jobs_ and storage_ are not touched by the engine thread until pending_ clears.
    for (size_t j = 0; j < jobs_.size(); ++j) {
      std::span<uint32_t> mask = std::span<uint32_t>(storage_).subspan(j * words_, words_);
      std::fill(mask.begin(), mask.end(), 0u);  // words past the grammar's vocabulary stay 0
      jobs_[j]->FillNextTokenBitmask(mask);
    }
    lock.lock();
    pending_ = false;
    cv_.notify_all();
  }
}

Result<std::unique_ptr<grammar::TokenMatcher>> NewChoiceMatcher(
    const grammar::CompiledGrammar& grammar, std::span<const int32_t> resumed,
    int64_t token_limit) {
  std::unique_ptr<grammar::TokenMatcher> m = grammar.NewMatcher();
  for (size_t i = 0; i < resumed.size(); ++i) {
    if (!m->AcceptToken(resumed[i])) {
      return InvalidArgument("resumed output token " + std::to_string(resumed[i]) + " (position " +
                             std::to_string(i) +
                             ") is not allowed by the request's output constraint");
    }
  }
  if (!resumed.empty() && m->IsTerminated()) {
    return InvalidArgument(
        "the resumed output tokens already complete the request's output constraint");
  }
  if (token_limit >= 0) m->SetTokenLimit(token_limit);
  return m;
}

GrammarVerdict AcceptSampled(Request* r, int32_t token) {
  grammar::TokenMatcher& m = *r->matcher;
  if (!m.AcceptToken(token)) return GrammarVerdict::kRejected;
  return m.IsTerminated() ? GrammarVerdict::kTerminated : GrammarVerdict::kContinue;
}

}  // namespace tachyon::engine
