// DraftModelRunner: the draft model of speculative decoding's method draft_model
// (docs/speculative.md). It owns the draft's block table per sequence over its own paged pool
// (kv::KvCacheManager; the storage is the draft executor's) and drafts k tokens for every
// speculating sequence of a step at once: one draft forward per draft position for the whole
// batch.
//
// Keeping the draft's KV in sync with the target's tokens, lazily: per sequence it knows how
// many of the sequence's tokens have draft KV (`computed`) and which drafts it fed after them.
// Before drafting (and after each verification, Reconcile) the fed drafts that the target
// accepted, i.e. equal to the tokens that now follow, become computed and the blocks past them
// go back to the pool; the first draft forward then catches up on the rest of the tokens (a
// new sequence's whole prompt, or the corrected / bonus token), chunked within the step's token
// budget like the target's prefill (a sequence whose catch-up does not fit drafts nothing this
// step and continues next step). Full blocks of real tokens are committed to the draft's prefix
// cache, so n > 1 choices and repeated prompts share draft KV as they share the target's.
//
// Drafting follows the request's sampling: at temperature 0 each draft is the argmax after the
// request's penalties / bias / bans (greedy output stays identical); at temperature > 0 it is
// drawn from q = spec::DraftDistribution of the draft's logits with spec::DraftUniform, and q
// is kept (DraftProbs) for spec::VerifyStochasticDraft. The draft's logit rows may cover a
// prefix of the target's vocabulary only (executor->n_vocab() < config.n_vocab: the draft model
// computes its frequent tokens, speculative-config draft_vocab_size): drafts then come from
// that prefix, and q is zero past it. A sequence stops drafting at the
// first draft whose probability under the draft model is below config.p_min (softmax of the
// raw logits at temperature 0, q otherwise); that draft is dropped.
//
// Every draft forward is timed into cost() (seconds by rows), which the speculator's cost rule
// charges for each drafted token.
//
// A draft pool that runs out of blocks only costs drafts (that sequence drafts nothing this
// step); a failed draft forward drops the step's drafts. Free() a sequence when it finishes or
// is preempted (its draft KV is recomputed when it resumes).
// Thread-safety: none (engine thread).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/model_executor.h"
#include "engine/request.h"
#include "kv/kv_cache_manager.h"
#include "sampling/sampling_params.h"
#include "spec/step_cost.h"
#include "util/status.h"

namespace tachyon::engine {

struct DraftModelConfig {
  kv::KvCacheConfig kv;                   // the draft pool (the executor's storage holds it)
  int64_t max_num_batched_tokens = 2048;  // tokens of one draft forward, at most
  std::vector<int32_t> eos_token_ids;     // banned under min_tokens, as for the target
  double p_min = 0;                       // in [0, 1]: stop drafting below this probability
  int32_t n_vocab = 0;  // the target's vocabulary (DraftProbs' width); 0: the executor's
};

class DraftModelRunner {
 public:
  // `executor`: the draft model (not owned, outlives this), with KV storage for
  // config.kv.num_blocks blocks. REQUIRES: num_blocks > 0, block_size > 0.
  DraftModelRunner(const DraftModelConfig& config, ModelExecutor* executor);

  struct Job {
    Request* request = nullptr;
    // Drafts wanted (>= 0). 0: catch up only, on every token but the last (whose logits the
    // next drafting round needs), so a sequence's prompt enters the draft model in the step
    // that computed it for the target rather than in a later drafting round.
    int num_tokens = 0;
  };
  // Sets each job's request->draft_tokens (up to num_tokens; none when its catch-up does not
  // fit this step or the pool is short). REQUIRES: the requests are distinct and running.
  // Errors: the draft model's forward failed (the jobs then have no drafts).
  Status Propose(std::span<const Job> jobs);

  // q of draft j of the last Propose for the sequence ([n_vocab()], the target's vocabulary);
  // empty when the draft was greedy (one-hot) or there is none.
  std::span<const float> DraftProbs(int64_t seq_id, int j) const;

  // After the target verified r's drafts (r->tokens holds the emitted tokens): the accepted fed
  // drafts become computed, blocks past them are released.
  void Reconcile(const Request& r);
  // Releases the sequence's draft KV and state (finished, aborted or preempted).
  void Free(int64_t seq_id);

  const kv::KvCacheManager& kv() const { return kv_; }
  int32_t n_vocab() const { return config_.n_vocab; }
  // Seconds of the draft forwards by their rows (tokens), and their totals.
  const spec::StepCostModel& cost() const { return cost_; }
  int64_t num_forwards() const { return num_forwards_; }
  double forward_seconds() const { return forward_seconds_; }

 private:
  struct SeqState {
    int64_t computed = 0;      // leading tokens of the sequence with draft KV
    std::vector<int32_t> fed;  // drafts whose KV was written after them (positions computed..)
    std::vector<float> probs;  // [num_probs, n_vocab]: q of each draft (temperature > 0)
    int num_probs = 0;
  };
  // One job's part of this round: the catch-up chunk and the drafts under way.
  struct Work {
    Request* request = nullptr;
    SeqState* state = nullptr;
    int64_t chunk = 0;                // catch-up tokens run in the first forward
    int k = 0;                        // drafts to produce (0: catch-up only)
    std::vector<int32_t> context;     // tokens + drafts so far (penalties see them)
    sampling::SamplingParams params;  // the request's, without logprobs
  };
  SeqState* Sync(const Request& r);
  // Appends the draft of `w` from its row of logits (scratch); false (nothing appended) when
  // its probability is below p_min.
  bool Draft(Work* w, std::span<float> row);
  Status Forward(std::span<float>* logits);

  DraftModelConfig config_;
  ModelExecutor* executor_;
  kv::KvCacheManager kv_;
  std::unordered_map<int64_t, SeqState> seqs_;
  model::Batch batch_;
  std::vector<float> logits_;
  spec::StepCostModel cost_;
  int64_t num_forwards_ = 0;
  double forward_seconds_ = 0;
};

}  // namespace tachyon::engine
