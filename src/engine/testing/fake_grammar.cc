#include "engine/testing/fake_grammar.h"

#include <algorithm>

namespace tachyon::engine::testing {
namespace {

class FakeMatcher : public grammar::TokenMatcher {
 public:
  FakeMatcher(const std::vector<std::vector<int32_t>>* choices, const std::vector<int32_t>* eos,
              int32_t reject, std::shared_ptr<FakeGrammarStats> stats)
      : choices_(choices), eos_(eos), reject_(reject), stats_(std::move(stats)) {}

  void FillNextTokenBitmask(std::span<uint32_t> bitmask) override {
    ++stats_->fills;
    {
      std::lock_guard<std::mutex> lock(stats_->mu);
      stats_->fill_threads.insert(std::this_thread::get_id());
    }
    std::fill(bitmask.begin(), bitmask.end(), 0u);
    auto set = [&](int32_t t) { bitmask[t / 32] |= 1u << (t % 32); };
    if (eos_accepted_) return;
    for (const auto& c : *choices_) {
      if (!IsPrefix(c)) continue;
      if (c.size() > out_.size()) set(c[out_.size()]);
    }
    if (CanTerminate()) {
      for (int32_t e : *eos_) set(e);
    }
  }

  bool AcceptToken(int32_t token) override {
    if (token == reject_ || eos_accepted_) return false;
    if (std::find(eos_->begin(), eos_->end(), token) != eos_->end()) {
      if (!CanTerminate()) return false;
      eos_accepted_ = true;
      history_.push_back(-1);
      ++stats_->accepts;
      return true;
    }
    bool ok = false;
    for (const auto& c : *choices_) {
      ok = ok || (IsPrefix(c) && c.size() > out_.size() && c[out_.size()] == token);
    }
    if (!ok) return false;
    out_.push_back(token);
    history_.push_back(token);
    ++stats_->accepts;
    return true;
  }

  void Rollback(int n) override {
    for (int i = 0; i < n; ++i) {
      if (history_.back() == -1) {
        eos_accepted_ = false;
      } else {
        out_.pop_back();
      }
      history_.pop_back();
    }
  }

  bool CanTerminate() const override {
    for (const auto& c : *choices_) {
      if (c == out_) return true;
    }
    return false;
  }

  bool IsTerminated() const override {
    if (eos_accepted_) return true;
    if (!CanTerminate()) return false;
    for (const auto& c : *choices_) {
      if (c.size() > out_.size() && IsPrefix(c)) return false;
    }
    return true;
  }

 private:
  bool IsPrefix(const std::vector<int32_t>& c) const {
    return c.size() >= out_.size() && std::equal(out_.begin(), out_.end(), c.begin());
  }

  const std::vector<std::vector<int32_t>>* choices_;
  const std::vector<int32_t>* eos_;
  int32_t reject_;
  std::shared_ptr<FakeGrammarStats> stats_;
  std::vector<int32_t> out_;
  std::vector<int32_t> history_;  // accepted tokens, -1 = EOS
  bool eos_accepted_ = false;
};

}  // namespace

FakeGrammar::FakeGrammar(std::vector<std::vector<int32_t>> choices, std::vector<int32_t> eos_ids,
                         int32_t reject)
    : choices_(std::move(choices)),
      eos_ids_(std::move(eos_ids)),
      reject_(reject) {}

std::unique_ptr<grammar::TokenMatcher> FakeGrammar::NewMatcher() const {
  return std::make_unique<FakeMatcher>(&choices_, &eos_ids_, reject_, stats_);
}

bool FakeGrammar::IsSentence(const std::vector<int32_t>& tokens) const {
  return std::find(choices_.begin(), choices_.end(), tokens) != choices_.end();
}

}  // namespace tachyon::engine::testing
