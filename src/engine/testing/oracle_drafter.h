// OracleDrafter: a test drafter that knows the right answer. `truth(seq_id, tokens)` returns the
// token the engine will emit after `tokens` (tests compute it from FakeModelExecutor::LogitsFor
// and the request's sampler); the drafter proposes that continuation, then spoils one position
// of some drafts (chosen by a hash of the sequence and its length) so that full acceptance,
// rejection at every position and the bonus token all occur. Header-only; for tests.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "spec/drafter.h"

namespace tachyon::engine::testing {

class OracleDrafter : public spec::Drafter {
 public:
  using Truth = std::function<int32_t(int64_t seq_id, std::span<const int32_t> tokens)>;
  OracleDrafter(int32_t n_vocab, Truth truth) : n_vocab_(n_vocab), truth_(std::move(truth)) {}

  void Propose(int64_t seq_id, std::span<const int32_t> tokens, int64_t num_prompt_tokens,
               int max_tokens, std::vector<int32_t>* draft) override {
    (void)num_prompt_tokens;
    ++num_calls_;
    std::vector<int32_t> t(tokens.begin(), tokens.end());
    // Spoil position `bad` (bad >= max_tokens: a fully right draft).
    const uint64_t h = (static_cast<uint64_t>(seq_id) * 0x9e3779b97f4a7c15ULL) ^ (t.size() * 31);
    const int bad = static_cast<int>((h >> 7) % static_cast<uint64_t>(max_tokens + 2));
    for (int j = 0; j < max_tokens; ++j) {
      int32_t next = truth_(seq_id, t);
      if (j == bad) next = (next + 1) % n_vocab_;
      draft->push_back(next);
      t.push_back(next);
    }
  }
  int num_calls() const { return num_calls_; }

 private:
  int32_t n_vocab_;
  Truth truth_;
  int num_calls_ = 0;
};

}  // namespace tachyon::engine::testing
