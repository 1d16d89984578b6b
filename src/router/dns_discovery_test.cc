#include "router/dns_discovery.h"

#include <chrono>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "router/replica_pool.h"
#include "router/testing/router_testing.h"

namespace tachyon::router {
namespace {

TEST(DnsTarget, ParsesAndRejects) {
  Result<DnsTarget> t = ParseDnsTarget("tachyon-replica.default.svc.cluster.local:8080");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->name, "tachyon-replica.default.svc.cluster.local");
  EXPECT_EQ(t->port, 8080);
  EXPECT_EQ(ParseDnsTarget("[::1]:80")->name, "::1");
  for (const char* bad : {"", "name", ":80", "name:", "name:0", "name:65536", "name:8x", "a b:80",
                          "http://name:80"}) {
    EXPECT_FALSE(ParseDnsTarget(bad).ok()) << bad;
  }
}

TEST(DnsDiscovery, FollowsTheAnswerAndKeepsTheLastSetWhenALookupFails) {
  std::mutex mu;
  Result<std::vector<std::string>> answer = std::vector<std::string>{"10.0.0.2", "10.0.0.1"};
  std::vector<std::vector<std::string>> published;
  DnsDiscovery d(*ParseDnsTarget("replicas.test:8080"), std::chrono::milliseconds(10),
                 [&](const std::string& name) -> Result<std::vector<std::string>> {
                   EXPECT_EQ(name, "replicas.test");
                   std::lock_guard<std::mutex> lock(mu);
                   return answer;
                 });
  auto set_answer = [&](Result<std::vector<std::string>> a) {
    std::lock_guard<std::mutex> lock(mu);
    answer = std::move(a);
  };
  auto last = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return published.empty() ? std::vector<std::string>{} : published.back();
  };
  d.Start([&](std::vector<DiscoveredReplica> set) {
    std::vector<std::string> urls;
    for (const auto& r : set) urls.push_back(r.endpoint.url);
    std::lock_guard<std::mutex> lock(mu);
    published.push_back(urls);
  });
  ASSERT_TRUE(Eventually([&] {
    return last() == std::vector<std::string>{"http://10.0.0.1:8080", "http://10.0.0.2:8080"};
  }));
  set_answer(std::vector<std::string>{"10.0.0.2", "fd00::3", "10.0.0.2"});
  ASSERT_TRUE(Eventually([&] {
    return last() == std::vector<std::string>{"http://10.0.0.2:8080", "http://[fd00::3]:8080"};
  }));
  set_answer(Unavailable("resolving 'replicas.test': Name or service not known"));
  ASSERT_TRUE(Eventually([&] { return !d.State().up && d.State().failures >= 2; }));
  EXPECT_EQ(d.State().replicas, 2u);
  EXPECT_NE(d.State().last_error.find("not known"), std::string::npos);
  set_answer(std::vector<std::string>{});  // an empty answer is a failed lookup too
  ASSERT_TRUE(
      Eventually([&] { return d.State().last_error.find("no address") != std::string::npos; }));
  set_answer(std::vector<std::string>{"10.0.0.2", "fd00::3"});
  ASSERT_TRUE(Eventually([&] { return d.State().up; }));
  d.Stop();
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(published.size(), 2u);  // the failures and the unchanged set published nothing
}

TEST(DnsDiscovery, SystemResolverResolvesLocalhost) {
  Result<std::vector<std::string>> a = SystemResolver()("localhost");
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_FALSE(a->empty());
  for (const std::string& ip : *a) EXPECT_TRUE(ip == "127.0.0.1" || ip == "::1") << ip;
  EXPECT_FALSE(SystemResolver()("no-such-host.invalid").ok());
}

std::vector<DiscoveredReplica> Set(std::initializer_list<int> ports) {
  std::vector<DiscoveredReplica> out;
  for (int p : ports) {
    out.push_back({*ParseReplicaUrl("http://127.0.0.1:" + std::to_string(p)), {}});
  }
  return out;
}

TEST(ReplicaPoolMembers, JoinLeaveRejoinAndSlotReuse) {
  ReplicaPool pool({}, PoolOptions{});
  EXPECT_EQ(pool.size(), 0);
  EXPECT_EQ(std::get<PlaceError>(pool.Place({}, 0, 0)), PlaceError::kNoReplica);
  std::vector<DiscoveredReplica> first = Set({1, 2});
  first[1].labels["version"] = "v2";  // an etcd registration's labels
  MembershipChange c = pool.SetMembers(first);
  ASSERT_EQ(c.joined.size(), 2u);
  EXPECT_EQ(pool.Snapshot()[1].labels.at("version"), "v2");
  EXPECT_TRUE(c.left.empty());
  for (const MemberRef& m : c.joined) {
    EXPECT_TRUE(pool.SetProbeResult(m.replica, true, "", m.generation));
  }
  // Replica :1 has a request in flight when it leaves.
  const int on_first = std::get<Placement>(pool.Place({}, 0, 0b10)).replica;
  EXPECT_EQ(on_first, 0);
  c = pool.SetMembers(Set({2}));
  EXPECT_EQ(c.left, std::vector<std::string>{"http://127.0.0.1:1"});
  EXPECT_FALSE(pool.IsCurrent(0, 1));
  EXPECT_TRUE(pool.IsCurrent(1, 1));
  EXPECT_FALSE(pool.SetProbeResult(0, true, ""));  // not a member: ignored
  for (int i = 0; i < 4; ++i) EXPECT_EQ(std::get<Placement>(pool.Place({}, 0, 0)).replica, 1);
  for (int i = 0; i < 4; ++i) pool.Release(1);
  pool.Release(0);  // the request in flight on the replica that left ends normally
  // The same set again changes nothing; :1 rejoins in its old slot with a new generation.
  EXPECT_TRUE(pool.SetMembers(Set({2})).joined.empty());
  c = pool.SetMembers(Set({1, 2}));
  ASSERT_EQ(c.joined.size(), 1u);
  EXPECT_EQ(c.joined[0].replica, 0);
  EXPECT_EQ(c.joined[0].generation, 3u);
  EXPECT_FALSE(pool.SetProbeResult(0, true, "", 1));  // a probe of the old membership
  EXPECT_TRUE(pool.SetProbeResult(0, true, "", 3));
  EXPECT_EQ(pool.Members().size(), 2u);
  // 64 slots: new URLs fill the unused ones, then reuse the one that left longest ago.
  std::vector<DiscoveredReplica> many;
  for (int p = 100; p < 100 + kMaxReplicas; ++p) {
    many.push_back({*ParseReplicaUrl("http://127.0.0.1:" + std::to_string(p)), {}});
  }
  c = pool.SetMembers(many);
  EXPECT_EQ(c.left.size(), 2u);
  EXPECT_EQ(c.joined.size(), static_cast<size_t>(kMaxReplicas));
  EXPECT_TRUE(c.refused.empty());
  EXPECT_EQ(pool.size(), kMaxReplicas);
  many.push_back({*ParseReplicaUrl("http://127.0.0.1:99"), {}});
  c = pool.SetMembers(many);
  EXPECT_EQ(c.refused, std::vector<std::string>{"http://127.0.0.1:99"});
  for (const ReplicaState& s : pool.Snapshot()) EXPECT_TRUE(s.member) << s.url;
}

}  // namespace
}  // namespace tachyon::router
