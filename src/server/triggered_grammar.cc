#include "server/triggered_grammar.h"

#include <algorithm>

namespace tachyon::server {
namespace {

constexpr size_t kMaxTrigger = 64;

class TriggeredMatcher final : public grammar::TokenMatcher {
 public:
  TriggeredMatcher(std::shared_ptr<const TriggerTable> table,
                   std::shared_ptr<const grammar::CompiledGrammar> inner, bool free_may_end)
      : table_(std::move(table)), inner_grammar_(std::move(inner)), free_may_end_(free_may_end) {}

  void FillNextTokenBitmask(std::span<uint32_t> bitmask) override {
    if (inner_) return inner_->FillNextTokenBitmask(bitmask);
    const size_t n = static_cast<size_t>(table_->vocab_size());
    const size_t full = std::min(n / 32, bitmask.size());
    std::fill(bitmask.begin(), bitmask.begin() + full, ~0u);
    std::fill(bitmask.begin() + full, bitmask.end(), 0u);
    if (n % 32 != 0 && full < bitmask.size()) bitmask[full] = (1u << (n % 32)) - 1;
    for (int32_t id : table_->banned(k_)) {
      if (static_cast<size_t>(id / 32) < bitmask.size()) bitmask[id / 32] &= ~(1u << (id % 32));
    }
  }

  bool AcceptToken(int32_t token) override {
    if (inner_) {
      if (!inner_->AcceptToken(token)) return false;
      steps_.push_back({k_, kInner});
      return true;
    }
    if (token < 0 || token >= table_->vocab_size()) return false;
    bool mid = false;
    const int k = table_->AfterToken(k_, token, &mid);
    if (mid) return false;
    const bool triggered = k == static_cast<int>(table_->trigger().size());
    steps_.push_back({k_, triggered ? kTrigger : kFree});
    k_ = triggered ? 0 : k;
    if (triggered) {
      inner_ = inner_grammar_->NewMatcher();
      // The inner grammar gets what is left of the limit.
      if (limit_ >= 0) {
        inner_->SetTokenLimit(std::max<int64_t>(0, limit_ - static_cast<int64_t>(steps_.size())));
      }
    }
    return true;
  }

  void SetTokenLimit(int64_t n) override {
    limit_ = n < 0 ? -1 : static_cast<int64_t>(steps_.size()) + n;
    if (inner_) inner_->SetTokenLimit(n);
  }

  void Rollback(int n) override {
    int inner_steps = 0;
    for (; n > 0 && !steps_.empty(); --n) {
      const Step s = steps_.back();
      steps_.pop_back();
      if (s.kind == kInner) {
        ++inner_steps;
        continue;
      }
      if (s.kind == kTrigger) {
        inner_.reset();
        inner_steps = 0;
      }
      k_ = s.k_before;
    }
    if (inner_ && inner_steps > 0) inner_->Rollback(inner_steps);
  }

  bool CanTerminate() const override { return inner_ ? inner_->CanTerminate() : free_may_end_; }
  bool IsTerminated() const override { return inner_ && inner_->IsTerminated(); }

 private:
  enum Kind : uint8_t { kFree, kTrigger, kInner };
  struct Step {
    int k_before;
    Kind kind;
  };
  std::shared_ptr<const TriggerTable> table_;
  std::shared_ptr<const grammar::CompiledGrammar> inner_grammar_;
  bool free_may_end_;
  int64_t limit_ = -1;  // SetTokenLimit: steps_.size() may reach this (-1: no limit)
  int k_ = 0;           // the free phase's partial match of the trigger
  std::unique_ptr<grammar::TokenMatcher> inner_;  // after the trigger
  std::vector<Step> steps_;
};

}  // namespace

Result<std::shared_ptr<const TriggerTable>> TriggerTable::Build(
    std::shared_ptr<const std::vector<std::string>> token_bytes, std::string trigger) {
  if (trigger.empty() || trigger.size() > kMaxTrigger) {
    return InvalidArgument("a trigger must have 1 to 64 bytes");
  }
  std::shared_ptr<TriggerTable> t(new TriggerTable());
  t->bytes_ = std::move(token_bytes);
  t->trigger_ = std::move(trigger);
  const std::string& s = t->trigger_;
  const size_t len = s.size();
  // Knuth-Morris-Pratt: fail[i] = the longest proper border of s[0, i).
  std::vector<size_t> fail(len + 1, 0);
  for (size_t i = 1, b = 0; i < len; ++i) {
    while (b > 0 && s[i] != s[b]) b = fail[b];
    if (s[i] == s[b]) ++b;
    fail[i + 1] = b;
  }
  t->next_.resize(len * 256);
  for (size_t k = 0; k < len; ++k) {
    for (int c = 0; c < 256; ++c) {
      size_t j = k;
      while (j > 0 && static_cast<unsigned char>(s[j]) != c) j = fail[j];
      if (static_cast<unsigned char>(s[j]) == c) ++j;
      t->next_[k * 256 + static_cast<size_t>(c)] = static_cast<uint8_t>(j);
    }
  }
  t->banned_.resize(len);
  const unsigned char last = static_cast<unsigned char>(s.back());
  const auto& bytes = *t->bytes_;
  for (size_t id = 0; id < bytes.size(); ++id) {
    const std::string& b = bytes[id];
    // Only a token holding the trigger's last byte before its own last byte can complete the
    // trigger mid-token.
    if (b.size() < 2 || b.find(static_cast<char>(last)) >= b.size() - 1) continue;
    for (size_t k = 0; k < len; ++k) {
      bool mid = false;
      t->AfterToken(static_cast<int>(k), static_cast<int32_t>(id), &mid);
      if (mid) t->banned_[k].push_back(static_cast<int32_t>(id));
    }
  }
  return std::shared_ptr<const TriggerTable>(std::move(t));
}

int TriggerTable::AfterToken(int k, int32_t id, bool* mid) const {
  const std::string& b = (*bytes_)[static_cast<size_t>(id)];
  const int len = static_cast<int>(trigger_.size());
  *mid = false;
  for (size_t i = 0; i < b.size(); ++i) {
    k = Next(k, static_cast<unsigned char>(b[i]));
    if (k == len) {
      *mid = i + 1 < b.size();
      return k;
    }
  }
  return k;
}

TriggeredGrammar::TriggeredGrammar(std::shared_ptr<const TriggerTable> table,
                                   std::shared_ptr<const grammar::CompiledGrammar> inner,
                                   bool free_may_end)
    : table_(std::move(table)), inner_(std::move(inner)), free_may_end_(free_may_end) {}

std::unique_ptr<grammar::TokenMatcher> TriggeredGrammar::NewMatcher() const {
  return std::make_unique<TriggeredMatcher>(table_, inner_, free_may_end_);
}

}  // namespace tachyon::server
