// FakeGrammar: a grammar::CompiledGrammar for engine tests whose sentences are a fixed set of
// token sequences ("choices"), with no tokenizer involved. At each point the allowed tokens are
// the next tokens of the choices the output so far is a prefix of, plus the EOS ids once the
// output equals a choice (CanTerminate); the output is terminated once it equals a choice that
// no other extends, or after an EOS. Matchers count their calls and record the threads their
// masks were filled on (shared stats, thread-safe), and `reject` makes AcceptToken refuse that
// token even though the mask allows it (a faulty matcher). Unlike the real grammars, matchers do
// not keep their FakeGrammar alive: the test holds it while the engine runs.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "grammar/grammar.h"

namespace tachyon::engine::testing {

struct FakeGrammarStats {
  std::atomic<int64_t> fills{0};
  std::atomic<int64_t> accepts{0};
  std::mutex mu;
  std::set<std::thread::id> fill_threads;  // GUARDED_BY(mu)
};

class FakeGrammar : public grammar::CompiledGrammar {
 public:
  FakeGrammar(std::vector<std::vector<int32_t>> choices,
              std::vector<int32_t> eos_ids, int32_t reject = -1);

  std::unique_ptr<grammar::TokenMatcher> NewMatcher() const override;

  // Whether `tokens` (EOS excluded) is one of the choices.
  bool IsSentence(const std::vector<int32_t>& tokens) const;
  FakeGrammarStats& stats() const { return *stats_; }

 private:
  std::vector<std::vector<int32_t>> choices_;
  std::vector<int32_t> eos_ids_;
  int32_t reject_;
  std::shared_ptr<FakeGrammarStats> stats_ = std::make_shared<FakeGrammarStats>();
};

}  // namespace tachyon::engine::testing
