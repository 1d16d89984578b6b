// The real CompiledGrammar (internal): a FlatGrammar bound to a Vocabulary, with the token
// classes and the mask cache the matchers share.
//
// Token classes. A head's stack is a chain of element positions (the head's, its
// continuation's, ...). Cut after `depth` positions, with the rest replaced by an unknown
// caller, the truncated stack sorts every token by a walk over the vocabulary trie:
//   accepted  - some parse consumes all its bytes inside the truncated stack (or the stack's
//               bottom rule ends exactly at its last byte: every caller can continue then, as
//               Finish() keeps only rules that can complete);
//   uncertain - not accepted, but some parse returned into the unknown caller with bytes still
//               to come: the matcher checks these against its real stacks;
//   rejected  - everything else.
// A chain that reaches the root is exact (nothing is uncertain). The depth adapts: the matcher
// uses kShallowDepth positions unless that class leaves more than kMaxUncertain tokens
// uncertain, then the whole chain, so string and number loops are resolved by what follows
// them. Classes depend only on
// the truncated chain, so they are computed once per grammar and vocabulary, on first use, and
// shared by every matcher.
//
// Classes are kept up to kClassCacheBytes per grammar (then that cache starts over).
//
// Mask cache: a whole configuration (every head's full chain, and whether the root may end) is
// an exact key for its mask; masks are cached per grammar up to kMaskCacheBytes (then the cache
// starts over).
//
// Thread-safety: immutable except the two caches, each behind its mutex (computations run
// outside the locks; two threads may compute the same entry, the first insert wins).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/ir.h"
#include "grammar/vocabulary.h"

namespace tachyon::grammar {

struct TokenClass {
  // Accepted tokens: a bitmask of Vocabulary::mask_words() words when dense, else a list
  // (at most one of the two is non-empty).
  std::vector<uint32_t> accept_bits;
  std::vector<int32_t> accept_list;
  std::vector<int32_t> uncertain;  // in trie (sorted-bytes) order
};

class GrammarImpl final : public CompiledGrammar, public std::enable_shared_from_this<GrammarImpl> {
 public:
  static constexpr size_t kShallowDepth = 6;
  static constexpr size_t kMaxUncertain = 256;
  static constexpr size_t kMaskCacheBytes = size_t{8} << 20;
  static constexpr size_t kClassCacheBytes = size_t{64} << 20;

  GrammarImpl(FlatGrammar g, std::shared_ptr<const Vocabulary> vocab);

  std::unique_ptr<TokenMatcher> NewMatcher() const override;

  const FlatGrammar& grammar() const { return g_; }
  const Vocabulary& vocab() const { return *vocab_; }

  // The class of a truncated stack: chain[0] is the head's position (a kBytes element),
  // chain[i + 1] the continuation of chain[i]; `exact`: the last one's caller is the root
  // (else an unknown caller).
  std::shared_ptr<const TokenClass> Class(const std::vector<int32_t>& chain, bool exact) const;

  // The cached mask for a configuration key, or null.
  std::shared_ptr<const std::vector<uint32_t>> CachedMask(const std::string& key) const;
  void CacheMask(const std::string& key, std::shared_ptr<const std::vector<uint32_t>> mask) const;

 private:
  TokenClass ComputeClass(const std::vector<int32_t>& chain, bool exact) const;

  const FlatGrammar g_;
  const std::shared_ptr<const Vocabulary> vocab_;
  mutable std::mutex class_mu_;
  mutable std::unordered_map<std::string, std::shared_ptr<const TokenClass>> classes_;
  mutable size_t class_bytes_ = 0;
  mutable std::mutex mask_mu_;
  mutable std::unordered_map<std::string, std::shared_ptr<const std::vector<uint32_t>>> masks_;
  mutable size_t mask_bytes_ = 0;
};

}  // namespace tachyon::grammar
