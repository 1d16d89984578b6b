// The real TokenMatcher (internal): a Recognizer over the grammar's FlatGrammar, one Config
// per accepted token (so Rollback is popping), masks from the grammar's per-position token
// classes plus a check of the uncertain tokens against the real stacks.
#pragma once

#include <memory>
#include <string>
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
  // Computes the mask of the current configuration (no cache) into `bitmask`.
  void ComputeMask(std::span<uint32_t> bitmask);
  // Sets the uncertain tokens (sorted by trie rank) that the real stacks accept.
  void CheckUncertain(const std::vector<int32_t>& ranks, std::span<uint32_t> bitmask);

  Config a_, b_;                              // scratch
  std::vector<std::vector<int32_t>> chains_;  // per head: its positions up to the root
  std::vector<int32_t> prefix_, uncertain_;
  std::vector<Config> path_cfg_;
  std::string key_, path_;
};

}  // namespace tachyon::grammar
