// The real CompiledGrammar (internal): a FlatGrammar bound to a Vocabulary, with the
// per-position token classes the masks are built from.
//
// Token classes: for a head at byte-set element `pos`, walking the vocabulary's trie from a
// frame at `pos` with an unknown caller sorts every token into
//   accepted  - some parse consumes all its bytes inside the frame (or the frame's rule ends
//               exactly at its last byte: every caller can then continue, as Finish() keeps
//               only rules that can complete);
//   uncertain - not accepted, but some parse leaves the frame with bytes still to come: the
//               caller decides, so the matcher checks these against its real stacks;
//   rejected  - everything else.
// The classes depend only on `pos` (never on the caller), so they are computed once per
// grammar and vocabulary, lazily on first use, and shared by every matcher.
//
// Thread-safety: immutable except the class cache, which is filled under std::call_once.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/ir.h"
#include "grammar/vocabulary.h"

namespace tachyon::grammar {

struct TokenClass {
  // Accepted tokens: a bitmask of Vocabulary::mask_words() words when dense, else a list
  // (exactly one of the two is non-empty, or both empty when none is accepted).
  std::vector<uint32_t> accept_bits;
  std::vector<int32_t> accept_list;
  std::vector<int32_t> uncertain;
};

class GrammarImpl final : public CompiledGrammar, public std::enable_shared_from_this<GrammarImpl> {
 public:
  GrammarImpl(FlatGrammar g, std::shared_ptr<const Vocabulary> vocab);

  std::unique_ptr<TokenMatcher> NewMatcher() const override;

  const FlatGrammar& grammar() const { return g_; }
  const Vocabulary& vocab() const { return *vocab_; }
  // The token class of a head at element `pos`. REQUIRES: elems[pos] is kBytes.
  const TokenClass& Class(int32_t pos) const;

 private:
  TokenClass ComputeClass(int32_t pos) const;

  const FlatGrammar g_;
  const std::shared_ptr<const Vocabulary> vocab_;
  struct Slot {
    std::once_flag once;
    TokenClass cls;
  };
  std::unique_ptr<Slot[]> slots_;  // one per element
};

}  // namespace tachyon::grammar
