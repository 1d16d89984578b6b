// Grammar-constrained decoding in the engine loop: the next-token masks of a step's constrained
// sequences, computed on a worker thread while the forward pass runs.
//
// Each constrained sequence (each choice of a request with EngineRequest::grammar) owns a
// grammar::TokenMatcher (Request::matcher) whose state is always "every output token so far
// accepted". Per step:
//   masks.Start(out);            // before ModelRunner::Execute: the worker fills the masks
//   ... forward pass ...
//   masks.Wait();                // before sampling: the matchers are the engine's again
//   sampling input.allowed = masks.Mask(i);
//   AcceptSampled(r, token);     // after sampling, before the token joins the output
// Preemption and recompute change nothing here: the output tokens stay, and so does the
// matcher's state.
//
// Thread-safety: MaskWorker is driven by the engine thread; between Start() and Wait() its
// worker thread owns the matchers of the sequences started (nothing else may touch them, and
// the requests must stay alive). The free functions: engine thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "engine/request.h"
#include "engine/scheduler.h"
#include "grammar/grammar.h"
#include "util/status.h"

namespace tachyon::engine {

class MaskWorker {
 public:
  // Masks of `n_vocab` bits (ceil(n_vocab / 32) words each).
  explicit MaskWorker(int32_t n_vocab);
  ~MaskWorker();  // joins the worker thread
  MaskWorker(const MaskWorker&) = delete;
  MaskWorker& operator=(const MaskWorker&) = delete;

  // Starts filling the masks of out.seqs[i] that sample this step and have a matcher.
  // No-op (and no thread hand-off) when there are none. REQUIRES: no Start() pending.
  void Start(const SchedulerOutput& out);
  // Blocks until the masks of the last Start() are filled. No-op when none is pending.
  void Wait();
  // The mask of out.seqs[i] from the last Start() (after Wait()): bit t set = token t may be
  // sampled; empty when that sequence is unconstrained (or did not sample).
  std::span<const uint32_t> Mask(size_t i) const;

 private:
  void Run();

  const size_t words_;
  std::vector<uint32_t> storage_;             // [jobs, words_]
  std::vector<int> slot_;                     // per seq of the last Start: job index or -1
  std::vector<grammar::TokenMatcher*> jobs_;  // matchers to fill, in job order

  std::mutex mu_;
  std::condition_variable cv_;
  bool pending_ = false;  // GUARDED_BY(mu_): jobs_ handed to the worker, not yet done
  bool stop_ = false;     // GUARDED_BY(mu_)
  std::thread thread_;    // started on the first Start() with work
};

enum class GrammarVerdict {
  kContinue,    // accepted; the grammar allows more
  kTerminated,  // accepted; nothing but EOS can follow: finish with kStop
  kRejected,    // the matcher refused the token (a mask bug): finish with an error
};

// A new matcher for one choice. A continuation's (its prompt ends with `resumed`, output tokens
// the original stream already delivered) replays them first, so the constraint goes on where the
// original stream was; then the length-aware limit (`token_limit` more tokens; < 0: none), which
// counts from there as it did in the original. InvalidArgument when the grammar refuses a
// resumed token or nothing but the end can follow them (the original would have finished).
Result<std::unique_ptr<grammar::TokenMatcher>> NewChoiceMatcher(
    const grammar::CompiledGrammar& grammar, std::span<const int32_t> resumed, int64_t token_limit);

// Accepts the sampled `token` (before it joins r->tokens) into r->matcher; a rejected token is
// never part of the output. REQUIRES: r->matcher.
GrammarVerdict AcceptSampled(Request* r, int32_t token);

}  // namespace tachyon::engine
