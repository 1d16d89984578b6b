#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

namespace tachyon::engine {
namespace {

class SchedulerTest : public ::testing::Test {
 protected:
  void Init(int num_blocks, int64_t budget, int max_seqs = 16,
            SchedulePolicy policy = SchedulePolicy::kFcfs, int64_t short_prefill = 0,
            int64_t prefill_cap = 0) {
    kv_ = std::make_unique<kv::KvCacheManager>(kv::KvCacheConfig{
        .num_blocks = num_blocks, .block_size = 4, .enable_prefix_caching = true});
    sched_ = std::make_unique<Scheduler>(
        SchedulerConfig{.max_num_batched_tokens = budget,
                        .max_num_seqs = max_seqs,
                        .long_prefill_token_threshold = 0,
                        .policy = policy,
                        .short_prefill_tokens = short_prefill,
                        .max_prefill_tokens_while_decoding = prefill_cap},
        kv_.get());
  }
  // `content`: requests with equal content (>= 0) share their prompt's leading tokens.
  Request* NewRequest(int prompt_len, int priority = 0, int content = -1) {
    auto r = std::make_unique<Request>();
    r->seq_id = static_cast<int64_t>(reqs_.size());
    r->arrival = reqs_.size();
    r->priority = priority;
    const int64_t c = content >= 0 ? 1000 + content : r->seq_id;
    for (int i = 0; i < prompt_len; ++i) r->tokens.push_back((3 * i + 7 * c) % 50);
    r->num_prompt_tokens = prompt_len;
    reqs_.push_back(std::move(r));
    sched_->Add(reqs_.back().get());
    return reqs_.back().get();
  }
  // Runs the step "model": advances computed tokens and appends a token when sampled.
  SchedulerOutput Step() {
    SchedulerOutput out = sched_->Schedule();
    sched_->OnStepComputed(out);
    for (const ScheduledSeq& s : out.seqs) {
      if (s.sample) s.request->tokens.push_back(7);
    }
    return out;
  }
  static int64_t NewTokens(const SchedulerOutput& out, const Request* r) {
    for (const ScheduledSeq& s : out.seqs) {
      if (s.request == r) return s.num_new_tokens;
    }
    return 0;
  }

  std::unique_ptr<kv::KvCacheManager> kv_;
  std::unique_ptr<Scheduler> sched_;
  std::vector<std::unique_ptr<Request>> reqs_;
};

TEST_F(SchedulerTest, ChunkedPrefillWithinBudgetAndDecodeFirst) {
  Init(64, 10);
  Request* a = NewRequest(3);
  Request* b = NewRequest(25);
  SchedulerOutput out = Step();
  EXPECT_EQ(NewTokens(out, a), 3);
  EXPECT_EQ(NewTokens(out, b), 7);  // the rest of the budget
  EXPECT_TRUE(out.seqs[0].sample);
  EXPECT_FALSE(out.seqs[1].sample);
  EXPECT_EQ(out.num_tokens, 10);
  for (int step = 0; step < 2; ++step) {
    out = Step();
    EXPECT_EQ(NewTokens(out, a), 1);  // decoding is never starved by b's prefill
    EXPECT_EQ(NewTokens(out, b), 9);
  }
  EXPECT_EQ(b->num_computed_tokens, 25);
  EXPECT_EQ(b->tokens.size(), 26u);  // sampled at the end of its prompt
  out = Step();
  EXPECT_EQ(NewTokens(out, a), 1);
  EXPECT_EQ(NewTokens(out, b), 1);
}

TEST_F(SchedulerTest, BlockTablesCoverTheScheduledTokens) {
  Init(64, 6);
  Request* a = NewRequest(13);
  for (int i = 0; i < 5; ++i) {
    SchedulerOutput out = Step();
    ASSERT_EQ(out.seqs.size(), 1u);
    const ScheduledSeq& s = out.seqs[0];
    EXPECT_GE(static_cast<int64_t>(s.block_table.size()) * 4, s.pos_start + s.num_new_tokens);
    EXPECT_EQ(s.block_table, kv_->BlockTable(a->seq_id));
  }
}

TEST_F(SchedulerTest, FcfsHeadOfLineWaitsForBlocks) {
  Init(5, 100);                 // 20 token slots
  Request* a = NewRequest(16);  // 4 blocks, then a 5th for its first generated token
  Step();
  Request* b = NewRequest(12);  // no block left for it
  Request* c = NewRequest(2);   // would fit, but must not overtake b
  SchedulerOutput out = Step();
  EXPECT_EQ(NewTokens(out, a), 1);
  EXPECT_EQ(NewTokens(out, b), 0);
  EXPECT_EQ(NewTokens(out, c), 0);
  EXPECT_EQ(sched_->num_waiting(), 2);
  sched_->Remove(a);
  out = Step();
  EXPECT_EQ(NewTokens(out, b), 12);
  EXPECT_EQ(NewTokens(out, c), 2);
}

TEST_F(SchedulerTest, PreemptsNewestAndRecomputesIt) {
  Init(4, 100);                // 16 slots
  Request* a = NewRequest(7);  // 2 blocks
  Request* b = NewRequest(6);  // 2 blocks
  SchedulerOutput out = Step();
  ASSERT_EQ(out.seqs.size(), 2u);
  // a: 8 tokens fit in its 2 blocks; at 9 it needs a third and b (newest) is preempted.
  out = Step();
  EXPECT_TRUE(out.preempted.empty());
  out = Step();
  ASSERT_EQ(out.preempted.size(), 1u);
  EXPECT_EQ(out.preempted[0], b->seq_id);
  EXPECT_EQ(NewTokens(out, b), 0);
  EXPECT_EQ(b->state, RequestState::kWaiting);
  EXPECT_EQ(b->num_computed_tokens, 0);
  EXPECT_EQ(sched_->num_preemptions(), 1);
  const size_t b_tokens = b->tokens.size();
  sched_->Remove(a);
  out = Step();
  // b comes back with all its tokens (prompt + generated) recomputed, from the prefix cache.
  EXPECT_EQ(b->state, RequestState::kRunning);
  EXPECT_EQ(b->tokens.size(), b_tokens + 1);
  EXPECT_EQ(out.seqs[0].pos_start + out.seqs[0].num_new_tokens, static_cast<int64_t>(b_tokens));
  EXPECT_EQ(out.seqs[0].pos_start, 4);  // its first full block was cached
}

TEST_F(SchedulerTest, RequestThatFitsAloneAlwaysProgresses) {
  Init(5, 100);  // 20 slots
  Request* big = NewRequest(12);
  Request* other = NewRequest(6);
  for (int i = 0; i < 7; ++i) Step();  // big grows to 19 tokens: other must give way
  EXPECT_GE(big->tokens.size(), 19u);
  EXPECT_EQ(big->state, RequestState::kRunning);
  EXPECT_GT(sched_->num_preemptions(), 0);
  EXPECT_EQ(other->state, RequestState::kWaiting);
}

TEST_F(SchedulerTest, PriorityPolicyOrdersWaitingAndPicksVictims) {
  Init(64, 100, 1, SchedulePolicy::kPriority);
  Request* low = NewRequest(3, 5);
  Request* high = NewRequest(3, 1);
  SchedulerOutput out = Step();
  ASSERT_EQ(out.seqs.size(), 1u);  // one running at a time
  EXPECT_EQ(out.seqs[0].request, high);
  sched_->Remove(high);
  out = Step();
  EXPECT_EQ(out.seqs[0].request, low);
}

TEST_F(SchedulerTest, PriorityRequestPreemptsLowerPriorityForBlocks) {
  Init(4, 100, 16, SchedulePolicy::kPriority);  // 16 slots
  Request* low_old = NewRequest(7, 5);          // 2 blocks
  Request* low_new = NewRequest(6, 5);          // 2 blocks: the pool is full
  SchedulerOutput out = Step();
  ASSERT_EQ(out.seqs.size(), 2u);
  Request* high = NewRequest(7, 1);
  out = Step();
  // The newest of the least important running requests gives way.
  ASSERT_EQ(out.preempted.size(), 1u);
  EXPECT_EQ(out.preempted[0], low_new->seq_id);
  EXPECT_EQ(low_new->state, RequestState::kWaiting);
  EXPECT_EQ(NewTokens(out, low_new), 0);
  EXPECT_EQ(high->state, RequestState::kRunning);
  EXPECT_EQ(NewTokens(out, high), 7);
  EXPECT_EQ(low_old->state, RequestState::kRunning);
  EXPECT_EQ(NewTokens(out, low_old), 1);
  // Once the others are done, the preempted one resumes.
  sched_->Remove(high);
  sched_->Remove(low_old);
  out = Step();
  EXPECT_EQ(low_new->state, RequestState::kRunning);
  EXPECT_GT(NewTokens(out, low_new), 0);
}

TEST_F(SchedulerTest, PriorityRequestTakesTheSeatOfALowerPriorityOne) {
  Init(64, 100, 1, SchedulePolicy::kPriority);
  Request* low = NewRequest(3, 5);
  Step();
  Request* high = NewRequest(3, 1);
  SchedulerOutput out = Step();
  ASSERT_EQ(out.seqs.size(), 1u);
  EXPECT_EQ(out.seqs[0].request, high);
  EXPECT_EQ(low->state, RequestState::kWaiting);
  EXPECT_EQ(sched_->num_preemptions(), 1);
  sched_->Remove(high);
  out = Step();
  ASSERT_EQ(out.seqs.size(), 1u);
  EXPECT_EQ(out.seqs[0].request, low);
}

TEST_F(SchedulerTest, NoPreemptionForEqualPriorityOrUnderFcfs) {
  for (SchedulePolicy policy : {SchedulePolicy::kPriority, SchedulePolicy::kFcfs}) {
    reqs_.clear();
    Init(4, 100, 16, policy);
    NewRequest(7, 5);
    NewRequest(6, 5);
    Step();
    // Same priority (kPriority) or a better one that FCFS ignores: it waits for blocks.
    Request* later = NewRequest(7, policy == SchedulePolicy::kFcfs ? 1 : 5);
    SchedulerOutput out = Step();
    EXPECT_TRUE(out.preempted.empty());
    EXPECT_EQ(later->state, RequestState::kWaiting);
    EXPECT_EQ(sched_->num_preemptions(), 0);
  }
}

// A steady stream of small requests must not starve a large one that arrived earlier: the
// head of the queue blocks those behind it until enough blocks are free.
TEST_F(SchedulerTest, LargeRequestIsNotStarvedByLaterSmallOnes) {
  for (SchedulePolicy policy : {SchedulePolicy::kFcfs, SchedulePolicy::kPriority}) {
    reqs_.clear();
    Init(8, 100, 16, policy);  // 32 slots
    std::vector<Request*> small;
    for (int i = 0; i < 3; ++i) small.push_back(NewRequest(6));
    Step();
    Request* big = NewRequest(24);  // 6 blocks + growth: needs the others gone
    const size_t first_after_big = reqs_.size();
    int steps = 0;
    for (; steps < 200 && big->state != RequestState::kRunning; ++steps) {
      NewRequest(6);  // one more small request every step
      Step();
      for (auto& r : reqs_) {  // small requests finish after 4 generated tokens
        if (r.get() != big && r->state == RequestState::kRunning && r->num_output_tokens() >= 4) {
          sched_->Remove(r.get());
        }
      }
      if (big->state == RequestState::kRunning) break;
      // While the big one waits, no request that arrived after it has started.
      for (size_t i = first_after_big; i < reqs_.size(); ++i) {
        EXPECT_EQ(reqs_[i]->num_cached_prompt_tokens, -1) << "request " << i << " overtook";
      }
    }
    ASSERT_EQ(big->state, RequestState::kRunning) << "starved";
    EXPECT_LT(steps, 20);
  }
}

TEST_F(SchedulerTest, MaxNumSeqsCapsRunning) {
  Init(64, 100, 2);
  NewRequest(3);
  NewRequest(3);
  NewRequest(3);
  SchedulerOutput out = Step();
  EXPECT_EQ(out.seqs.size(), 2u);
  EXPECT_EQ(sched_->num_running(), 2);
  EXPECT_EQ(sched_->num_waiting(), 1);
}

TEST_F(SchedulerTest, LongPrefillThresholdCapsChunks) {
  kv_ = std::make_unique<kv::KvCacheManager>(
      kv::KvCacheConfig{.num_blocks = 64, .block_size = 4, .enable_prefix_caching = true});
  sched_ = std::make_unique<Scheduler>(SchedulerConfig{.max_num_batched_tokens = 100,
                                                       .max_num_seqs = 8,
                                                       .long_prefill_token_threshold = 5,
                                                       .policy = SchedulePolicy::kFcfs},
                                       kv_.get());
  Request* a = NewRequest(12);
  Request* b = NewRequest(3);
  SchedulerOutput out = Step();
  EXPECT_EQ(NewTokens(out, a), 5);
  EXPECT_EQ(NewTokens(out, b), 3);
}

TEST_F(SchedulerTest, PrefillCapWhileDecoding) {
  Init(64, 100, 16, SchedulePolicy::kFcfs, 0, /*prefill_cap=*/6);
  Request* a = NewRequest(20);
  EXPECT_EQ(NewTokens(Step(), a), 20);  // nobody generates: the whole budget
  Request* b = NewRequest(20);
  SchedulerOutput out = Step();
  EXPECT_EQ(NewTokens(out, a), 1);
  EXPECT_EQ(NewTokens(out, b), 6);  // a generates: prompt work capped
  EXPECT_EQ(out.num_tokens, 7);
}

TEST_F(SchedulerTest, AttachesToPrefixBlocksCompletedInTheSameStep) {
  Init(64, 100, /*max_seqs=*/2);
  Request* a = NewRequest(18, 0, /*content=*/1);
  Request* b = NewRequest(18, 0, /*content=*/1);  // same prompt as a
  SchedulerOutput out = Step();
  EXPECT_EQ(NewTokens(out, a), 18);
  // a completes blocks 0-3 in this step: b shares them, copies position 16 from a's block 4
  // (never its last token) and computes only its last token.
  EXPECT_EQ(NewTokens(out, b), 1);
  EXPECT_EQ(b->num_cached_prompt_tokens, 17);
  const std::vector<int32_t>& ta = kv_->BlockTable(a->seq_id);
  const std::vector<int32_t>& tb = kv_->BlockTable(b->seq_id);
  ASSERT_EQ(tb.size(), 5u);
  EXPECT_TRUE(std::equal(tb.begin(), tb.begin() + 4, ta.begin()));
  EXPECT_NE(tb[4], ta[4]);
  EXPECT_EQ(out.seqs[1].copy_src, ta[4]);
  EXPECT_EQ(out.seqs[0].copy_src, -1);
  // Committed once, by a: both find the prompt's blocks cached now.
  EXPECT_EQ(kv_->FindCachedPrefix(a->tokens, "").num_tokens, 16);
}

TEST_F(SchedulerTest, WaitsForInFlightPrefixAndKeepsItsSeat) {
  Init(64, /*budget=*/10, /*max_seqs=*/2);
  Request* a = NewRequest(18, 0, /*content=*/1);
  Request* b = NewRequest(18, 0, /*content=*/1);  // same prompt as a
  Request* c = NewRequest(5);
  SchedulerOutput out = Step();
  EXPECT_EQ(NewTokens(out, a), 10);
  // a completes blocks 0-1 now, 2-3 only in the next step: b waits for them.
  EXPECT_EQ(NewTokens(out, b), 0);
  EXPECT_EQ(b->state, RequestState::kWaiting);
  EXPECT_EQ(b->deferred_step, 1);
  // c may not take the second seat: b, ahead of it, keeps it while it waits.
  EXPECT_EQ(NewTokens(out, c), 0);
  out = Step();  // a's last chunk completes blocks 2-3: b takes them in the same step
  EXPECT_EQ(NewTokens(out, a), 8);
  EXPECT_EQ(NewTokens(out, b), 1);  // (position 16 copied from a's block 4)
  EXPECT_EQ(b->num_cached_prompt_tokens, 17);
  EXPECT_EQ(NewTokens(out, c), 0);  // two running: no seat
}

TEST_F(SchedulerTest, WriterPreemptedAfterAttachmentTakesItsFollowerWithIt) {
  // Priority policy, 10 blocks of 4. Low-priority a has computed 20 of its 26 tokens; b (its
  // prompt) attaches to block 5, which a completes in this step; then c, also important, lacks
  // blocks and preempts a: b must not run on block 5, which nobody writes now.
  Init(10, 20, 16, SchedulePolicy::kPriority);
  Request* a = NewRequest(26, /*priority=*/5, /*content=*/1);
  EXPECT_EQ(NewTokens(Step(), a), 20);
  Request* b = NewRequest(26, /*priority=*/0, /*content=*/1);
  Request* c = NewRequest(12, /*priority=*/0);
  SchedulerOutput out = Step();
  EXPECT_EQ(NewTokens(out, a), 0);
  EXPECT_EQ(NewTokens(out, b), 0);
  EXPECT_EQ(NewTokens(out, c), 12);
  EXPECT_EQ(a->state, RequestState::kWaiting);
  EXPECT_EQ(b->state, RequestState::kWaiting);
  EXPECT_EQ(out.preempted, (std::vector<int64_t>{a->seq_id, b->seq_id}));
  EXPECT_FALSE(kv_->HasRequest(b->seq_id));
  EXPECT_EQ(kv_->Stats().used_blocks, 3);  // c's only
}

TEST_F(SchedulerTest, ShortWorkOvertakesForBudgetButNotForBlocks) {
  // 10 blocks = 40 slots. A long request at the head that cannot get blocks still blocks a
  // short one behind it; one that only lacks budget does not.
  Init(10, 12, 16, SchedulePolicy::kFcfs, /*short_prefill=*/4);
  Request* running = NewRequest(30);
  Step();
  Step();
  Step();                         // 30 computed (8 blocks) and decoding
  Request* big = NewRequest(20);  // needs 5 blocks, 2 free
  Request* small = NewRequest(3);
  SchedulerOutput out = Step();
  EXPECT_EQ(NewTokens(out, running), 1);
  EXPECT_EQ(NewTokens(out, big), 0);
  EXPECT_EQ(NewTokens(out, small), 0);  // behind a head of line that lacks blocks
  sched_->Remove(running);
  Request* hog = NewRequest(40 - 1);  // arrives after small: it is behind in the queue
  out = Step();
  // Now the short one goes first; the big one takes the rest of the budget.
  EXPECT_EQ(NewTokens(out, small), 3);
  EXPECT_EQ(NewTokens(out, big), 9);
  EXPECT_EQ(NewTokens(out, hog), 0);
}

}  // namespace
}  // namespace tachyon::engine
