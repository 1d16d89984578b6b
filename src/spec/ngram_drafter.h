// Prompt-lookup (n-gram) drafting: find the sequence's last n tokens earlier in the sequence
// (prompt and output alike) and propose the tokens that followed that occurrence.
//
// n goes from max_n down to min_n and the first size with a match wins; among matches of that
// size the most recent occurrence is used (the latest context is the best guide when the
// output copies spans of the prompt, as code edits and summaries do). The proposal copies what
// followed the occurrence; one that reaches the end of the sequence goes on over the draft
// itself, so a repeating pattern of period p drafts its continuation, not just p tokens.
// Cost: O(len * max_n) per call, no state.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "spec/drafter.h"

namespace tachyon::spec {

// Appends up to max_tokens proposed tokens to *draft (none when no n-gram matches).
// REQUIRES: 1 <= min_n <= max_n.
void NgramLookup(std::span<const int32_t> tokens, int min_n, int max_n, int max_tokens,
                 std::vector<int32_t>* draft);

class NgramDrafter : public Drafter {
 public:
  NgramDrafter(int min_n, int max_n) : min_n_(min_n), max_n_(max_n) {}
  void Propose(int64_t seq_id, std::span<const int32_t> tokens, int64_t num_prompt_tokens,
               int max_tokens, std::vector<int32_t>* draft) override;

 private:
  int min_n_;
  int max_n_;
};

}  // namespace tachyon::spec
