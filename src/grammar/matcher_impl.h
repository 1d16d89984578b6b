// The real TokenMatcher (internal): a Recognizer over the grammar's FlatGrammar, one Config
// per accepted token (so Rollback is popping), masks from the grammar's per-position token
// classes plus a check of the uncertain tokens against the real stacks.
#pragma once

#include <memory>
#include <vector>

#include "grammar/compiled.h"
#include "grammar/matcher.h"
#include "grammar/recognizer.h"

namespace tachyon::grammar {

class Matcher final : public TokenMatcher {
 public:
  explicit Matcher(std::shared_ptr<const GrammarImpl> grammar);

  void FillNextTokenBitmask(std::span<uint32_t> bitmask) override;
  bool AcceptToken(int32_t token) override;
  void Rollback(int n) override;
  bool CanTerminate() const override { return steps_.back().cfg.accepting; }
  bool IsTerminated() const override {
    const Step& s = steps_.back();
    return s.ended || (s.cfg.heads.empty() && s.cfg.accepting);
  }

 private:
  struct Step {
    Config cfg;
    size_t arena_size;  // arena nodes in use by this and earlier steps
    bool ended;         // an end-of-generation token was accepted
  };
  std::shared_ptr<const GrammarImpl> grammar_;
  StackArena arena_;
  Recognizer rec_;
  std::vector<Step> steps_;  // steps_[0]: the start; back(): now
  Config a_, b_;             // scratch
  std::vector<int32_t> positions_;
  std::vector<uint32_t> checked_;
};

}  // namespace tachyon::grammar
