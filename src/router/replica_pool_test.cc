#include "router/replica_pool.h"

#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "router/testing/router_testing.h"

namespace tachyon::router {
namespace {

int Replica(const std::variant<Placement, PlaceError>& r) {
  EXPECT_TRUE(std::holds_alternative<Placement>(r));
  return std::holds_alternative<Placement>(r) ? std::get<Placement>(r).replica : -1;
}

// Places a request that then ends at once (Finish); returns its replica.
int PlaceAndFinish(ReplicaPool& pool, std::span<const kv::BlockHash> hashes, int tokens,
                   uint64_t excluded = 0, std::optional<uint64_t> key = std::nullopt) {
  const Placement p = std::get<Placement>(pool.Place(hashes, tokens, excluded, key));
  Finish(pool, p);
  return p.replica;
}

TEST(ReplicaPool, DownUntilProbedAndSaturatedAtTheCap) {
  PoolOptions o;
  o.max_in_flight = 1;
  ReplicaPool pool(TestEndpoints(2, 9000), o);
  EXPECT_FALSE(pool.AnyUp());
  EXPECT_EQ(std::get<PlaceError>(pool.Place({}, 0, 0)), PlaceError::kNoReplica);
  EXPECT_TRUE(pool.SetProbeResult(0, true, ""));
  EXPECT_FALSE(pool.SetProbeResult(0, true, ""));  // no change
  EXPECT_TRUE(pool.AnyUp());
  EXPECT_EQ(Replica(pool.Place({}, 0, 0)), 0);
  EXPECT_EQ(std::get<PlaceError>(pool.Place({}, 0, 0)), PlaceError::kSaturated);
  pool.Release(0);
  EXPECT_EQ(Replica(pool.Place({}, 0, 0)), 0);
  EXPECT_EQ(pool.Snapshot()[0].in_flight, 1);
}

TEST(ReplicaPool, ExcludedReplicasAreNotChosen) {
  ReplicaPool pool(TestEndpoints(3, 9000), PoolOptions{});
  for (int i = 0; i < 3; ++i) pool.SetProbeResult(i, true, "");
  const uint64_t tried = (1u << 0) | (1u << 2);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(Replica(pool.Place({}, 0, tried)), 1);
  EXPECT_EQ(std::get<PlaceError>(pool.Place({}, 0, 0b111)), PlaceError::kNoReplica);
}

TEST(ReplicaPool, KvAffinityAndForgettingAFailedReplica) {
  PoolOptions o;
  o.picker.policy = Policy::kKv;
  o.picker.seed = 5;
  ReplicaPool pool(TestEndpoints(3, 9000), o);
  for (int i = 0; i < 3; ++i) pool.SetProbeResult(i, true, "");
  const auto prompt = TestChain(0, 6);
  auto first = std::get<Placement>(pool.Place(prompt, 97, 0));
  EXPECT_EQ(first.predicted_cached_tokens, 0);
  Finish(pool, first);
  for (int i = 0; i < 4; ++i) {
    auto again = std::get<Placement>(pool.Place(prompt, 97, 0));
    EXPECT_EQ(again.replica, first.replica);
    EXPECT_EQ(again.predicted_cached_tokens, 96);
    Finish(pool, again);
  }
  // A prompt of exactly six blocks: the replica computes its last token anyway (it needs the
  // logits), so five blocks are a hit there.
  auto exact = std::get<Placement>(pool.Place(prompt, 96, 0));
  EXPECT_EQ(exact.replica, first.replica);
  EXPECT_EQ(exact.predicted_cached_tokens, 80);
  Finish(pool, exact);
  EXPECT_EQ(pool.IndexedBlocks(), 6u);
  EXPECT_TRUE(pool.MarkFailed(first.replica, "connect: refused"));
  EXPECT_FALSE(pool.MarkFailed(first.replica, "again"));
  EXPECT_EQ(pool.IndexedBlocks(), 0u);
  EXPECT_EQ(pool.Snapshot()[first.replica].last_error, "connect: refused");
  auto elsewhere = std::get<Placement>(pool.Place(prompt, 96, 0));
  EXPECT_NE(elsewhere.replica, first.replica);
  EXPECT_EQ(elsewhere.predicted_cached_tokens, 0);
}

TEST(ReplicaPool, ParseLabelWeight) {
  auto w = ParseLabelWeight("version=v2:10");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->key, "version");
  EXPECT_EQ(w->value, "v2");
  EXPECT_EQ(w->percent, 10);
  EXPECT_EQ(w->Name(), "version=v2");
  EXPECT_EQ(ParseLabelWeight("zone=a:b:2.5")->value, "a:b");
  for (const char* bad : {"version", "version=v2", "=v2:10", "version=v2:", "version=v2:x",
                          "version=v2:101", "version=v2:-1", "v:1=x"}) {
    EXPECT_FALSE(ParseLabelWeight(bad).ok()) << bad;
  }
}

TEST(ReplicaPool, CanaryWeightsSendTheirShareToTheLabelledReplicas) {
  auto count_on_canary = [](double percent, bool labelled, int n) {
    PoolOptions o;
    o.picker.policy = Policy::kRoundRobin;
    o.weights = {LabelWeight{"version", "v2", percent}};
    ReplicaPool pool(TestEndpoints(3, 9000), o);
    for (int i = 0; i < 3; ++i) pool.SetProbeResult(i, true, "");
    if (labelled) pool.SetLabels(2, {{"version", "v2"}, {"zone", "a"}});
    pool.SetLabels(1, {{"version", "v1"}});
    int on_canary = 0;
    for (int k = 0; k < n; ++k) {
      auto p = std::get<Placement>(pool.Place({}, 0, 0));
      if (labelled) {
        EXPECT_EQ(p.weight_group, p.replica == 2 ? "version=v2" : "other");
      }
      on_canary += p.replica == 2;
      Finish(pool, p);
    }
    return on_canary;
  };
  const int ten = count_on_canary(10, true, 2000);
  EXPECT_GT(ten, 120);  // 200 expected; the draw is seeded, so this is one fixed sequence
  EXPECT_LT(ten, 280);
  EXPECT_EQ(count_on_canary(0, true, 200), 0);
  EXPECT_EQ(count_on_canary(100, true, 200), 200);
  // No replica carries the label: its share falls back to every replica.
  const int unlabelled = count_on_canary(100, false, 300);
  EXPECT_EQ(unlabelled, 100);  // round-robin over all three
}

// Labels replica URL ...:9000 version=v1, ...:9001 version=v2, ...:9002 version=v3, the rest
// none, whatever order `pool` numbers them in; marks every replica up.
void LabelCanaryReplicas(ReplicaPool& pool, int n) {
  for (int i = 0; i < n; ++i) {
    pool.SetProbeResult(i, true, "");
    const std::string url = pool.endpoint(i).url;
    for (int v = 1; v <= 3; ++v) {
      if (url.ends_with(":" + std::to_string(9000 + v - 1))) {
        pool.SetLabels(i, {{"version", "v" + std::to_string(v)}});
      }
    }
  }
}

PoolOptions CanaryOptions() {
  PoolOptions o;
  o.picker.seed = 11;
  o.weights = {LabelWeight{"version", "v2", 10}, LabelWeight{"version", "v3", 25}};
  return o;
}

TEST(ReplicaPool, RoutersWithDifferentHistoriesPutEachPromptInTheSameCanaryShare) {
  // Two routers over the same five replicas, numbered in opposite orders; each has placed
  // requests the other never saw (short prompts and prompts of blocks). Every prompt of at
  // least one block then lands in the same share on both, and on a replica of that share.
  std::vector<Endpoint> forward = TestEndpoints(5, 9000);
  std::vector<Endpoint> backward(forward.rbegin(), forward.rend());
  ReplicaPool a(forward, CanaryOptions()), b(backward, CanaryOptions());
  LabelCanaryReplicas(a, 5);
  LabelCanaryReplicas(b, 5);
  for (int k = 0; k < 7; ++k) PlaceAndFinish(a, {}, 8);
  for (int k = 0; k < 5; ++k) PlaceAndFinish(a, TestChain(900'000 + 100 * k, 2), 32);
  for (int k = 0; k < 3; ++k) PlaceAndFinish(b, TestChain(800'000 + 100 * k, 1), 16);
  std::set<std::string> groups;
  for (int k = 0; k < 300; ++k) {
    const auto prompt = TestChain(1000 * k, 1 + k % 4);
    const Placement pa = std::get<Placement>(a.Place(prompt, 16 * (1 + k % 4), 0));
    const Placement pb = std::get<Placement>(b.Place(prompt, 16 * (1 + k % 4), 0));
    ASSERT_EQ(pa.weight_group, pb.weight_group) << "prompt " << k;
    const std::string url = a.endpoint(pa.replica).url;
    if (pa.weight_group == "version=v2") {
      EXPECT_TRUE(url.ends_with(":9001")) << url;
    } else if (pa.weight_group == "version=v3") {
      EXPECT_TRUE(url.ends_with(":9002")) << url;
    } else {
      EXPECT_EQ(pa.weight_group, "other");
      EXPECT_FALSE(url.ends_with(":9001") || url.ends_with(":9002")) << url;
    }
    groups.insert(pa.weight_group);
    Finish(a, pa);
    Finish(b, pb);
  }
  EXPECT_EQ(groups.size(), 3u);  // every share drawn
  // A prompt placed again (now cached on its replica) stays in its share.
  const auto again = TestChain(1000 * 17, 2);
  const Placement first = std::get<Placement>(a.Place(again, 32, 0));
  Finish(a, first);
  for (int k = 0; k < 5; ++k) {
    const Placement p = std::get<Placement>(b.Place(again, 32, 0));
    EXPECT_EQ(p.weight_group, first.weight_group);
    Finish(b, p);
  }
}

TEST(ReplicaPool, DistinctPromptsSplitInTheCanaryWeights) {
  // 4000 fixed distinct one-block prompts: 10% / 25% / 65% expected, within two points each.
  ReplicaPool pool(TestEndpoints(5, 9000), CanaryOptions());
  LabelCanaryReplicas(pool, 5);
  std::map<std::string, int> count;
  constexpr int kPrompts = 4000;
  for (int k = 0; k < kPrompts; ++k) {
    const Placement p = std::get<Placement>(pool.Place(TestChain(100 * k, 1), 16, 0));
    count[p.weight_group]++;
    Finish(pool, p);
  }
  EXPECT_NEAR(count["version=v2"], kPrompts * 0.10, kPrompts * 0.02);
  EXPECT_NEAR(count["version=v3"], kPrompts * 0.25, kPrompts * 0.02);
  EXPECT_NEAR(count["other"], kPrompts * 0.65, kPrompts * 0.02);
  EXPECT_EQ(count.size(), 3u);
}

TEST(ReplicaPool, RoutersWithDifferentHistoriesAndOrdersMakeTheSameChoices) {
  // Two routers over the same four replicas, which they number in opposite orders; router A
  // has already placed requests router B never saw (short prompts, ties broken by its RNG).
  // Fed the same prompts in the same state, they choose the same replica for each, because a
  // tie between replicas is settled by the prompt's own hash and the replicas' names.
  std::vector<Endpoint> forward = TestEndpoints(4, 9000);
  std::vector<Endpoint> backward(forward.rbegin(), forward.rend());
  PoolOptions o;
  o.picker.seed = 5;
  ReplicaPool a(forward, o), b(backward, o);
  for (int i = 0; i < 4; ++i) {
    a.SetProbeResult(i, true, "");
    b.SetProbeResult(i, true, "");
  }
  for (int k = 0; k < 7; ++k) PlaceAndFinish(a, {}, 8);
  std::set<std::string> used;
  for (int k = 0; k < 40; ++k) {
    // Unknown prompts (ties everywhere), and a repeat of an earlier one now and then (cached
    // where the first went, on both routers).
    const auto prompt = TestChain(10'000 * (k % 5 == 4 ? k - 4 : k), 3);
    const int ra = PlaceAndFinish(a, prompt, 48);
    const int rb = PlaceAndFinish(b, prompt, 48);
    ASSERT_EQ(a.endpoint(ra).url, b.endpoint(rb).url) << "prompt " << k;
    used.insert(a.endpoint(ra).url);
  }
  EXPECT_EQ(used.size(), 4u);  // distinct prompts spread over every replica
}

TEST(ReplicaPool, KeyedShortPromptsAndReportedLoadGiveTheSameChoices) {
  // Two routers over three replicas, numbered in opposite orders, with different histories:
  // A has placed unkeyed requests (its RNG moved) and has two requests of its own in flight on
  // the replica at port 9000, which that replica reports (running 2) to both. Prompts shorter
  // than a block, named by their keys, then go to the same replica on both, and never to the
  // loaded one while the others are free: each scores its own requests plus the others the
  // replica reports.
  std::vector<Endpoint> forward = TestEndpoints(3, 9000);
  std::vector<Endpoint> backward(forward.rbegin(), forward.rend());
  PoolOptions o;
  o.picker.seed = 5;
  ReplicaPool a(forward, o), b(backward, o);
  for (int i = 0; i < 3; ++i) {
    a.SetProbeResult(i, true, "");
    b.SetProbeResult(i, true, "");
  }
  for (int k = 0; k < 7; ++k) PlaceAndFinish(a, {}, 8);
  const int busy_a = 0, busy_b = 2;  // the replica at port 9000 in each numbering
  ASSERT_EQ(a.endpoint(busy_a).url, b.endpoint(busy_b).url);
  for (int k = 0; k < 2; ++k) EXPECT_EQ(Replica(a.Place({}, 8, ~(uint64_t{1} << busy_a))), busy_a);
  a.SetReportedLoad(busy_a, ReplicaLoad{2, 0, 0.1});
  b.SetReportedLoad(busy_b, ReplicaLoad{2, 0, 0.1});
  std::set<std::string> used;
  for (uint64_t key = 0; key < 60; ++key) {
    const int ra = PlaceAndFinish(a, {}, 8, 0, key * 7919);
    const int rb = PlaceAndFinish(b, {}, 8, 0, key * 7919);
    ASSERT_EQ(a.endpoint(ra).url, b.endpoint(rb).url) << "key " << key;
    used.insert(a.endpoint(ra).url);
  }
  EXPECT_EQ(used.size(), 2u);  // both free replicas, never the loaded one
  EXPECT_FALSE(used.count(a.endpoint(busy_a).url));
}

TEST(ReplicaPool, AReportOfTheRoutersOwnFinishedRequestWeighsNothing) {
  // A replica's last report still counts a request this router has since seen finish (the
  // report lags by a poll): the next request of that prefix goes back there all the same. A
  // sequence the router did not send (another router's) weighs as in flight.
  PoolOptions o;
  o.picker.seed = 5;
  ReplicaPool pool(TestEndpoints(3, 9000), o);
  for (int i = 0; i < 3; ++i) pool.SetProbeResult(i, true, "");
  const auto prompt = TestChain(0, 3);
  const Placement placed = std::get<Placement>(pool.Place(prompt, 49, 0));
  const int first = placed.replica;
  pool.SetReportedLoad(first, ReplicaLoad{1, 0, 0.1});  // it runs our request
  Finish(pool, placed);
  EXPECT_EQ(PlaceAndFinish(pool, prompt, 49), first);
  pool.SetReportedLoad(first, ReplicaLoad{2, 0, 0.1});  // another router's two requests
  const int other = PlaceAndFinish(pool, prompt, 49);
  EXPECT_NE(other, first);  // `first` scores 1 + 2 x 32, a free replica 49
  EXPECT_EQ(pool.Snapshot()[first].others, 2);
}

TEST(ReplicaPool, PendingPrefillWeighsUntilTheFirstOutput) {
  // A request placed on a replica counts its uncached prompt tokens there until PrefillDone: a
  // prompt cached on that replica goes elsewhere while that work is pending, and comes back
  // once it is done.
  PoolOptions o;
  o.picker.seed = 5;
  ReplicaPool pool(TestEndpoints(2, 9000), o);
  for (int i = 0; i < 2; ++i) pool.SetProbeResult(i, true, "");
  const auto shared = TestChain(0, 4);
  const auto other = TestChain(10'000, 4);
  const int home = PlaceAndFinish(pool, shared, 65);  // 64 of its tokens now cached there
  const int away = 1 - home;
  ASSERT_EQ(PlaceAndFinish(pool, other, 65, 1u << away), home);
  const Placement busy = std::get<Placement>(pool.Place(TestChain(50'000, 20), 321, 1u << away));
  ASSERT_EQ(busy.replica, home);
  EXPECT_EQ(busy.prefill_tokens, 321);
  EXPECT_EQ(pool.Snapshot()[home].pending_prefill_tokens, 321);
  EXPECT_EQ(pool.Snapshot()[home].pending_prefill_requests, 1);
  // Scores: home 1 x (1 + 1 pending request) + 321 + 32, away 65.
  const Placement elsewhere = std::get<Placement>(pool.Place(shared, 65, 0));
  EXPECT_EQ(elsewhere.replica, away);
  EXPECT_EQ(elsewhere.prefill_tokens, 65);
  EXPECT_EQ(elsewhere.forgone_cached_tokens, 64);  // home's 4 blocks, for the score
  EXPECT_FALSE(elsewhere.forgone_by_guard);
  Finish(pool, elsewhere);
  // The long prompt is computed (its first token came): for `other`, home scores 1 + 32, away
  // 65.
  pool.PrefillDone(home, busy.prefill_tokens);
  EXPECT_EQ(pool.Snapshot()[home].pending_prefill_tokens, 0);
  EXPECT_EQ(pool.Snapshot()[home].pending_prefill_requests, 0);
  const Placement hit = std::get<Placement>(pool.Place(other, 65, 0));
  EXPECT_EQ(hit.replica, home);
  EXPECT_EQ(hit.prefill_tokens, 1);
  EXPECT_EQ(hit.forgone_cached_tokens, 0);
  Finish(pool, hit);
  pool.Release(home);
  EXPECT_EQ(pool.Snapshot()[home].in_flight, 0);
}

TEST(ReplicaPool, BlockEventsApplyInOrderAcrossSlices) {
  // 700 events (applied 256 at a time under the pool's mutex): a 300-block chain stored, its
  // blocks 100..199 removed, then 150 of another chain stored and block 0 of it removed again.
  ReplicaPool pool(TestEndpoints(2, 9000), PoolOptions{});
  for (int i = 0; i < 2; ++i) pool.SetProbeResult(i, true, "");
  const auto a = TestChain(0, 300);
  const auto b = TestChain(50'000, 150);
  std::vector<BlockEvent> events;
  for (const auto& h : a) events.push_back(BlockEvent{h, true});
  for (int i = 100; i < 200; ++i) events.push_back(BlockEvent{a[i], false});
  for (const auto& h : b) events.push_back(BlockEvent{h, true});
  events.push_back(BlockEvent{b[0], false});
  while (events.size() < 700) events.push_back(BlockEvent{b[0], false});  // no-ops
  pool.ApplyBlockEvents(1, events);
  EXPECT_EQ(pool.IndexedBlocks(), 300u - 100u + 150u - 1u);
  const Placement pa = std::get<Placement>(pool.Place(a, 16 * 300, 0));
  EXPECT_EQ(pa.replica, 1);
  EXPECT_EQ(pa.predicted_cached_tokens, 16 * 100);  // leading blocks 0..99
  Finish(pool, pa);
  const Placement pb = std::get<Placement>(pool.Place(b, 16 * 150, 0));
  EXPECT_EQ(pb.predicted_cached_tokens, 0);  // its first block was removed last
}

}  // namespace
}  // namespace tachyon::router
