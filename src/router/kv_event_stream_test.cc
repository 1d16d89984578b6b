#include "router/kv_event_stream.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>

#include "kv/kv_events.h"
#include "router/testing/router_testing.h"

namespace tachyon::router {
namespace {

using nlohmann::json;

json Hexes(const std::vector<kv::BlockHash>& hashes) {
  json out = json::array();
  for (const auto& h : hashes) out.push_back(kv::BlockHashHex(h));
  return out;
}

std::string Sse(const json& msg) {
  return "data: " + msg.dump() + "\n\n";
}

std::string Snapshot(uint64_t seq, const std::vector<kv::BlockHash>& blocks, bool complete = true) {
  return Sse({{"type", "snapshot"},
              {"seq", seq},
              {"block_size", 16},
              {"blocks", Hexes(blocks)},
              {"complete", complete},
              {"labels", {{"version", "v2"}}},
              {"load", {{"running", 3}, {"waiting", 1}, {"kv_usage", 0.5}}}});
}

std::string Events(uint64_t first, const std::vector<kv::BlockHash>& hashes, const char* kind) {
  json list = json::array();
  for (const auto& h : hashes) list.push_back({kind, kv::BlockHashHex(h)});
  return Sse({{"type", "events"}, {"seq", first}, {"time", 0.0}, {"events", list}});
}

struct Fixture {
  explicit Fixture(int n = 2) : pool(TestEndpoints(n, 9100), Options()) {
    for (int i = 0; i < n; ++i) pool.SetProbeResult(i, true, "");
  }
  static PoolOptions Options() {
    PoolOptions o;
    o.picker.policy = Policy::kKv;
    o.picker.seed = 3;
    return o;
  }
  // The predicted cached tokens of `replica` for `prompt` (its blocks and one token more, so
  // that every block can be a hit), without placing there for good.
  int Cached(const std::vector<kv::BlockHash>& prompt, int replica) {
    uint64_t others = ~(uint64_t{1} << replica);
    const int tokens = 16 * static_cast<int>(prompt.size()) + 1;
    auto p = std::get<Placement>(pool.Place(prompt, tokens, others));
    Finish(pool, p);
    return p.predicted_cached_tokens;
  }
  ReplicaPool pool;
  RouterMetrics metrics;
};

TEST(KvEventFeed, SnapshotThenEventsFeedTheIndexInAnyFraming) {
  const auto a = TestChain(0, 4);
  const auto b = TestChain(1000, 2);
  const std::string stream = Snapshot(5, {a[0], a[1]}) + Events(6, {a[2], a[3]}, "stored") +
                             Events(8, {a[3]}, "removed") +
                             Sse({{"type", "load"}, {"running", 7}, {"waiting", 2}});
  for (size_t piece : {size_t{1}, size_t{7}, stream.size()}) {
    Fixture f;
    KvEventFeed feed(0, &f.pool, &f.metrics);
    for (size_t i = 0; i < stream.size(); i += piece) {
      ASSERT_TRUE(feed.Consume(std::string_view(stream).substr(i, piece))) << feed.error();
    }
    const ReplicaState s = f.pool.Snapshot()[0];
    EXPECT_TRUE(s.events_synced);
    EXPECT_EQ(s.reported.running, 7);
    EXPECT_EQ(s.reported.waiting, 2);
    EXPECT_EQ(feed.labels().at("version"), "v2");
    EXPECT_EQ(f.Cached(a, 0), 3 * 16);  // a[3] was removed again
    EXPECT_EQ(f.Cached(b, 0), 0);
    EXPECT_EQ(f.metrics.kv_events_applied("http://127.0.0.1:9100"), 3);
  }
}

TEST(KvEventFeed, ASnapshotReplacesWhatTheIndexHeld) {
  Fixture f;
  const auto a = TestChain(0, 3);
  auto p = std::get<Placement>(f.pool.Place(a, 48, 0b10));  // routed: approximate blocks
  Finish(f.pool, p);
  EXPECT_EQ(f.Cached(a, 0), 48);
  KvEventFeed feed(0, &f.pool, &f.metrics);
  // In parts: not in sync until the last one.
  ASSERT_TRUE(feed.Consume(Snapshot(9, {a[0]}, false)));
  EXPECT_FALSE(f.pool.Snapshot()[0].events_synced);
  ASSERT_TRUE(feed.Consume(
      Sse({{"type", "snapshot_part"}, {"blocks", Hexes({a[1]})}, {"complete", true}})));
  EXPECT_TRUE(f.pool.Snapshot()[0].events_synced);
  EXPECT_EQ(f.Cached(a, 0), 32);
  ASSERT_TRUE(feed.Consume(Events(10, {a[2]}, "stored")));
  EXPECT_EQ(f.Cached(a, 0), 48);
}

TEST(KvEventFeed, GapsAndMalformedMessagesAreProtocolErrors) {
  const auto a = TestChain(0, 2);
  struct Case {
    std::string bytes;
    std::string error;
  };
  const std::vector<Case> cases = {
      {Snapshot(1, {}) + Events(3, {a[0]}, "stored"), "events from 3 after 1"},
      {Events(1, {a[0]}, "stored"), "events before a complete snapshot"},
      {Snapshot(1, {}, false) + Events(2, {a[0]}, "stored"), "events before a complete snapshot"},
      {"data: [1,2]\n\n", "a message that is not a JSON object with a 'type'"},
      {"data: {not json\n\n", "a message that is not a JSON object with a 'type'"},
      {Sse({{"type", "snapshot"}, {"seq", 1}, {"blocks", json::array({"xyz"})}}),
       "a snapshot block that is not a 32-digit hex hash"},
      {Sse({{"type", "snapshot"}, {"seq", -1}, {"blocks", json::array()}}),
       "a snapshot without a 'seq'"},
      {Snapshot(1, {}) + Sse({{"type", "events"},
                              {"seq", 2},
                              {"events", json::array({json::array({"kept", "00"})})}}),
       "an event that is not [\"stored\"|\"removed\", hash]"},
      {Sse({{"type", "snapshot_part"}, {"blocks", json::array()}}),
       "a snapshot part outside a snapshot"},
  };
  for (const Case& c : cases) {
    Fixture f;
    KvEventFeed feed(0, &f.pool, &f.metrics);
    EXPECT_FALSE(feed.Consume(c.bytes)) << c.bytes;
    EXPECT_EQ(feed.error(), c.error) << c.bytes;
    EXPECT_FALSE(f.pool.Snapshot()[0].events_synced);
    EXPECT_FALSE(feed.Consume(Snapshot(1, {})));  // stays failed until Reset
    feed.Reset();
    EXPECT_TRUE(feed.Consume(Snapshot(1, {}))) << feed.error();
  }
  Fixture f;
  KvEventFeed small(0, &f.pool, &f.metrics, 64);
  EXPECT_FALSE(small.Consume("data: " + std::string(100, 'x')));
  EXPECT_EQ(small.error(), "an event longer than 64 bytes");
  // Unknown types are ignored (a newer replica).
  KvEventFeed feed(1, &f.pool, &f.metrics);
  EXPECT_TRUE(feed.Consume(Sse({{"type", "something_new"}})));
}

TEST(KvEventFeed, DrainingTakesTheReplicaOutOfPlacement) {
  Fixture f;
  KvEventFeed feed(1, &f.pool, &f.metrics);
  ASSERT_TRUE(feed.Consume(Snapshot(0, {})));
  ASSERT_TRUE(feed.Consume(Sse({{"type", "draining"}})));
  EXPECT_TRUE(feed.draining());
  const ReplicaState s = f.pool.Snapshot()[1];
  EXPECT_FALSE(s.up);
  EXPECT_EQ(s.last_error, "draining");
  for (int i = 0; i < 4; ++i) {
    auto p = std::get<Placement>(f.pool.Place({}, 0, 0));
    EXPECT_EQ(p.replica, 0);
    Finish(f.pool, p);
  }
}

// Several routers over the same replicas: fed the same events, they place the same requests
// on the same replicas, ties included (the tie-break RNG is seeded).
TEST(KvEventFeed, RoutersFedTheSameEventsMakeTheSameChoices) {
  constexpr int kReplicas = 4;
  Fixture r1(kReplicas), r2(kReplicas);
  std::vector<std::unique_ptr<KvEventFeed>> feeds1, feeds2;
  for (int i = 0; i < kReplicas; ++i) {
    feeds1.push_back(std::make_unique<KvEventFeed>(i, &r1.pool, &r1.metrics));
    feeds2.push_back(std::make_unique<KvEventFeed>(i, &r2.pool, &r2.metrics));
    // Replica i holds the first i blocks of prefix 0, and prefix i + 1 whole.
    std::vector<kv::BlockHash> held = TestChain(0, i);
    for (const auto& h : TestChain(1000 * (i + 1), 4)) held.push_back(h);
    ASSERT_TRUE(feeds1[i]->Consume(Snapshot(0, held)));
    ASSERT_TRUE(feeds2[i]->Consume(Snapshot(0, held)));
  }
  std::vector<int> picks1, picks2;
  std::set<int> distinct;
  for (int k = 0; k < 40; ++k) {
    // A mix of cached prefixes, ties (unknown prompts) and load.
    const auto prompt = k % 3 == 0   ? TestChain(0, 4)
                        : k % 3 == 1 ? TestChain(1000 * (1 + k % 4), 4)
                                     : TestChain(50'000 + k, 4);
    auto p1 = std::get<Placement>(r1.pool.Place(prompt, 64, 0));
    auto p2 = std::get<Placement>(r2.pool.Place(prompt, 64, 0));
    picks1.push_back(p1.replica);
    picks2.push_back(p2.replica);
    distinct.insert(p1.replica);
    if (k % 2 == 0) {
      Finish(r1.pool, p1);
      Finish(r2.pool, p2);
    }
  }
  EXPECT_EQ(picks1, picks2);
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kReplicas));  // not all on one replica
  // Prefix 0 is longest on replica 3 (3 blocks): with the pool idle it goes there.
  Fixture idle(kReplicas);
  for (int i = 0; i < kReplicas; ++i) {
    KvEventFeed feed(i, &idle.pool, &idle.metrics);
    ASSERT_TRUE(feed.Consume(Snapshot(0, TestChain(0, i))));
  }
  EXPECT_EQ(std::get<Placement>(idle.pool.Place(TestChain(0, 4), 64, 0)).replica, 3);
}

}  // namespace
}  // namespace tachyon::router
