// SuffixTree: how often every token string of up to max_depth tokens occurs in one or more
// token sequences, with the tokens that followed each occurrence (SuffixDecoding, Oliaro et
// al. 2024). It is a suffix trie cut at depth D: the node of string s (|s| <= D) counts the
// occurrences of s, and its children are the tokens seen right after s. Strings deeper than D
// are not kept, which bounds the tree at D nodes per token inserted.
//
// Two ways to fill it:
//  - Append(token): one sequence growing token by token (a request's prompt, then its output;
//    O(D) per token);
//  - Insert(tokens) / Remove(tokens): whole independent sequences, added and later taken out
//    again (the global tree of recent outputs; O(len * D)). Nodes whose count drops to 0 are
//    freed, so the tree holds exactly the strings of the sequences still in it.
//
// Drafting reads it with Find(pattern) (the node of the request's last tokens) and
// Continue(node, ...) (the most frequent continuation, with its estimated probabilities).
//
// Memory: about 80 bytes per node. Thread-safety: none (one owner; see suffix_drafter.h).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace tachyon::spec {

class SuffixTree {
 public:
  static constexpr int32_t kRoot = 0;
  static constexpr int32_t kNone = -1;

  // REQUIRES: max_depth >= 1.
  explicit SuffixTree(int max_depth);

  // Appends `token` to the tree's own growing sequence: counts every string that ends with it
  // (the last D tokens' suffixes).
  void Append(int32_t token);
  // Counts every string of `tokens` (a sequence of its own, independent of Append's).
  void Insert(std::span<const int32_t> tokens);
  // Undoes Insert(tokens). REQUIRES: the same tokens were inserted and not removed since.
  void Remove(std::span<const int32_t> tokens);

  // The node of `pattern`, kNone when it never occurred (or is longer than max_depth); the
  // empty pattern is kRoot.
  int32_t Find(std::span<const int32_t> pattern) const;

  // Greedy continuation from `node`: repeatedly the child seen most often after the current
  // string (ties: the one seen most recently), whose probability is estimated as the product
  // of count(child) / (occurrences of the current string that were followed by a token);
  // stops before a token whose probability falls below min_prob, at max_tokens, or where
  // nothing followed. Appends the tokens to *out and returns the sum of their probabilities
  // (the expected number of them a verifier accepts, if the estimates hold). `probs` (may be
  // null) gets each appended token's probability (non-increasing).
  double Continue(int32_t node, int max_tokens, double min_prob, std::vector<int32_t>* out,
                  std::vector<double>* probs = nullptr) const;

  int64_t count(int32_t node) const { return nodes_[node].count; }
  int depth(int32_t node) const { return nodes_[node].depth; }
  int max_depth() const { return max_depth_; }
  // Live nodes, the root excluded (the distinct strings of length 1..D held).
  int64_t num_nodes() const { return static_cast<int64_t>(nodes_.size() - free_.size()) - 1; }

 private:
  struct Node {
    int32_t token = -1;
    int32_t parent = kNone;
    int32_t first_child = kNone;
    int32_t next_sibling = kNone;
    int32_t depth = 0;
    int32_t count = 0;        // occurrences of this node's string
    int32_t child_total = 0;  // of which followed by a token (sum of the children's counts)
    uint64_t stamp = 0;       // when it last occurred (tie-break: most recent)
  };

  static uint64_t Key(int32_t parent, int32_t token) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(parent)) << 32) |
           static_cast<uint32_t>(token);
  }
  int32_t Child(int32_t parent, int32_t token) const;
  // The child of parent for token, created when missing; its count goes up by one.
  int32_t CountChild(int32_t parent, int32_t token);
  void Free(int32_t node);
  // Extends every string of `active` (nodes of the strings ending at the previous token) by
  // `token`, plus the string of `token` alone; `active` becomes the strings ending at it.
  void Extend(std::vector<int32_t>* active, int32_t token);

  int max_depth_;
  uint64_t clock_ = 0;
  std::vector<Node> nodes_;
  std::vector<int32_t> free_;
  std::unordered_map<uint64_t, int32_t> edges_;  // Key(parent, token) -> child
  std::vector<int32_t> active_;                  // Append's strings ending at its last token
  std::vector<int32_t> scratch_;
};

}  // namespace tachyon::spec
