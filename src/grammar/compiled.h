// The real CompiledGrammar (internal): a FlatGrammar bound to a Vocabulary, with the token
// classes and the mask cache the matchers share.
//
// Token classes. A head's stack is a chain of element positions (the head's, its
// continuation's, ...). Cut after `depth` positions, with the rest replaced by an unknown
// caller, the truncated stack sorts every token by a walk over the vocabulary trie:
//   accepted  - some parse consumes all its bytes inside the truncated stack (or the stack's
//               bottom rule ends exactly at its last byte: every caller can continue then, as
//               Finish() keeps only rules that can complete);
//   popped    - not accepted, but some parse returned into the unknown caller after k bytes
//               with bytes still to come: the token is allowed iff the real caller (the node
//               at `depth` in the head's stack) accepts its suffix from k on, for some such k.
//               Popped tokens are grouped by suffix (many share one: `",` `"}` after a
//               string), so the matcher checks each distinct suffix once from the caller;
//   rejected  - everything else.
// A chain that reaches the root is exact (nothing pops). The matcher uses kShallowDepth
// positions (a string's content and its closing quote, shared by every property that holds
// such a string) unless that class pops more than kMaxPopped tokens, then the whole chain. Classes
// depend only on the truncated chain, so they are computed once per grammar and vocabulary, on
// first use, and shared by every matcher.
//
// Counted repetitions. A chain position at a counted repetition carries its count; where the
// bounds are out of reach within one token the class uses a class-walk count instead
// (recognizer.h), so one class serves every count in that range:
//   count >= min and (unbounded, or max - count >= kFarHeadroom) -> kCountFarAbove; the class
//     is exact for every token whose length is at most the headroom (each iteration consumes a
//     byte: the body cannot match the empty string), so accepted tokens longer than
//     kFarHeadroom are kept apart (long_accept, by length) and the matcher takes those within
//     the real headroom and checks the others against its stacks;
//   count + (longest token) < min -> kCountFarBelow (exact: no token reaches min).
// Other counts (near a bound, or a body that can match the empty string) stay exact.
//
// Classes are kept up to kClassCacheBytes per grammar (then that cache starts over). A class
// depends only on the grammar fragment its truncated chain can reach (the chain's remaining
// elements and the rules they reach, byte sets by value), so classes whose fragment serializes
// to at most kMaxFragmentKey bytes are also kept per vocabulary, shared by every grammar
// compiled against it (Vocabulary::Shared; up to kSharedClassBytes, then that cache starts
// over): a JSON string's content class is walked once per vocabulary, not once per schema.
//
// Mask cache: a whole configuration (every head's full chain, and whether the root may end) is
// an exact key for its mask; masks are cached per grammar up to kMaskCacheBytes (then the cache
// starts over). The accepted popped tokens per (class, real caller) are cached likewise.
//
// Thread-safety: immutable except the caches, each behind its mutex (mask computations run
// outside the locks; two threads may compute the same entry, the first insert wins), and the
// class walks' shared configuration table, one walk at a time per grammar.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/ir.h"
#include "grammar/vocabulary.h"

namespace tachyon::grammar {

class LengthTables;
struct LengthInfo;

// One position of a stack chain: an element position and its node's count (recognizer.h).
struct ChainEntry {
  int32_t pos;
  int32_t count;
  auto operator<=>(const ChainEntry&) const = default;
};

struct TokenClass {
  // Accepted tokens: a bitmask of Vocabulary::mask_words() words when dense, else a list
  // (at most one of the two is non-empty).
  std::vector<uint32_t> accept_bits;
  std::vector<int32_t> accept_list;
  // Popped tokens by suffix (the bytes after the pop), sorted by suffix.
  struct Pop {
    std::string suffix;
    std::vector<int32_t> tokens;
  };
  std::vector<Pop> pops;
  // More than kMaxPopped (suffix, token) pairs: `pops` is left empty and the matcher uses the
  // whole chain instead.
  bool too_many_pops = false;
  uint32_t min_len = 0;  // tokens of at most this many bytes were left out
  // Accepted tokens longer than kFarHeadroom of a class with a bounded kCountFarAbove count.
  // need: the least headroom (max - count) of that repetition with which the truncated stack
  // accepts the token (kNoNeed when none; at most kFarHeadroom when that is enough; the token's
  // length when the chain has several bounded counts, each iteration taking a byte or more).
  // The token is accepted where the real headroom is at least `need`; otherwise it is rejected
  // when `sure` (no parse pops out of the truncated stack before its last byte), else checked
  // against the real stacks.
  struct LongToken {
    uint32_t need;
    int32_t token;
    bool sure;
  };
  static constexpr uint32_t kNoNeed = UINT32_MAX;
  std::vector<LongToken> long_accept;
  // Popped tokens longer than kFarHeadroom of such a class (not in `pops`): checked whole
  // against the real stacks.
  std::vector<int32_t> long_pops;
};

class GrammarImpl final : public CompiledGrammar, public std::enable_shared_from_this<GrammarImpl> {
 public:
  static constexpr size_t kShallowDepth = 3;
  static constexpr size_t kMaxPopped = 8192;
  static constexpr size_t kMaskCacheBytes = size_t{8} << 20;
  static constexpr size_t kClassCacheBytes = size_t{64} << 20;
  static constexpr int32_t kFarHeadroom = 32;
  static constexpr size_t kMaxFragmentKey = 4096;
  static constexpr size_t kSharedClassBytes = size_t{64} << 20;

  GrammarImpl(FlatGrammar g, std::shared_ptr<const Vocabulary> vocab);
  ~GrammarImpl() override;

  std::unique_ptr<TokenMatcher> NewMatcher() const override;
  int64_t MinTokenLimit() const override;
  size_t MemoryBytes() const override;

  const FlatGrammar& grammar() const { return g_; }
  const Vocabulary& vocab() const { return *vocab_; }

  // Rewrites the counts of a chain taken from real stacks to the class form (see above) and
  // returns the smallest real headroom (max - count) of the bounded repetitions it turned into
  // kCountFarAbove (INT32_MAX when none). force_far: also counts at or above min with less
  // headroom (but some) become kCountFarAbove. near (when not null): the smallest headroom
  // (> 0) of the counts at or above min left exact (INT32_MAX when none).
  int32_t NormalizeChain(std::vector<ChainEntry>* chain, bool force_far = false,
                         int32_t* near = nullptr) const;

  // The class of a truncated stack: chain[0] is the head's position (a kBytes element),
  // chain[i + 1] the continuation of chain[i]; `exact`: the last one's caller is the root
  // (else an unknown caller). Tokens of at most min_len bytes are left out (and their trie
  // subtrees not walked). REQUIRES: counts in class form (NormalizeChain), min_len < 256.
  std::shared_ptr<const TokenClass> Class(const std::vector<ChainEntry>& chain, bool exact,
                                          uint32_t min_len = 0) const;

  // The key of the fragment of the grammar that Class(chain, exact, min_len) depends on; empty
  // when it would be longer than kMaxFragmentKey bytes.
  // relative_counts: a counted repetition's real count is keyed by its distances to the bounds
  // where that is exact (compiled.cc).
  std::string FragmentKey(const std::vector<ChainEntry>& chain, bool exact, uint32_t min_len,
                          bool relative_counts = true) const;

  // The cached mask for a configuration key, or null.
  std::shared_ptr<const std::vector<uint32_t>> CachedMask(const std::string& key) const;
  void CacheMask(const std::string& key, std::shared_ptr<const std::vector<uint32_t>> mask) const;

  // The popped tokens of a class that its real caller accepts, keyed by the class's chain and
  // the caller's chain (a counted string's caller stays the same at every count), or null.
  std::shared_ptr<const std::vector<int32_t>> CachedPops(const std::string& key) const;
  void CachePops(const std::string& key, std::shared_ptr<const std::vector<int32_t>> toks) const;

  // Length-aware masks (length_limit.h): the grammar's distance tables, built on the first
  // call; and the LengthInfo per configuration key (as masks are keyed), cached up to
  // kLengthCacheBytes (then that cache starts over).
  const LengthTables& Lengths() const;
  std::shared_ptr<const LengthInfo> CachedLength(const std::string& key) const;
  void CacheLength(const std::string& key, std::shared_ptr<const LengthInfo> info) const;
  static constexpr size_t kLengthCacheBytes = size_t{8} << 20;

 private:
  struct WalkContext;    // the class walks' arena and configuration table (compiled.cc)
  struct SharedClasses;  // classes by fragment key, per vocabulary (compiled.cc)
  static constexpr size_t kMaxWalkConfigs = 8192;
  static constexpr size_t kMaxWalkNodes = size_t{1} << 20;
  TokenClass ComputeClass(const std::vector<ChainEntry>& chain, bool exact, uint32_t min_len) const;
  // Sets cls->long_accept's `need` and `sure` (see TokenClass) by running each token from the
  // chain with its one bounded kCountFarAbove entry (index rep) at a real count.
  // REQUIRES: walk_mu_ held.
  void MeasureLongTokens(const std::vector<ChainEntry>& chain, bool exact, size_t rep,
                         TokenClass* cls) const;

  const FlatGrammar g_;
  const std::shared_ptr<const Vocabulary> vocab_;
  const std::shared_ptr<SharedClasses> shared_;
  mutable std::mutex walk_mu_;
  mutable std::unique_ptr<WalkContext> walk_;  // GUARDED_BY(walk_mu_)
  mutable std::mutex class_mu_;
  mutable std::unordered_map<std::string, std::shared_ptr<const TokenClass>> classes_;
  mutable size_t class_bytes_ = 0;
  mutable std::mutex mask_mu_;
  mutable std::unordered_map<std::string, std::shared_ptr<const std::vector<uint32_t>>> masks_;
  mutable size_t mask_bytes_ = 0;
  mutable std::unordered_map<std::string, std::shared_ptr<const std::vector<int32_t>>> pops_;
  mutable size_t pops_bytes_ = 0;  // GUARDED_BY(mask_mu_), as pops_
  mutable std::once_flag lengths_once_;
  mutable std::unique_ptr<const LengthTables> lengths_;
  mutable int64_t start_distance_ = 0;  // set with lengths_
  mutable std::mutex length_mu_;
  mutable std::unordered_map<std::string, std::shared_ptr<const LengthInfo>> length_infos_;
  mutable size_t length_bytes_ = 0;  // GUARDED_BY(length_mu_), as length_infos_
};

}  // namespace tachyon::grammar
