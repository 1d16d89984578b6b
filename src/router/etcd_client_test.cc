#include "router/etcd_client.h"

#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "router/etcd_discovery.h"
#include "router/testing/router_testing.h"
#include "server/http_server.h"
#include "util/base64.h"

namespace tachyon::router {
namespace {

using nlohmann::json;

TEST(EtcdCodec, Base64RoundTripAndRejects) {
  for (std::string s : {"", "a", "ab", "abc", "/tachyon/replicas/127.0.0.1:80", "\xff\x00\x01"}) {
    EXPECT_EQ(util::Base64Decode(util::Base64Encode(s)), s);
  }
  EXPECT_EQ(util::Base64Encode("/tachyon/replicas/a"), "L3RhY2h5b24vcmVwbGljYXMvYQ==");
  for (const char* bad : {"a", "abc", "ab=c", "a===", "****", "ab\ncd==", "=abc"}) {
    EXPECT_FALSE(util::Base64Decode(bad).has_value()) << bad;
  }
  EXPECT_EQ(PrefixRangeEnd("/a/"), "/a0");
  EXPECT_EQ(PrefixRangeEnd("a\xff"), "b");
  EXPECT_EQ(PrefixRangeEnd("\xff"), std::string(1, '\0'));
}

TEST(EtcdCodec, ParsesAnswersAsEtcdWritesThem) {
  EXPECT_EQ(*ParseLeaseGrant(R"({"header":{"revision":"1"},"ID":"4111120374645901317","TTL":"3"})"),
            4111120374645901317);
  EXPECT_EQ(*ParseKeepAlive(R"({"result":{"header":{},"ID":"7","TTL":"3"}})"
                            "\n"),
            3);
  EXPECT_EQ(*ParseKeepAlive(R"({"result":{"header":{},"ID":"7"}})"), 0);  // lease gone
  const Result<EtcdRange> r =
      ParseRange(R"({"header":{"revision":"12"},"kvs":[{"key":"L3RhY2h5b24vcmVwbGljYXMvYQ==",)"
                 R"("value":"eyJ1cmwiOiJodHRwOi8veCJ9","lease":"99"}],"count":"1"})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->revision, 12);
  ASSERT_EQ(r->kvs.size(), 1u);
  EXPECT_EQ(r->kvs[0].key, "/tachyon/replicas/a");
  EXPECT_EQ(r->kvs[0].value, R"({"url":"http://x"})");
  EXPECT_EQ(r->kvs[0].lease, 99);
  EXPECT_TRUE(ParseRange(R"({"header":{"revision":"3"}})")->kvs.empty());
  EXPECT_TRUE(ParseWatchMessage(R"({"result":{"header":{},"created":true}})").ok());
  EXPECT_TRUE(ParseWatchMessage(R"({"result":{"events":[{"type":"DELETE","kv":{}}]}})").ok());
  EXPECT_FALSE(
      ParseWatchMessage(R"({"result":{"canceled":true,"cancel_reason":"compacted"}})").ok());
}

TEST(EtcdCodec, MalformedAnswersAreErrorsNotCrashes) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  for (const std::string& bad :
       {std::string(""), std::string("garbage"), std::string("[]"), std::string("\"x\""),
        std::string("{\"ID\":{}}"), std::string("{\"ID\":\"12x\"}"), std::string("{\"ID\":1.5}"),
        std::string("{\"ID\":\"99999999999999999999999\"}"), std::string("{\"error\":\"boom\"}"),
        std::string("{\"ID\":\"0\"}"), deep, std::string("{\"ID\":") + deep + "}"}) {
    EXPECT_FALSE(ParseLeaseGrant(bad).ok()) << bad.substr(0, 40);
    EXPECT_FALSE(ParseKeepAlive(bad).ok()) << bad.substr(0, 40);
    EXPECT_FALSE(ParseWatchMessage(bad).ok()) << bad.substr(0, 40);
  }
  for (const char* bad :
       {"", "nope", "{\"kvs\":{}}", "{\"kvs\":[1]}", "{\"kvs\":[{\"key\":5}]}",
        "{\"kvs\":[{\"key\":\"***\"}]}", "{\"kvs\":[{\"key\":\"YQ==\",\"value\":\"*\"}]}",
        "{\"kvs\":[{\"key\":\"YQ==\",\"value\":7}]}",
        "{\"kvs\":[{\"key\":\"YQ==\",\"lease\":\"x\"}]}", "{\"header\":{\"revision\":[]}}"}) {
    EXPECT_FALSE(ParseRange(bad).ok()) << bad;
  }
  EXPECT_FALSE(ParseKeepAlive(R"({"result":{"TTL":"ten"}})").ok());
  EXPECT_FALSE(ParseKeepAlive(R"({"error":{"grpc_code":14,"message":"unavailable"}})").ok());
  EXPECT_FALSE(ParseWatchMessage(R"({"result":{"events":{}}})").ok());
  EXPECT_EQ(EtcdErrorMessage(R"({"error":"etcdserver: requested lease not found","code":5})"),
            "etcdserver: requested lease not found");
  EXPECT_EQ(EtcdErrorMessage("\x01oops"), "' oops'");
}

TEST(EtcdRegistrationValue, RoundTripAndRejects) {
  DiscoveredReplica r{*ParseReplicaUrl("http://10.0.0.7:8080"), {{"version", "v2"}}};
  Result<DiscoveredReplica> back = DecodeRegistration(EncodeRegistration(r));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, r);
  for (const char* bad :
       {"", "x", "[]", "{}", R"({"url":5})", R"({"url":"ftp://x:1"})",
        R"({"url":"http://x:1","labels":[]})", R"({"url":"http://x:1","labels":{"a":1}})"}) {
    EXPECT_FALSE(DecodeRegistration(bad).ok()) << bad;
  }
}

TEST(EtcdClient, BadUrlIsAClearError) {
  for (const char* bad : {"etcd:2379", "https://h:2379", "http://h", "http://h:1/v3"}) {
    Result<std::unique_ptr<EtcdClient>> c = EtcdClient::Create(bad, std::chrono::seconds(1));
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_NE(c.status().message().find("etcd URL"), std::string::npos);
  }
}

// An in-memory stand-in for etcd's JSON API: grant / keepalive / revoke / put / range /
// deleterange (no watch), or garbage on every call.
class FakeEtcd {
 public:
  FakeEtcd() {
    server::HttpServerOptions o;
    o.port = 0;
    srv_ = std::make_unique<server::HttpServer>(
        o, [this](server::HttpRequest r, std::shared_ptr<server::ResponseChannel> c) {
          c->Respond(Handle(r));
        });
    EXPECT_TRUE(srv_->Start().ok());
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(srv_->port()); }

  // A restart that lost every lease (and the keys attached to them).
  void ForgetLeases() {
    std::lock_guard<std::mutex> lock(mu_);
    leases_.clear();
    kv_.clear();
  }
  void SetGarbage(bool g) {
    std::lock_guard<std::mutex> lock(mu_);
    garbage_ = g;
  }
  std::map<std::string, std::string> kv() {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<std::string, std::string> out;
    for (const auto& [k, v] : kv_) out[k] = v.first;
    return out;
  }
  int grants() {
    std::lock_guard<std::mutex> lock(mu_);
    return grants_;
  }

 private:
  server::HttpResponse Handle(const server::HttpRequest& r) {
    std::lock_guard<std::mutex> lock(mu_);
    if (garbage_) return {200, "application/json", "{\"result\": [tru", {}};
    const json b = json::parse(r.body, nullptr, false);
    auto ok = [](json j) { return server::HttpResponse{200, "application/json", j.dump(), {}}; };
    auto id = [&b](const char* key) {
      return b.contains(key)
                 ? std::stoll(b[key].is_string() ? b[key].get<std::string>()
                                                 : std::to_string(b[key].get<int64_t>()))
                 : 0;
    };
    if (r.path == "/v3/lease/grant") {
      ++grants_;
      leases_.insert(next_lease_);
      return ok({{"ID", std::to_string(next_lease_++)}, {"TTL", "1"}});
    }
    if (r.path == "/v3/lease/keepalive") {
      json res{{"ID", std::to_string(id("ID"))}};
      if (leases_.count(id("ID"))) res["TTL"] = "1";
      return ok({{"result", res}});
    }
    if (r.path == "/v3/lease/revoke") {
      leases_.erase(id("ID"));
      for (auto it = kv_.begin(); it != kv_.end();) {
        it = it->second.second == id("ID") ? kv_.erase(it) : std::next(it);
      }
      return ok(json::object());
    }
    const std::string key = *util::Base64Decode(b.value("key", ""));
    if (r.path == "/v3/kv/put") {
      if (id("lease") != 0 && !leases_.count(id("lease"))) {
        return {404,
                "application/json",
                R"({"error":"etcdserver: requested lease not found","code":5})",
                {}};
      }
      kv_[key] = {*util::Base64Decode(b.value("value", "")), id("lease")};
      return ok(json::object());
    }
    if (r.path == "/v3/kv/deleterange") {
      kv_.erase(key);
      return ok(json::object());
    }
    if (r.path == "/v3/kv/range") {
      json kvs = json::array();
      for (const auto& [k, v] : kv_) {
        if (k.rfind(key, 0) == 0)
          kvs.push_back({{"key", util::Base64Encode(k)}, {"value", util::Base64Encode(v.first)}});
      }
      return ok({{"header", {{"revision", "5"}}}, {"kvs", kvs}});
    }
    return {404, "text/plain", "no such path", {}};
  }

  std::mutex mu_;
  std::map<std::string, std::pair<std::string, int64_t>> kv_;
  std::set<int64_t> leases_;
  int64_t next_lease_ = 100;
  int grants_ = 0;
  bool garbage_ = false;
  std::unique_ptr<server::HttpServer> srv_;
};

TEST(EtcdClient, CallsAndGarbageAnswers) {
  FakeEtcd etcd;
  auto client = EtcdClient::Create(etcd.url(), std::chrono::seconds(2));
  ASSERT_TRUE(client.ok());
  EtcdClient& c = **client;
  Result<int64_t> lease = c.GrantLease(1);
  ASSERT_TRUE(lease.ok()) << lease.status().message();
  ASSERT_TRUE(c.Put("/p/a", "va", *lease).ok());
  ASSERT_TRUE(c.Put("/q/b", "vb", 0).ok());
  EXPECT_EQ(c.Put("/p/c", "vc", 12345).code(), StatusCode::kNotFound);
  Result<EtcdRange> range = c.RangePrefix("/p/");
  ASSERT_TRUE(range.ok()) << range.status().message();
  ASSERT_EQ(range->kvs.size(), 1u);
  EXPECT_EQ(range->kvs[0].value, "va");
  EXPECT_EQ(*c.KeepAlive(*lease), 1);
  EXPECT_TRUE(c.Delete("/p/a").ok());
  EXPECT_TRUE(c.RangePrefix("/p/")->kvs.empty());
  etcd.SetGarbage(true);
  EXPECT_FALSE(c.GrantLease(1).ok());
  EXPECT_FALSE(c.KeepAlive(*lease).ok());
  EXPECT_FALSE(c.RangePrefix("/p/").ok());
  EXPECT_FALSE(c.Put("/p/a", "va", 0).ok());
}

TEST(EtcdClient, UnreachableIsUnavailable) {
  int port = 0;
  {
    FakeEtcd gone;  // a port nothing listens on once it is closed
    port = std::stoi(gone.url().substr(gone.url().rfind(':') + 1));
  }
  auto client =
      EtcdClient::Create("http://127.0.0.1:" + std::to_string(port), std::chrono::seconds(1));
  ASSERT_TRUE(client.ok());
  Result<EtcdRange> r = (*client)->RangePrefix("/p/");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
}

TEST(EtcdRegistration, KeepsTheKeyThroughALostLeaseAndDeletesItOnDeregister) {
  FakeEtcd etcd;
  DiscoveredReplica self{*ParseReplicaUrl("http://127.0.0.1:8081"), {{"version", "v2"}}};
  EtcdRegistration reg(EtcdClient::Create(etcd.url(), std::chrono::seconds(2)).value(), self,
                       "/tachyon/replicas/", 1);
  EXPECT_EQ(reg.key(), "/tachyon/replicas/127.0.0.1:8081");
  reg.Start();
  ASSERT_TRUE(Eventually([&] { return etcd.kv().count(reg.key()) == 1; }));
  EXPECT_EQ(*DecodeRegistration(etcd.kv()[reg.key()]), self);
  EXPECT_TRUE(reg.registered());
  etcd.ForgetLeases();  // etcd restarted without its data
  ASSERT_TRUE(Eventually([&] { return etcd.grants() >= 2 && etcd.kv().count(reg.key()) == 1; }));
  etcd.SetGarbage(true);  // answers it cannot parse: retried, no crash
  ASSERT_TRUE(Eventually([&] { return !reg.registered(); }));
  etcd.SetGarbage(false);
  ASSERT_TRUE(Eventually([&] { return reg.registered(); }));
  EXPECT_TRUE(reg.Deregister().ok());
  EXPECT_TRUE(etcd.kv().empty());
  EXPECT_TRUE(reg.Deregister().ok());  // idempotent
}

TEST(EtcdDiscovery, PublishesRegistrationsAndKeepsThemWhileEtcdAnswersGarbage) {
  FakeEtcd etcd;
  auto writer = EtcdClient::Create(etcd.url(), std::chrono::seconds(2)).value();
  ASSERT_TRUE(
      writer->Put("/r/a", EncodeRegistration({*ParseReplicaUrl("http://h:1"), {}}), 0).ok());
  ASSERT_TRUE(writer->Put("/r/b", "not a registration", 0).ok());
  std::mutex mu;
  std::vector<std::vector<DiscoveredReplica>> sets;
  EtcdDiscovery d(EtcdClient::Create(etcd.url(), std::chrono::seconds(2)).value(), "/r/",
                  std::chrono::milliseconds(20));
  d.Start([&](std::vector<DiscoveredReplica> s) {
    std::lock_guard<std::mutex> lock(mu);
    sets.push_back(std::move(s));
  });
  auto last_urls = [&] {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<std::string> urls;
    if (!sets.empty()) {
      for (const auto& r : sets.back()) urls.push_back(r.endpoint.url);
    }
    return urls;
  };
  ASSERT_TRUE(Eventually([&] { return last_urls() == std::vector<std::string>{"http://h:1"}; }));
  // The same URL under a second key is one replica.
  ASSERT_TRUE(
      writer->Put("/r/c", EncodeRegistration({*ParseReplicaUrl("http://h:2"), {}}), 0).ok());
  ASSERT_TRUE(
      writer->Put("/r/d", EncodeRegistration({*ParseReplicaUrl("http://h:1"), {}}), 0).ok());
  ASSERT_TRUE(Eventually([&] {
    return last_urls() == std::vector<std::string>{"http://h:1", "http://h:2"};
  }));
  etcd.SetGarbage(true);
  ASSERT_TRUE(Eventually([&] { return !d.State().up && d.State().failures > 0; }));
  EXPECT_EQ(last_urls(), (std::vector<std::string>{"http://h:1", "http://h:2"}));
  EXPECT_EQ(d.State().replicas, 2u);
  etcd.SetGarbage(false);
  ASSERT_TRUE(Eventually([&] { return d.State().up; }));
  d.Stop();
  std::string metrics;
  RenderDiscoveryMetrics(d.State(), metrics);
  EXPECT_NE(metrics.find("tachyon_router_discovery_up{source=\"etcd\"} 1\n"), std::string::npos);
  EXPECT_NE(metrics.find("tachyon_router_discovery_replicas{source=\"etcd\"} 2\n"),
            std::string::npos);
}

}  // namespace
}  // namespace tachyon::router
