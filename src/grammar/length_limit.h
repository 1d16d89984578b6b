// Length-aware masks (internal): how many tokens a grammar position still needs at most before
// the grammar may end, and which tokens keep an ending reachable within a token budget.
//
// Distance. rest(pos, count) bounds the tokens that finish the alternative from element `pos`:
// a byte costs one token where some single-byte token spells a byte of its set (else
// kUnreachable: no path through it is promised), and a run of byte-set elements that one
// token's bytes fall in (a key, a literal) costs one token for the whole run (TokenRuns: the
// least over those); a rule costs its alternatives' least, a counted repetition's node the
// iterations still needed times its body's least. A stack node's distance is rest of every
// position up its chain; a configuration's distance is 0 where the root may end, else the
// least of its heads'. Each step of a least path is a token that the grammar's mask allows,
// so a configuration at distance d can end within d tokens, and the first token along that
// path leads to distance d - 1 or less: this is what keeps the budget invariant. Tokens that
// span elements of different rules are not counted, so this bounds the fewest tokens from
// above.
//
// Ceiling. Max(p) bounds the distance below (and including) a node at p, or later in its
// alternative, whatever was pushed under it (for a rule, the most of its alternatives; a
// recursion that nests deeper with each level is kUnreachable). A head chain n_0 .. n_k can
// only lead to chains that keep n_{i+1} .. n_k and replace the rest with such a node, so
// no configuration reachable from one is farther than its ceiling, the most over its heads and
// i of Max(n_i) + the rest of n_{i+1} .. n_k. A budget above the ceiling needs no filtering:
// the mask stays as it is at the cost of a walk up each head's chain.
//
// Growth. A head's cost is the distance its chain alone gives. One byte can raise the cost of
// any head by at most Growth() (a grammar constant: the most a closure from any position can
// cost beyond that position's own rest, less the byte; or the rest a byte inside a run leaves
// beyond the run's), so after a token of n bytes no head
// costs more than MostHead() + n * Growth(), however deep a recursion nests: where the budget
// is far above that for every allowed token's length, the mask needs no filtering either, and
// otherwise only the tokens too long for that bound need their distance walked.
//
// LengthInfo. From one real configuration (counts far from their bounds made kCountFarAbove,
// FarCounts), a walk over the vocabulary trie (transitions memoized per configuration, subtrees
// that loop back to their configuration taken whole) gives each allowed token's distance after
// it; tokens that change the distance are kept.
//
// Thread-safety: LengthTables is immutable after construction; ComputeLengthInfo uses the
// caller's recognizer and arena (one thread), interning nodes it truncates away again.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "grammar/ir.h"
#include "grammar/recognizer.h"
#include "grammar/vocabulary.h"

namespace tachyon::grammar {

inline constexpr int64_t kUnreachable = int64_t{1} << 40;

class LengthTables {
 public:
  LengthTables(const FlatGrammar& g, const Vocabulary& vocab);
  // The fewest bytes from element `pos` (count: the node's count at a kRepeat element) to the
  // end of its alternative; at least kUnreachable when no such path exists.
  int64_t Rest(int32_t pos, int32_t count) const;
  // A configuration's distance (see above), its heads' nodes in `arena`.
  int64_t Distance(const Config& c, const StackArena& arena) const;
  // The ceiling above (kUnreachable where unbounded). Uses `chain` as scratch.
  int64_t Ceiling(const Config& c, const StackArena& arena, std::vector<int32_t>* chain) const;
  // The most any head of `c` costs (its chain's rests summed; 0 without heads).
  int64_t MostHead(const Config& c, const StackArena& arena) const;
  // The most one byte raises a head's cost (see Growth above); at least 0.
  int64_t Growth() const { return growth_; }
  // `c` with the count of every counted repetition whose bounds no token of at most `longest`
  // bytes can reach (at or above min, at least `longest` iterations below max, a body that
  // consumes a byte) replaced by kCountFarAbove (new nodes interned in `arena`): every such
  // token is accepted and leaves the same distance from both, and a walk from the copy loops
  // where the real count would count up.
  Config FarCounts(const Config& c, int64_t longest, StackArena* arena) const;

 private:
  // Max of a node at `pos` with `count`.
  int64_t MaxAt(int32_t pos, int32_t count) const;
  // x of a node at `pos` (see the constructor) from x of the positions after it and per rule.
  int64_t ClosureCost(int32_t pos, const std::vector<int64_t>& x,
                      const std::vector<int64_t>& rule_x) const;
  const FlatGrammar& g_;
  std::vector<int64_t> rest_;      // per element position, counts 0
  std::vector<int64_t> rule_min_;  // per rule
  std::vector<int64_t> max_;       // Max per element position, counts 0
  std::vector<int64_t> rule_max_;  // per rule: the most of its alternatives' Max
  int64_t growth_ = 0;
};

// The tokens whose distance after them differs from `distance` (the configuration's own),
// each with that distance after it. worst: the largest distance after any listed token.
// min_len > 0: only tokens longer than min_len bytes are listed (the others are known to fit).
struct LengthInfo {
  int64_t distance = 0;
  int64_t worst = 0;
  uint32_t min_len = 0;
  std::vector<std::pair<int64_t, int32_t>> farther;  // distance after > distance, largest first
  std::vector<std::pair<int64_t, int32_t>> closer;   // distance after < distance, smallest first
};

// min_len: leave out the tokens of at most min_len bytes (their trie subtrees not walked).
LengthInfo ComputeLengthInfo(const LengthTables& lengths, const Vocabulary& vocab, Recognizer* rec,
                             const Config& start, uint32_t min_len = 0);

// Leaves in `bitmask` (the grammar's mask for the configuration of `info`) only the tokens
// after which the distance is at most budget - 1 (budget: the tokens still to be generated,
// this one included). End-of-generation ids stay as they are (they end the output). Where no
// token reaches that (a budget below the distance) the tokens that come closest are kept.
// budget <= 0: no change. REQUIRES: info.min_len == 0 or budget - 1 >= info.distance.
void ApplyLengthLimit(const LengthInfo& info, int64_t budget, uint32_t* bitmask, size_t words);

}  // namespace tachyon::grammar
