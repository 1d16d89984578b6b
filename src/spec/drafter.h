// Drafter: proposes tokens that may follow a sequence, for the engine to verify in one forward
// pass (speculative decoding). A drafter only guesses; verification (rejection_sampler.h)
// decides what is emitted, so a bad guess costs compute, never correctness.
//
// Deterministic drafters (n-gram, suffix) propose one token per position with certainty (a
// one-hot draft distribution). Thread-safety: none (engine thread).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "spec/speculative_config.h"
#include "util/status.h"

namespace tachyon::spec {

class Drafter {
 public:
  virtual ~Drafter() = default;

  // Appends to `*draft` up to max_tokens tokens likely to follow `tokens` (the sequence's
  // prompt followed by its output so far; the first num_prompt_tokens are the prompt).
  // `seq_id` names the sequence for drafters that keep per-sequence state.
  // REQUIRES: draft->empty(), max_tokens >= 0.
  virtual void Propose(int64_t seq_id, std::span<const int32_t> tokens, int64_t num_prompt_tokens,
                       int max_tokens, std::vector<int32_t>* draft) = 0;

  // Propose, and for each token appended to *draft, the drafter's own estimate of the
  // probability that it and the drafts before it are all accepted (non-increasing) appended to
  // *accept, for the engine's draft-length rule. The default has no estimate: 1 each.
  // REQUIRES: as Propose; accept->size() == draft->size().
  virtual void ProposeScored(int64_t seq_id, std::span<const int32_t> tokens,
                             int64_t num_prompt_tokens, int max_tokens,
                             std::vector<int32_t>* draft, std::vector<double>* accept);

  // The sequence is done (finished or aborted): per-sequence state may go. `tokens`: its final
  // prompt and output (the first num_prompt_tokens are the prompt), for drafters that learn
  // from finished outputs (suffix).
  virtual void Release(int64_t seq_id, std::span<const int32_t> tokens, int64_t num_prompt_tokens) {
    (void)seq_id;
    (void)tokens;
    (void)num_prompt_tokens;
  }
};

// The drafter of a validated config (ValidateSpeculativeConfig): ngram or suffix. Errors: the
// method has no drafter here (draft_model drafts through engine/draft_runner.h instead).
Result<std::unique_ptr<Drafter>> MakeDrafter(const SpeculativeConfig& config);

}  // namespace tachyon::spec
