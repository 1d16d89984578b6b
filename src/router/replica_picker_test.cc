#include "router/replica_picker.h"

#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace tachyon::router {
namespace {

Candidate C(int in_flight, int matched = 0, bool eligible = true) {
  return Candidate{eligible, in_flight, matched};
}

PickerOptions Kv(uint64_t seed = 1) {
  PickerOptions o;
  o.policy = Policy::kKv;
  o.block_size = 16;
  o.load_weight = 32;
  o.seed = seed;
  return o;
}

TEST(ReplicaPicker, ParsesPolicies) {
  EXPECT_EQ(*ParsePolicy("kv"), Policy::kKv);
  EXPECT_EQ(*ParsePolicy("round_robin"), Policy::kRoundRobin);
  EXPECT_EQ(*ParsePolicy("random"), Policy::kRandom);
  EXPECT_FALSE(ParsePolicy("least_loaded").ok());
}

TEST(ReplicaPicker, KvPrefersTheCachedPrefix) {
  ReplicaPicker p(Kv());
  // 128-token prompt; replica 1 holds 6 of its 8 blocks.
  std::vector<Candidate> c = {C(0), C(0, 6), C(0, 2)};
  EXPECT_EQ(p.Pick(c, 128), 1);
}

TEST(ReplicaPicker, LoadTermOutweighsASmallHit) {
  ReplicaPicker p(Kv());
  // Replica 0 holds one block (16 tokens) but runs 2 requests (64 tokens of load); replica 1
  // runs 1. Scores: 0 -> 112 + 64 = 176, 1 -> 128 + 32 = 160.
  std::vector<Candidate> c = {C(2, 1), C(1, 0)};
  EXPECT_EQ(p.Pick(c, 128), 1);
}

TEST(ReplicaPicker, PendingPrefillCountsAsQueuedWork) {
  ReplicaPicker p(Kv());
  // 128-token prompt; replica 0 holds 6 of its 8 blocks but has 300 uncached prompt tokens of
  // an earlier request still to compute. Scores: 0 -> 32 x (1 + 1) + 300 + 32 = 396,
  // 1 -> 128 + 32 = 160.
  std::vector<Candidate> c = {C(1, 6), C(1, 0)};
  c[0].pending_prefill_tokens = 300;
  c[0].pending_prefill_requests = 1;
  EXPECT_EQ(p.Pick(c, 128), 1);
  // 50 pending tokens: 0 -> 64 + 50 + 32 = 146 < 160.
  c[0].pending_prefill_tokens = 50;
  EXPECT_EQ(p.Pick(c, 128), 0);
}

TEST(ReplicaPicker, ForgoneHitSaysWhatDecided) {
  PickerOptions o = Kv();
  o.balance_slack = 1;
  ReplicaPicker p(o);
  ForgoneHit f;
  // The guard: replica 0 holds 8 blocks but would run 2 > 1.5 x (0 + 1).
  std::vector<Candidate> guarded = {C(1, 8), C(0, 2)};
  EXPECT_EQ(p.Pick(guarded, 160, std::nullopt, &f), 1);
  EXPECT_EQ(f.blocks, 6);
  EXPECT_TRUE(f.by_guard);
  // The score: pending prefill outweighs replica 0's 6 blocks (PendingPrefillCountsAsQueuedWork).
  std::vector<Candidate> scored = {C(1, 6), C(1, 0)};
  scored[0].pending_prefill_tokens = 300;
  scored[0].pending_prefill_requests = 1;
  EXPECT_EQ(p.Pick(scored, 128, std::nullopt, &f), 1);
  EXPECT_EQ(f.blocks, 6);
  EXPECT_FALSE(f.by_guard);
  // One holder kept out by the guard, another as long passing it but outscored: the score.
  std::vector<Candidate> both = {C(2, 6), C(0, 6), C(0, 0)};
  both[1].pending_prefill_tokens = 300;
  both[1].pending_prefill_requests = 1;
  EXPECT_EQ(p.Pick(both, 128, std::nullopt, &f), 2);
  EXPECT_EQ(f.blocks, 6);
  EXPECT_FALSE(f.by_guard);
  // The holder chosen: nothing forgone. An ineligible replica's blocks do not count.
  std::vector<Candidate> kept = {C(0, 8), C(0, 2), C(0, 20, false)};
  EXPECT_EQ(p.Pick(kept, 160, std::nullopt, &f), 0);
  EXPECT_EQ(f.blocks, 0);
  EXPECT_FALSE(f.by_guard);
}

TEST(ReplicaPicker, SharedPromptCostKeepsAHitOnABusyReplica) {
  // 128-token prompt; replica 0 holds 6 of its 8 blocks and has one pending request of 130
  // uncached tokens, replica 1 one of 20; both run one request. Counting its own wait only,
  // the hit does not pay for the longer queue: 0 -> 32 + 130 + 32 = 194, 1 -> 128 + 20 + 32 =
  // 180. Counting the pending request's wait too (it is computed in the same step): 0 -> 64 +
  // 130 + 32 = 226, 1 -> 256 + 20 + 32 = 308.
  std::vector<Candidate> c = {C(1, 6), C(1, 0)};
  c[0].pending_prefill_tokens = 130;
  c[0].pending_prefill_requests = 1;
  c[1].pending_prefill_tokens = 20;
  c[1].pending_prefill_requests = 1;
  PickerOptions own = Kv();
  own.shared_prompt_cost = false;
  EXPECT_EQ(ReplicaPicker(own).Pick(c, 128), 1);
  EXPECT_EQ(ReplicaPicker(Kv()).Pick(c, 128), 0);
}

TEST(ReplicaPicker, SharedPromptCostSendsALongPromptWhereFewerWait) {
  // A 200-token prompt cached nowhere; replica 0 has three short prompts pending (60 tokens),
  // replica 1 one long one (150 tokens); no load term. Own: 0 -> 200 + 60, 1 -> 200 + 150.
  // Shared: 0 -> 200 x 4 + 60 = 860 (three requests would wait for its 200 tokens), 1 -> 200 x
  // 2 + 150 = 550.
  std::vector<Candidate> c = {C(3), C(3)};
  c[0].pending_prefill_tokens = 60;
  c[0].pending_prefill_requests = 3;
  c[1].pending_prefill_tokens = 150;
  c[1].pending_prefill_requests = 1;
  PickerOptions o = Kv();
  o.load_weight = 0;
  EXPECT_EQ(ReplicaPicker(o).Pick(c, 200), 1);
  o.shared_prompt_cost = false;
  EXPECT_EQ(ReplicaPicker(o).Pick(c, 200), 0);
}

TEST(ReplicaPicker, BalanceSlackLetsAHolderRunAFewMore) {
  PickerOptions o = Kv();
  o.balance_slack = 3;
  ReplicaPicker p(o);
  // Replica 0 holds the whole prompt and runs 2 while replica 1 is free: with this request 3,
  // within 0 + 3. Scores: 0 -> 16 + 64 = 80 (the last block is computed anyway), 1 -> 128.
  std::vector<Candidate> c = {C(2, 8), C(0, 0)};
  EXPECT_EQ(p.Pick(c, 128), 0);
  // Running 3, it would run 4 > max(1.5 x 1, 0 + 3).
  std::vector<Candidate> d = {C(3, 8), C(0, 0)};
  EXPECT_EQ(p.Pick(d, 128), 1);
  // At larger counts the ratio governs: least 10 -> up to max(1.5 x 11, 13) = 16.5. A
  // 1024-token prompt: 0 -> 16 + 15 x 32 = 496, 1 -> 1024 + 320.
  std::vector<Candidate> e = {C(15, 64), C(10, 0)};
  EXPECT_EQ(p.Pick(e, 1024), 0);
  std::vector<Candidate> f = {C(16, 64), C(10, 0)};
  EXPECT_EQ(p.Pick(f, 1024), 1);
}

TEST(ReplicaPicker, BalanceGuardSpreadsAHotPrefix) {
  PickerOptions o = Kv();
  o.balance_slack = 1;  // the ratio alone
  ReplicaPicker p(o);
  // Replica 0 holds the whole prompt but already runs one request while replica 1 is free:
  // with this request it would run 2 > 1.5 x (0 + 1).
  std::vector<Candidate> c = {C(1, 8), C(0, 0)};
  EXPECT_EQ(p.Pick(c, 128), 1);
  // Least loaded at 2: a replica may go up to 4.5 -> in_flight 3 still passes, 4 does not.
  std::vector<Candidate> d = {C(3, 8), C(2, 0)};
  EXPECT_EQ(p.Pick(d, 128), 0);
  std::vector<Candidate> e = {C(4, 8), C(2, 0)};
  EXPECT_EQ(p.Pick(e, 128), 1);
}

TEST(ReplicaPicker, SkipsIneligibleAndReportsNone) {
  ReplicaPicker p(Kv());
  std::vector<Candidate> c = {C(0, 8, false), C(5, 0)};
  EXPECT_EQ(p.Pick(c, 128), 1);
  std::vector<Candidate> none = {C(0, 8, false), C(0, 0, false)};
  EXPECT_EQ(p.Pick(none, 128), std::nullopt);
}

TEST(ReplicaPicker, TiesAreRandomAndSeeded) {
  std::vector<Candidate> c = {C(0), C(0), C(0), C(0)};
  std::vector<int> first, again;
  ReplicaPicker a(Kv(7)), b(Kv(7));
  std::set<int> seen;
  for (int i = 0; i < 64; ++i) {
    first.push_back(*a.Pick(c, 64));
    again.push_back(*b.Pick(c, 64));
    seen.insert(first.back());
  }
  EXPECT_EQ(first, again);     // same seed, same states: same choices
  EXPECT_EQ(seen.size(), 4u);  // every tied replica gets picked
}

TEST(ReplicaPicker, RoundRobinCyclesOverEligible) {
  PickerOptions o;
  o.policy = Policy::kRoundRobin;
  ReplicaPicker p(o);
  std::vector<Candidate> c = {C(0), C(9, 8), C(0, 0, false), C(0)};
  std::vector<int> got;
  for (int i = 0; i < 6; ++i) got.push_back(*p.Pick(c, 128));
  EXPECT_EQ(got, (std::vector<int>{0, 1, 3, 0, 1, 3}));
}

TEST(ReplicaPicker, RandomPicksOnlyEligible) {
  PickerOptions o;
  o.policy = Policy::kRandom;
  o.seed = 3;
  ReplicaPicker p(o);
  std::vector<Candidate> c = {C(0, 0, false), C(0), C(0)};
  std::set<int> seen;
  for (int i = 0; i < 64; ++i) seen.insert(*p.Pick(c, 16));
  EXPECT_EQ(seen, (std::set<int>{1, 2}));
}

TEST(ReplicaPicker, KeyedTiesDependOnTheKeyAndTheNamesOnly) {
  const std::vector<uint64_t> names = {
      ReplicaNameHash("http://10.0.0.1:8000"), ReplicaNameHash("http://10.0.0.2:8000"),
      ReplicaNameHash("http://10.0.0.3:8000"), ReplicaNameHash("http://10.0.0.4:8000")};
  std::vector<Candidate> c, reversed;
  for (uint64_t n : names) c.push_back(Candidate{true, 0, 0, n});
  reversed.assign(c.rbegin(), c.rend());
  ReplicaPicker a(Kv(7)), b(Kv(7)), other_seed(Kv(8));
  std::set<uint64_t> seen;
  int differs = 0;
  for (uint64_t key = 0; key < 64; ++key) {
    const int pa = *a.Pick(c, 64, key);
    EXPECT_EQ(*a.Pick(c, 64, key), pa);  // the same answer again: no state is consumed
    // Another picker, the replicas numbered the other way round: the same replica.
    EXPECT_EQ(names[pa], reversed[*b.Pick(reversed, 64, key)].name_hash);
    seen.insert(names[pa]);
    differs += *other_seed.Pick(c, 64, key) != pa ? 1 : 0;
  }
  EXPECT_EQ(seen.size(), 4u);  // keys spread over every tied replica
  EXPECT_GT(differs, 0);       // the seed takes part
  // Only tied replicas take part: a better score wins whatever the key.
  std::vector<Candidate> d = c;
  d[2].matched_blocks = 2;
  for (uint64_t key = 0; key < 16; ++key) EXPECT_EQ(*a.Pick(d, 64, key), 2);
  // A replica out of the tie (more load) is never the keyed choice.
  d[2].matched_blocks = 0;
  d[1].in_flight = 1;
  for (uint64_t key = 0; key < 64; ++key) EXPECT_NE(*a.Pick(d, 64, key), 1);
}

}  // namespace
}  // namespace tachyon::router
