// The real TokenMatcher (internal): a Recognizer over the grammar's FlatGrammar, one Config
// per accepted token (so Rollback is popping), masks from the grammar's token classes plus a
// check of their popped suffixes (and of long tokens near a repetition bound) against the
// real stacks.
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
  void SetTokenLimit(int64_t n) override {
    limit_step_ = n < 0 ? -1 : static_cast<int64_t>(steps_.size()) - 1 + n;
  }
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
  int64_t limit_step_ = -1;  // SetTokenLimit: the last step index allowed (-1: none)
  // Leaves in `bitmask` (the grammar's mask now) the tokens that keep an end within the
  // token limit (length_limit.h). REQUIRES: key_ is the current configuration's key.
  void ApplyTokenLimit(std::span<uint32_t> bitmask);
  // The current configuration's LengthInfo over the tokens longer than min_len (cached per
  // configuration key and min_len, like masks). REQUIRES: key_ as for ApplyTokenLimit.
  std::shared_ptr<const LengthInfo> LengthInfoFor(uint32_t min_len);
  // Computes the mask of the current configuration (no cache) into `bitmask`.
  void ComputeMask(std::span<uint32_t> bitmask);
  // Adds head h's classes for its chain cut after `depth` positions; false (nothing added)
  // when a class pops too many tokens and depth is not the whole chain.
  bool AddHeadClasses(size_t h, size_t depth, std::span<uint32_t> bitmask);
  // Adds one class of head h (prefix_: its chain in class form): accepted tokens, long ones
  // within `headroom` (others to uncertain_), popped suffixes the real caller accepts; only
  // tokens of at most max_len bytes when max_len < Vocabulary::kLengthMasks.
  void AddClass(const TokenClass& cls, size_t h, size_t depth, int32_t headroom, int32_t max_len,
                std::span<uint32_t> bitmask);
  // Sets the uncertain tokens (sorted by trie rank) that the real stacks accept.
  void CheckUncertain(const std::vector<int32_t>& ranks, std::span<uint32_t> bitmask);
  // Advances `start` through strings bytes(0) .. bytes(n - 1), given in sorted order (shared
  // prefixes are walked once); accept(i) for each string the recognizer accepts (all bytes
  // consumed leaving a head, or ending exactly where the root may end); skip(i): string i need
  // not be checked.
  template <typename Bytes, typename Skip, typename Accept>
  void WalkSorted(const Config& start, size_t n, Bytes bytes, Skip skip, Accept accept);

  Config a_, b_;                                 // scratch
  std::vector<std::vector<ChainEntry>> chains_;  // per head: its positions up to the root
  std::vector<int32_t> order_;                   // head indices by chain
  std::vector<ChainEntry> prefix_, far_prefix_;
  std::vector<int32_t> uncertain_;
  Config caller_cfg_;
  std::string pop_key_;
  std::vector<Config> path_cfg_;
  std::string key_, path_, length_key_;
  std::vector<int32_t> ceiling_chain_;
};

}  // namespace tachyon::grammar
