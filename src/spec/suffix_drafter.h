// Suffix decoding (SuffixDecoding, Oliaro et al. 2024; method "suffix"): drafts from two suffix
// trees (suffix_tree.h) —
//  - one per sequence over its prompt and output so far (kept up to date as tokens arrive),
//  - one global tree over the outputs of recently finished sequences, so patterns a workload
//    repeats across requests (agent loops, templated answers) are drafted too. It holds the
//    last suffix_decoding_max_cached_requests outputs, fewer when it would exceed
//    kMaxGlobalNodes nodes (oldest evicted first), so its memory stays bounded.
//
// For each match length m = 1 .. D-1 (D = suffix_decoding_max_tree_depth), the sequence's last
// m tokens are looked up in each tree; from the node found, the most frequent continuation is
// followed while its estimated probability stays >= suffix_decoding_min_token_prob, for at
// most floor(suffix_decoding_max_spec_factor * m) tokens (a longer match earns a longer draft).
// The draft with the highest score (sum of the estimated probabilities: the expected number of
// accepted tokens) wins; ties go to the longer match, then to the sequence's own tree. The
// engine's controller (acceptance.h) caps the length further from the acceptance seen so far.
//
// Drafts are deterministic (one-hot draft distribution), verified like n-gram drafts.
// Memory: ~80 bytes x D per token of each running sequence, plus the global tree.
// Thread-safety: none; the engine thread owns the drafter (Propose and Release).
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <unordered_map>
#include <vector>

#include "spec/drafter.h"
#include "spec/suffix_tree.h"

namespace tachyon::spec {

// The best draft of `tree` for the end of `tokens` (rules above). Appends to *draft, returns
// its score; `match_len` (may be null) gets the m it came from (0: none); `probs` (may be
// null) each drafted token's estimated probability (SuffixTree::Continue).
double SuffixDraft(const SuffixTree& tree, std::span<const int32_t> tokens,
                   const SuffixConfig& params, int max_tokens, std::vector<int32_t>* draft,
                   int* match_len, std::vector<double>* probs = nullptr);

class SuffixDrafter : public Drafter {
 public:
  static constexpr int64_t kMaxGlobalNodes = int64_t{1} << 20;  // ~80 MiB

  explicit SuffixDrafter(const SuffixConfig& params)
      : params_(params), global_(params.max_tree_depth) {}

  void Propose(int64_t seq_id, std::span<const int32_t> tokens, int64_t num_prompt_tokens,
               int max_tokens, std::vector<int32_t>* draft) override;
  // The estimates are the tree's (SuffixTree::Continue): how often the drafted continuation
  // followed the matched tokens.
  void ProposeScored(int64_t seq_id, std::span<const int32_t> tokens, int64_t num_prompt_tokens,
                     int max_tokens, std::vector<int32_t>* draft,
                     std::vector<double>* accept) override;
  // Drops the sequence's tree and adds its output to the global tree.
  void Release(int64_t seq_id, std::span<const int32_t> tokens, int64_t num_prompt_tokens) override;

  const SuffixTree& global_tree() const { return global_; }
  size_t num_cached_outputs() const { return cached_.size(); }
  size_t num_sequences() const { return seqs_.size(); }

 private:
  struct Seq {
    explicit Seq(int depth) : tree(depth) {}
    SuffixTree tree;
    size_t num_inserted = 0;  // tokens appended to tree
  };

  SuffixConfig params_;
  std::unordered_map<int64_t, Seq> seqs_;
  SuffixTree global_;
  std::deque<std::vector<int32_t>> cached_;  // outputs in global_, oldest first
};

}  // namespace tachyon::spec
