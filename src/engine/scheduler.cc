#include "engine/scheduler.h"

#include <algorithm>
#include <unordered_map>

#include "util/logging.h"

namespace tachyon::engine {

Scheduler::Scheduler(const SchedulerConfig& config, kv::KvCacheManager* kv)
    : config_(config), kv_(kv), waiting_(QueueOrder{this}) {}

bool Scheduler::Before(const Request* a, const Request* b) const {
  if (config_.policy == SchedulePolicy::kPriority && a->priority != b->priority) {
    return a->priority < b->priority;
  }
  if (a->arrival != b->arrival) return a->arrival < b->arrival;
  return a->seq_id < b->seq_id;
}

void Scheduler::Add(Request* r) {
  r->state = RequestState::kWaiting;
  waiting_.insert(r);
}

int64_t Scheduler::ChunkSize(const Request* r, int64_t budget) const {
  int64_t n = static_cast<int64_t>(r->tokens.size()) - r->num_computed_tokens;
  n = std::min(n, budget);
  if (config_.long_prefill_token_threshold > 0) {
    n = std::min(n, config_.long_prefill_token_threshold);
  }
  return n;
}

void Scheduler::Preempt(Request* victim, SchedulerOutput* out, int64_t* budget) {
  auto it = std::find_if(out->seqs.begin(), out->seqs.end(),
                         [&](const ScheduledSeq& s) { return s.request == victim; });
  if (it != out->seqs.end()) {  // already scheduled this step: take it back
    *budget += it->num_new_tokens;
    out->num_tokens -= it->num_new_tokens;
    out->seqs.erase(it);
  }
  std::erase_if(attached_, [&](const Attachment& a) { return a.request == victim; });
  kv_->Free(victim->seq_id);
  victim->num_computed_tokens = 0;
  victim->state = RequestState::kWaiting;
  ++victim->num_preemptions;
  ++num_preemptions_;
  running_.erase(std::find(running_.begin(), running_.end(), victim));
  waiting_.insert(victim);
  out->preempted.push_back(victim->seq_id);
}

void Scheduler::ScheduleRunning(Request* r, SchedulerOutput* out, int64_t* budget) {
  const int64_t n = ChunkSize(r, *budget);
  if (n <= 0) return;
  const bool reaches_end = r->num_computed_tokens + n == static_cast<int64_t>(r->tokens.size());
  // Drafts ride along with the last known token, within the budget; they never preempt anyone
  // (without room for them the step runs the known tokens alone).
  int64_t k = reaches_end ? std::min<int64_t>(r->draft_tokens.size(), *budget - n) : 0;
  if (k > 0 && !kv_->Allocate(r->seq_id, r->num_computed_tokens + n + k)) k = 0;
  while (k == 0 && !kv_->Allocate(r->seq_id, r->num_computed_tokens + n)) {
    // Out of blocks: preempt the least important running request (possibly r itself).
    Request* victim = LeastImportantRunning();
    Preempt(victim, out, budget);
    running_preempted_ = true;
    if (victim == r) return;
  }
  r->scheduled_step = step_;
  out->seqs.push_back(
      {r, n + k, r->num_computed_tokens, kv_->BlockTable(r->seq_id), reaches_end, k});
  out->num_tokens += n + k;
  *budget -= n + k;
}

bool Scheduler::BlockedOnLeader(const Request* r) const {
  const Request* l = r->leader;
  if (l == nullptr || l->state == RequestState::kFinished) return false;
  return l->state == RequestState::kWaiting || !l->prompt_computed();
}

kv::PrefixHit Scheduler::FindPrefix(const Request* r) {
  kv::PrefixHit hit = kv_->FindCachedPrefix(r->tokens, r->cache_salt);
  const Request* l = r->leader;
  if (l != nullptr && l->state == RequestState::kRunning && kv_->HasRequest(l->seq_id)) {
    const int64_t shareable = std::min(
        {l->num_computed_tokens, r->num_prompt_tokens, static_cast<int64_t>(r->tokens.size()) - 1});
    kv::PrefixHit shared = kv_->SharedPrefix(l->seq_id, shareable);
    if (shared.num_tokens > hit.num_tokens) hit = std::move(shared);
  }
  return hit;
}

int64_t Scheduler::CoveredAfterStep(const SchedulerOutput& out, int64_t seq_id) {
  for (const ScheduledSeq& s : out.seqs) {
    if (s.request->seq_id == seq_id) return s.pos_start + s.num_new_tokens - s.num_draft_tokens;
  }
  return 0;
}

bool Scheduler::IsCopyTarget(const Request* r) const {
  return std::any_of(attached_.begin(), attached_.end(),
                     [&](const Attachment& a) { return a.request == r && a.copy_src >= 0; });
}

int64_t Scheduler::KvAfterStep(const SchedulerOutput& out, const Request* w) const {
  return w->scheduled_step == step_ ? CoveredAfterStep(out, w->seq_id) : w->num_computed_tokens;
}

Scheduler::PartialPrefix Scheduler::FindPartialPrefix(const Request* r, const kv::PrefixHit& hit,
                                                      const SchedulerOutput& out) const {
  PartialPrefix best;
  const int64_t bs = kv_->block_size();
  const int64_t k = hit.num_tokens / bs;
  if (k == 0 || kv_->num_groups() != 1 || kv_->group_window(0) != 0) return best;
  const int32_t last = hit.blocks[k - 1];
  const int64_t start = k * bs;
  const int64_t limit =
      std::min<int64_t>(start + bs - 1, static_cast<int64_t>(r->tokens.size()) - 1);
  for (const Request* w : running_) {
    if (w == r || !kv_->HasRequest(w->seq_id) || IsCopyTarget(w)) continue;
    const std::vector<int32_t>& t = kv_->BlockTable(w->seq_id);
    if (static_cast<int64_t>(t.size()) <= k || t[k - 1] != last) continue;
    const int64_t end =
        std::min({limit, KvAfterStep(out, w), static_cast<int64_t>(w->tokens.size())});
    int64_t p = start;
    while (p < end && w->tokens[p] == r->tokens[p]) ++p;
    if (p - start > best.tokens) best = {t[k], p - start};
  }
  return best;
}

Scheduler::Admission Scheduler::ScheduleWaiting(Request* r, bool short_only, SchedulerOutput* out,
                                                int64_t* budget) {
  kv::PrefixHit hit = FindPrefix(r);
  const int64_t cached_blocks = static_cast<int64_t>(hit.blocks.size());
  // Take what this step's requests complete; not for a KV export, which hands the blocks
  // before its step as computed (engine/pd_export.h).
  if (hit.in_flight_tokens > 0 && r->kv_export == nullptr) {
    hit = kv_->AttachInFlight(std::move(hit), r->tokens, r->cache_salt,
                              [&](int64_t owner) { return CoveredAfterStep(*out, owner); });
  }
  if (hit.in_flight_tokens > 0) {  // someone computes our next blocks later: wait for them
    r->deferred_step = step_;
    return Admission::kDeferred;
  }
  if (num_running() + num_deferred_ >= config_.max_num_seqs) return Admission::kNoRoom;
  // The partial block after the hit, copied from a running request that holds those tokens.
  const PartialPrefix part = FindPartialPrefix(r, hit, *out);
  const int64_t cached = hit.num_tokens + part.tokens;
  r->num_computed_tokens = cached;
  const int64_t n = ChunkSize(r, *budget);
  const int64_t uncached = static_cast<int64_t>(r->tokens.size()) - cached;
  if (short_only && !IsShort(uncached)) {
    // Long work waits for the long pass; those behind may overtake it only if it could start.
    const bool could_start = n > 0 && kv_->CanAllocate(r->seq_id, cached + n, hit);
    r->num_computed_tokens = 0;
    return could_start ? Admission::kShortOnly : Admission::kNoRoom;
  }
  if (n <= 0 || !kv_->Allocate(r->seq_id, cached + n, hit)) {
    r->num_computed_tokens = 0;
    return Admission::kNoRoom;
  }
  if (static_cast<int64_t>(hit.blocks.size()) > cached_blocks || part.tokens > 0) {
    attached_.push_back(
        {r, cached_blocks, static_cast<int64_t>(hit.blocks.size()), part.block, cached});
  }
  kv_->MarkInFlight(r->seq_id, r->tokens, r->cache_salt);
  kv_->RecordPrefixQuery(static_cast<int64_t>(r->tokens.size()), cached);
  if (r->num_cached_prompt_tokens < 0) {
    r->num_cached_prompt_tokens = std::min(cached, r->num_prompt_tokens);
    r->first_scheduled_time = std::chrono::steady_clock::now();
  }
  r->state = RequestState::kRunning;
  running_.push_back(r);
  const bool sample = cached + n == static_cast<int64_t>(r->tokens.size());
  r->scheduled_step = step_;
  out->seqs.push_back({r, n, cached, kv_->BlockTable(r->seq_id), sample, 0, part.block});
  out->num_tokens += n;
  *budget -= n;
  return Admission::kAdmitted;
}

void Scheduler::AdmitWaiting(bool short_only, SchedulerOutput* out, int64_t* budget) {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    Request* r = *it;
    // Deferred earlier in this step (the short pass): looked at again, as the requests it waits
    // for may complete its blocks in this step now (same-step attachment).
    const bool was_deferred = r->deferred_step == step_;
    if (BlockedOnLeader(r) || (was_deferred && short_only)) {
      ++it;
      continue;
    }
    if (*budget <= 0 || admission_closed_) {
      // No more admissions this step; the rest only note whether they wait for in-flight
      // prefix blocks (for the TTFT breakdown).
      if (short_only || !kv_->HasInFlight()) break;
      if (!was_deferred && FindPrefix(r).in_flight_tokens > 0) r->deferred_step = step_;
      ++it;
      continue;
    }
    if (was_deferred) --num_deferred_;  // counted again below if it still waits
    Admission a = ScheduleWaiting(r, short_only, out, budget);
    // Under the priority policy, a request that cannot be admitted (no blocks or no seat)
    // preempts running requests of strictly lower priority, least important first.
    while (a == Admission::kNoRoom && config_.policy == SchedulePolicy::kPriority && *budget > 0) {
      Request* victim = LeastImportantRunning();
      if (victim == nullptr || victim->priority <= r->priority) break;
      Preempt(victim, out, budget);
      a = ScheduleWaiting(r, short_only, out, budget);
    }
    switch (a) {
      case Admission::kAdmitted:
        it = waiting_.erase(it);  // (set iterators survive the victims' insertion)
        break;
      case Admission::kDeferred:
        ++num_deferred_;  // keeps its seat against those behind it
        ++it;
        break;
      case Admission::kShortOnly:
        ++it;
        break;
      case Admission::kNoRoom:
        // Head of line waits (no one behind it overtakes: no starvation).
        admission_closed_ = true;
        break;
    }
  }
}

SchedulerOutput Scheduler::Schedule() {
  SchedulerOutput out;
  ++step_;
  num_deferred_ = 0;
  attached_.clear();
  admission_closed_ = false;
  running_preempted_ = false;
  int64_t budget = config_.max_num_batched_tokens;

  // Running requests, most important first; those generating (one pending token) before
  // those still computing their prompt.
  std::vector<Request*> order = running_;
  std::sort(order.begin(), order.end(),
            [&](const Request* a, const Request* b) { return Before(a, b); });
  auto remaining = [](const Request* r) {
    return static_cast<int64_t>(r->tokens.size()) - r->num_computed_tokens;
  };
  const auto prompt_begin = std::stable_partition(
      order.begin(), order.end(), [&](const Request* r) { return remaining(r) == 1; });
  const bool generating = prompt_begin != order.begin();
  auto run = [&](auto first, auto last, auto keep) {
    for (auto i = first; i != last && budget > 0; ++i) {
      Request* r = *i;
      // Preempted earlier in this step, or already scheduled (preempted and re-admitted).
      if (r->state != RequestState::kRunning || r->scheduled_step == step_) continue;
      if (keep(r)) ScheduleRunning(r, &out, &budget);
    }
  };
  run(order.begin(), prompt_begin, [](const Request*) { return true; });
  if (generating && config_.max_prefill_tokens_while_decoding > 0) {
    budget = std::min(budget, config_.max_prefill_tokens_while_decoding);
  }
  // Prompt work: short first (running, then admissions), then the rest. Nothing is admitted
  // in a step that had to preempt for a running request.
  auto is_short = [&](const Request* r) { return IsShort(remaining(r)); };
  run(prompt_begin, order.end(), is_short);
  if (config_.short_prefill_tokens > 0 && !running_preempted_) {
    AdmitWaiting(/*short_only=*/true, &out, &budget);
  }
  run(prompt_begin, order.end(), [&](const Request* r) { return !is_short(r); });
  if (!running_preempted_) AdmitWaiting(/*short_only=*/false, &out, &budget);
  DropUnwrittenAttachments(&out, &budget);
  return out;
}

void Scheduler::DropUnwrittenAttachments(SchedulerOutput* out, int64_t* budget) {
  const int64_t bs = kv_->block_size();
  for (bool changed = !attached_.empty(); changed;) {
    changed = false;
    // Blocks some sequence of the step completes: it writes their last positions now, the rest
    // before (its own uncommitted blocks).
    std::unordered_map<int32_t, const Request*> completed;
    for (const ScheduledSeq& s : out->seqs) {
      const int64_t end = s.pos_start + s.num_new_tokens - s.num_draft_tokens;
      for (int64_t i = s.pos_start / bs; (i + 1) * bs <= end; ++i) {
        completed.emplace(s.block_table[i], s.request);
      }
    }
    for (const Attachment& a : attached_) {
      const std::vector<int32_t>& table = kv_->BlockTable(a.request->seq_id);
      bool written = true;
      for (int64_t i = a.from_block; i < a.to_block && written; ++i) {
        auto w = completed.find(table[i]);
        written = w != completed.end() && w->second != a.request;
      }
      if (written && a.copy_src >= 0) {
        // A request with the same prefix and tokens still holds the source, computed so far
        // (a source whose holder left the step may be another request's block now).
        const int64_t k = a.to_block, start = k * bs;
        const std::vector<int32_t>& r_tokens = a.request->tokens;
        written = std::any_of(running_.begin(), running_.end(), [&](const Request* w) {
          if (w == a.request || !kv_->HasRequest(w->seq_id) || IsCopyTarget(w)) return false;
          const std::vector<int32_t>& t = kv_->BlockTable(w->seq_id);
          return static_cast<int64_t>(t.size()) > k && t[k] == a.copy_src &&
                 t[k - 1] == table[k - 1] && KvAfterStep(*out, w) >= a.copy_end &&
                 static_cast<int64_t>(w->tokens.size()) >= a.copy_end &&
                 std::equal(r_tokens.begin() + start, r_tokens.begin() + a.copy_end,
                            w->tokens.begin() + start);
        });
      }
      if (!written) {  // its writer left the step (preempted): it must not run on those blocks
        // (or copy from them)
        Preempt(a.request, out, budget);  // (erases `a`)
        changed = true;
        break;
      }
    }
  }
}

Request* Scheduler::LeastImportantRunning() const {
  if (running_.empty()) return nullptr;
  return *std::max_element(running_.begin(), running_.end(),
                           [&](const Request* a, const Request* b) { return Before(a, b); });
}

void Scheduler::OnStepComputed(const SchedulerOutput& out) {
  for (const ScheduledSeq& s : out.seqs) {
    Request* r = s.request;
    r->num_computed_tokens = s.pos_start + s.num_new_tokens - s.num_draft_tokens;
    kv_->CommitComputed(r->seq_id, r->tokens, r->num_computed_tokens, r->cache_salt);
  }
}

void Scheduler::OnDraftsVerified(Request* r, int64_t accepted) {
  r->num_computed_tokens += accepted;
  CHECK(r->num_computed_tokens <= static_cast<int64_t>(r->tokens.size()))
      << "accepted drafts past the emitted tokens";
  kv_->CommitComputed(r->seq_id, r->tokens, r->num_computed_tokens, r->cache_salt);
  kv_->FreeBlocksPast(r->seq_id, r->num_computed_tokens + 1);
}

void Scheduler::AccountStep(const SchedulerOutput& out, std::chrono::steady_clock::time_point start,
                            std::chrono::steady_clock::time_point end) {
  const double seconds = std::chrono::duration<double>(end - start).count();
  for (const ScheduledSeq& s : out.seqs) {
    Request* r = s.request;
    TtftBreakdown& t = r->ttft;
    if (t.first_token_seconds >= 0) continue;
    ++t.steps;
    ++t.prefill_steps;
    t.prefill_seconds += seconds;
    t.prefill_tokens += s.num_new_tokens - s.num_draft_tokens;
    t.prefill_step_tokens += out.num_tokens;
    if (s.sample) t.first_token_seconds = std::chrono::duration<double>(end - r->add_time).count();
  }
  for (Request* r : running_) {
    if (r->ttft.first_token_seconds >= 0 || r->scheduled_step == step_) continue;
    ++r->ttft.steps;
    r->ttft.stalled_seconds += seconds;
  }
  for (Request* r : waiting_) {
    if (r->ttft.first_token_seconds >= 0) continue;
    ++r->ttft.steps;
    (r->deferred_step == step_ ? r->ttft.prefix_wait_seconds : r->ttft.queued_seconds) += seconds;
  }
}

void Scheduler::Remove(Request* r) {
  if (r->state == RequestState::kRunning) {
    running_.erase(std::find(running_.begin(), running_.end(), r));
  } else if (r->state == RequestState::kWaiting) {
    waiting_.erase(r);
  }
  kv_->Free(r->seq_id);
  r->state = RequestState::kFinished;
}

}  // namespace tachyon::engine
