// Scheduler: each step, which requests compute how many tokens.
//
// Policy (SchedulerConfig):
//  - A per-step token budget (max_num_batched_tokens) and a cap on running requests.
//  - Running requests go first: those generating get their one token (plus their drafted
//    tokens, speculative decoding, as far as the budget and the pool allow), then those still in
//    their prompt get chunks (chunked prefill). Waiting requests are then admitted in queue
//    order (FCFS, or priority then FCFS) with prefill chunks within the remaining budget; the
//    queue head blocks those behind it, so no one starves.
//  - Short prompt work first (short_prefill_tokens > 0): running and waiting requests whose
//    uncached rest of the prompt is short (a mostly cached prompt, the tail of a chunked
//    prefill) go before longer prompt work, so a newcomer with a cached prefix gets its first
//    token in the next step. A short waiting request overtakes a long one ahead of it only
//    for the budget, never for blocks or seats: a long head of the queue that cannot start for
//    lack of those still blocks everyone behind it.
//  - While some request is generating, max_prefill_tokens_while_decoding (> 0) caps the
//    step's prompt tokens, so decode steps stay short.
//  - A new request starts from the longest cached prefix (or, for choice i > 0 of an n > 1
//    request, from choice 0's prompt blocks, forked with refcounts). When the blocks right
//    after its cached prefix are being computed by another request (same tokens, same cache
//    salt: kv::PrefixHit::in_flight_tokens), it does not compute them again: the blocks that
//    requests scheduled earlier in this step complete in this step it shares at once
//    (kv::KvCacheManager::AttachInFlight), its own tokens after them run in the same step and
//    read their KV as it is written (the executor stores every new token's KV before any
//    attention reads it, model_executor.h); if blocks after those are still in flight, it waits
//    for them instead and starts from the cache once they are committed (a waiting request
//    keeps its seat against those behind it). A burst of requests with one prefix computes it
//    once, and all of it in the prefix's last step when the budget allows. If a request whose
//    blocks others attached to leaves the step (preempted later in it), they leave it too.
//    Not with layer groups (kv/kv_groups.h) or a KV export (engine/pd_export.h): those wait.
//  - When blocks run out, the lowest-priority / newest running request is preempted: its
//    blocks are freed and it goes back to the waiting queue to be recomputed later (its cached
//    blocks usually make that cheap). No new requests are admitted in a step that preempted.
//  - Under kPriority, a waiting request that cannot be admitted (blocks or max_num_seqs)
//    preempts running requests of strictly lower priority (larger value), least important
//    first. Equal priorities never preempt each other, so there is no cycle; a preempted
//    request keeps its arrival and resumes ahead of later requests of its priority.
// Admission checks (request can fit at all) are done by the engine before Add().
// The output is plain data; the scheduler never sees tensors.
// Thread-safety: none (engine thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <set>
#include <vector>

#include "engine/request.h"
#include "kv/kv_cache_manager.h"

namespace tachyon::engine {

enum class SchedulePolicy { kFcfs, kPriority };

struct SchedulerConfig {
  int64_t max_num_batched_tokens = 2048;     // tokens per step, all requests together
  int max_num_seqs = 64;                     // running requests at once
  int64_t long_prefill_token_threshold = 0;  // > 0: cap one request's chunk per step
  SchedulePolicy policy = SchedulePolicy::kFcfs;
  int64_t short_prefill_tokens = 0;  // > 0: prompt work with at most this many uncached
                                     // tokens left goes first (see above)
  int64_t max_prefill_tokens_while_decoding = 0;  // > 0: cap on a step's prompt tokens
                                                  // while any request is generating
};

struct ScheduledSeq {
  Request* request = nullptr;
  int64_t num_new_tokens = 0;  // tokens[pos_start, pos_start + num_new_tokens) run this step
  int64_t pos_start = 0;       // = request's num_computed_tokens before the step
  std::vector<int32_t> block_table;
  bool sample = false;  // the step computes the last known token: sample the next one
  // The last num_draft_tokens of the num_new_tokens are request->draft_tokens[0, k), placed
  // after its known tokens to be verified (only when sample). num_computed_tokens advances by
  // the known tokens, and later by the drafts accepted (Scheduler::OnDraftsVerified).
  int64_t num_draft_tokens = 0;
  // >= 0: its cached positions in its block at pos_start are copied from this block of another
  // request in the step (model::SequenceSlice::copy_src: a shared prompt's partial block).
  int32_t copy_src = -1;
};

struct SchedulerOutput {
  std::vector<ScheduledSeq> seqs;
  std::vector<int64_t> preempted;  // seq ids preempted while building this step
  int64_t num_tokens = 0;
  bool empty() const { return seqs.empty(); }
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, kv::KvCacheManager* kv);

  // Queues a new request (state kWaiting). Not owned.
  void Add(Request* r);
  SchedulerOutput Schedule();
  // After the step ran: advances num_computed_tokens and commits the computed blocks to the
  // prefix cache. Call before appending sampled tokens.
  void OnStepComputed(const SchedulerOutput& out);
  // After verifying a step's drafts of `r` (before a Remove if it finished): its first
  // `accepted` drafts are now
  // emitted tokens with computed KV; num_computed_tokens advances over them, newly full blocks are
  // committed to the prefix cache, and blocks past the next token's position (holding only
  // rejected drafts) go back to the pool. Call after appending the emitted tokens.
  void OnDraftsVerified(Request* r, int64_t accepted);
  // Removes the request from the queues and frees its blocks; sets state kFinished.
  void Remove(Request* r);
  // The TTFT breakdown (Request::ttft): adds the step `out`, run from `start` to `end`, to
  // every request still waiting for its first token, under what the step did for it. Call
  // after the step ran (after OnStepComputed), before its tokens are appended.
  void AccountStep(const SchedulerOutput& out, std::chrono::steady_clock::time_point start,
                   std::chrono::steady_clock::time_point end);

  int num_running() const { return static_cast<int>(running_.size()); }
  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  int64_t num_preemptions() const { return num_preemptions_; }
  bool HasWork() const { return !running_.empty() || !waiting_.empty(); }
  // The waiting queue, in order.
  std::vector<Request*> Waiting() const { return {waiting_.begin(), waiting_.end()}; }

 private:
  struct QueueOrder {
    const Scheduler* s;
    bool operator()(const Request* a, const Request* b) const { return s->Before(a, b); }
  };
  bool Before(const Request* a, const Request* b) const;
  enum class Admission { kAdmitted, kDeferred, kShortOnly, kNoRoom };
  void ScheduleRunning(Request* r, SchedulerOutput* out, int64_t* budget);
  // Admits r with a prefill chunk, or says why not: kDeferred (its next blocks are in flight),
  // kShortOnly (short_only and its uncached rest is long, though it could start: left for the
  // long pass), kNoRoom (no seat, budget or blocks).
  Admission ScheduleWaiting(Request* r, bool short_only, SchedulerOutput* out, int64_t* budget);
  // One pass over the waiting queue in order (see the class comment).
  void AdmitWaiting(bool short_only, SchedulerOutput* out, int64_t* budget);
  bool IsShort(int64_t uncached) const {
    return config_.short_prefill_tokens > 0 && uncached <= config_.short_prefill_tokens;
  }
  bool BlockedOnLeader(const Request* r) const;
  kv::PrefixHit FindPrefix(const Request* r);
  // Positions of request `seq_id` with KV once the step `out` ran (0: not in it).
  static int64_t CoveredAfterStep(const SchedulerOutput& out, int64_t seq_id);
  // Positions of running request `w` with KV once this step ran (scheduled in it or not).
  int64_t KvAfterStep(const SchedulerOutput& out, const Request* w) const;
  // The longest run of r's tokens right after its prefix hit (at most block_size - 1, never its
  // last token) that a running request holds in its block there, with KV by the end of this
  // step: that block and the run's length (0: none). Not from a request whose own block there
  // is a copy in this step.
  struct PartialPrefix {
    int32_t block = -1;
    int64_t tokens = 0;
  };
  PartialPrefix FindPartialPrefix(const Request* r, const kv::PrefixHit& hit,
                                  const SchedulerOutput& out) const;
  // Whether r was admitted in this step with a copied partial block.
  bool IsCopyTarget(const Request* r) const;
  // Same-step attachments whose blocks no other sequence of the step completes any more (their
  // writer was preempted after they attached) are preempted too, until none is left.
  void DropUnwrittenAttachments(SchedulerOutput* out, int64_t* budget);
  void Preempt(Request* victim, SchedulerOutput* out, int64_t* budget);
  // The running request to preempt first: lowest priority (under kPriority), then newest.
  Request* LeastImportantRunning() const;
  int64_t ChunkSize(const Request* r, int64_t budget) const;

  // A request admitted in this step on in-flight blocks [from_block, to_block) that other
  // requests of the step complete (kv::KvCacheManager::AttachInFlight), and/or with the first
  // positions of its block to_block, up to copy_end, copied from block copy_src (>= 0).
  struct Attachment {
    Request* request;
    int64_t from_block, to_block;
    int32_t copy_src;
    int64_t copy_end;
  };

  SchedulerConfig config_;
  kv::KvCacheManager* kv_;
  std::vector<Request*> running_;
  std::set<Request*, QueueOrder> waiting_;
  int64_t num_preemptions_ = 0;
  int64_t step_ = 0;               // Schedule() calls
  int num_deferred_ = 0;           // this step's waiting requests that keep a seat (in-flight wait)
  bool admission_closed_ = false;  // this step: the queue head could not start
  bool running_preempted_ = false;  // this step preempted for a running request: no admissions
  std::vector<Attachment> attached_;  // this step's same-step attachments
};

}  // namespace tachyon::engine
