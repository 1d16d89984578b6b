// Length-aware masks (internal): how many bytes a grammar position still needs before the
// grammar may end, and which tokens keep an ending reachable within a token budget.
//
// MinBytes. rest(pos, count) is the fewest bytes that finish the alternative from element
// `pos` (a counted repetition's node: the iterations still needed times its body's fewest
// bytes); a stack node's distance is rest of every position up its chain; a configuration's
// distance is 0 where the root may end, else the least of its heads'. Only bytes that some
// single-byte token spells count as one byte; a byte set without any costs kUnreachable (no
// path through it is promised). Each byte of a shortest path is a single-byte token that the
// grammar's mask allows, so a configuration at distance d can end within d tokens, and one
// byte along that path leads to distance d - 1: this is what keeps the budget invariant.
//
// Ceiling. Max(p) bounds the distance below (and including) a node at p, or later in its
// alternative, whatever was pushed under it (for a rule, the most of its alternatives; a
// recursion that nests deeper with each level is kUnreachable). A head chain n_0 .. n_k can
// only lead to chains that keep n_{i+1} .. n_k and replace the rest with such a node, so
// no configuration reachable from one is farther than its ceiling, the most over its heads and
// i of Max(n_i) + the rest of n_{i+1} .. n_k. A budget above the ceiling needs no filtering:
// the mask stays as it is at the cost of a walk up each head's chain.
//
// LengthInfo. From one real configuration, a walk over the vocabulary trie (transitions
// memoized per configuration, subtrees that loop back to their configuration taken whole)
// gives each allowed token's distance after it; tokens that change the distance are kept.
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

 private:
  // Max of a node at `pos` with `count`.
  int64_t MaxAt(int32_t pos, int32_t count) const;
  const FlatGrammar& g_;
  std::vector<int64_t> rest_;      // per element position, counts 0
  std::vector<int64_t> rule_min_;  // per rule
  std::vector<int64_t> max_;       // Max per element position, counts 0
  std::vector<int64_t> rule_max_;  // per rule: the most of its alternatives' Max
};

// The tokens whose distance after them differs from `distance` (the configuration's own),
// each with that distance after it. worst: the largest distance after any allowed token.
struct LengthInfo {
  int64_t distance = 0;
  int64_t worst = 0;
  std::vector<std::pair<int64_t, int32_t>> farther;  // distance after > distance, largest first
  std::vector<std::pair<int64_t, int32_t>> closer;   // distance after < distance, smallest first
};

LengthInfo ComputeLengthInfo(const LengthTables& lengths, const Vocabulary& vocab, Recognizer* rec,
                             const Config& start);

// Leaves in `bitmask` (the grammar's mask for the configuration of `info`) only the tokens
// after which the distance is at most budget - 1 (budget: the tokens still to be generated,
// this one included). End-of-generation ids stay as they are (they end the output). Where no
// token reaches that (a budget below the distance) the tokens that come closest are kept.
// budget <= 0: no change.
void ApplyLengthLimit(const LengthInfo& info, int64_t budget, uint32_t* bitmask, size_t words);

}  // namespace tachyon::grammar
