#include "router/pd_route.h"

#include <gtest/gtest.h>

namespace tachyon::router {
namespace {

ReplicaState Member(const char* role, bool member = true) {
  ReplicaState s;
  s.member = member;
  if (role != nullptr) s.labels[kRoleLabel] = role;
  return s;
}

TEST(PdRoute, RoleMaskCountsMembersWithTheLabel) {
  std::vector<ReplicaState> states = {Member("prefill"), Member("decode"), Member(nullptr),
                                      Member("prefill", /*member=*/false), Member("prefill")};
  states[2].labels["zone"] = "prefill";  // another key with the value does not count
  EXPECT_EQ(RoleMask(states, "prefill"), 0b10001u);
  EXPECT_EQ(RoleMask(states, "decode"), 0b00010u);
  EXPECT_EQ(RoleMask({}, "decode"), 0u);
}

TEST(PdRoute, PrefillBodyAsksForOneTokenAndNamesTheListener) {
  nlohmann::ordered_json body = {{"model", "m"},
                                 {"messages", nlohmann::json::array()},
                                 {"max_tokens", 200},
                                 {"max_completion_tokens", 200},
                                 {"stream", true},
                                 {"stream_options", {{"include_usage", true}}},
                                 {"n", 1},
                                 {"logprobs", true},
                                 {"return_token_ids", true},
                                 {"min_tokens", 5},
                                 {"temperature", 0}};
  const auto j = nlohmann::json::parse(PrefillBody(body, "10.0.0.2:9001", "t-1"));
  EXPECT_EQ(j["max_tokens"], 1);
  EXPECT_EQ(j["max_completion_tokens"], 1);
  EXPECT_EQ(j["stream"], false);
  for (const char* gone : {"stream_options", "n", "logprobs", "return_token_ids", "min_tokens"}) {
    EXPECT_FALSE(j.contains(gone)) << gone;
  }
  EXPECT_EQ(j["kv_transfer_params"]["address"], "10.0.0.2:9001");
  EXPECT_EQ(j["kv_transfer_params"]["transfer_id"], "t-1");
  EXPECT_EQ(j["model"], "m");
  EXPECT_EQ(j["temperature"], 0);
  // A body without max_completion_tokens gets none.
  const auto k = nlohmann::json::parse(PrefillBody({{"prompt", "x"}}, "h:1", "t"));
  EXPECT_FALSE(k.contains("max_completion_tokens"));
}

TEST(PdRoute, KvAddressFromReplicaInfo) {
  Endpoint e{"10.1.2.3", 8000, "http://10.1.2.3:8000"};
  EXPECT_EQ(KvAddressFromInfo(R"({"role":"decode","kv_address":"127.0.0.1:9001"})", e),
            "127.0.0.1:9001");
  EXPECT_EQ(KvAddressFromInfo(R"({"kv_address":"0.0.0.0:9001"})", e), "10.1.2.3:9001");
  EXPECT_EQ(KvAddressFromInfo(R"({"kv_address":"[::]:9001"})", e), "10.1.2.3:9001");
  for (const char* bad :
       {R"({"role":"both","kv_address":null})", R"({"role":"decode"})",
        R"({"kv_address":"nocolon"})", R"({"kv_address":":9001"})", R"({"kv_address":"h:"})",
        R"({"kv_address":5})", "[1,2]", "not json", ""}) {
    EXPECT_FALSE(KvAddressFromInfo(bad, e).has_value()) << bad;
  }
}

TEST(PdRoute, ListenersFollowTheSlotsGeneration) {
  PdRouteState pd({});
  EXPECT_EQ(pd.KvAddress(3, 1), "");
  pd.SetKvAddress(3, 1, "h:1");
  pd.SetKvAddress(5, 2, "h:2");
  EXPECT_EQ(pd.KvAddress(3, 1), "h:1");
  EXPECT_EQ(pd.KvAddress(3, 2), "");  // the slot joined again since: unknown
  pd.RetainKvAddresses(uint64_t{1} << 5);
  EXPECT_EQ(pd.KvAddress(3, 1), "");
  EXPECT_EQ(pd.KvAddress(5, 2), "h:2");
  EXPECT_NE(pd.NextTransferId(), pd.NextTransferId());
}

TEST(PdRoute, MetricsCountOutcomes) {
  PdRouteState pd({});
  pd.Count("ok");
  pd.Count("ok");
  pd.Count("short");
  pd.SetKvAddress(0, 0, "h:1");
  const std::string m = pd.MetricsText();
  EXPECT_NE(m.find("tachyon_router_pd_prefills_total{outcome=\"ok\"} 2\n"), std::string::npos);
  EXPECT_NE(m.find("tachyon_router_pd_prefills_total{outcome=\"short\"} 1\n"), std::string::npos);
  EXPECT_NE(m.find("tachyon_router_pd_prefills_total{outcome=\"failed\"} 0\n"), std::string::npos);
  EXPECT_NE(m.find("tachyon_router_pd_kv_listeners 1\n"), std::string::npos);
}

}  // namespace
}  // namespace tachyon::router
