#include "router/pd_route.h"

#include <memory>

#include "router/router_core.h"
#include "util/logging.h"

namespace tachyon::router {

uint64_t RoleMask(const std::vector<ReplicaState>& replicas, std::string_view role) {
  uint64_t mask = 0;
  for (size_t r = 0; r < replicas.size() && r < 64; ++r) {
    const ReplicaState& s = replicas[r];
    auto it = s.labels.find(kRoleLabel);
    if (s.member && it != s.labels.end() && it->second == role) mask |= uint64_t{1} << r;
  }
  return mask;
}

std::string PrefillBody(nlohmann::ordered_json body, const std::string& kv_address,
                        const std::string& transfer_id) {
  body["max_tokens"] = 1;
  if (body.contains("max_completion_tokens")) body["max_completion_tokens"] = 1;
  body["stream"] = false;
  for (const char* key : {"stream_options", "n", "best_of", "logprobs", "top_logprobs",
                          "return_token_ids", "min_tokens"}) {
    body.erase(key);
  }
  body["kv_transfer_params"] = {{"address", kv_address}, {"transfer_id", transfer_id}};
  return body.dump();
}

std::optional<std::string> KvAddressFromInfo(std::string_view info_body, const Endpoint& replica) {
  const nlohmann::json j = nlohmann::json::parse(info_body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  auto it = j.find("kv_address");
  if (it == j.end() || !it->is_string()) return std::nullopt;
  std::string a = it->get<std::string>();
  const size_t colon = a.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == a.size()) return std::nullopt;
  const std::string host = a.substr(0, colon);
  if (host == "0.0.0.0" || host == "::" || host == "[::]") a = replica.host + a.substr(colon);
  return a;
}

void PdRouteState::SetKvAddress(int replica, uint64_t generation, std::string address) {
  std::lock_guard<std::mutex> lock(mu_);
  listeners_[replica] = Listener{generation, std::move(address)};
}

std::string PdRouteState::KvAddress(int replica, uint64_t generation) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = listeners_.find(replica);
  return it != listeners_.end() && it->second.generation == generation ? it->second.address : "";
}

void PdRouteState::RetainKvAddresses(uint64_t keep) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(listeners_, [keep](const auto& e) { return ((keep >> e.first) & 1) == 0; });
}

std::string PdRouteState::NextTransferId() {
  std::lock_guard<std::mutex> lock(mu_);
  return "router-" + std::to_string(++next_id_);
}

void PdRouteState::Count(const char* outcome) {
  std::lock_guard<std::mutex> lock(mu_);
  ++outcomes_[outcome];
}

std::string PdRouteState::MetricsText() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string o =
      "# HELP tachyon_router_pd_prefills_total Requests by what the prefill tier did: ok, "
      "failed (the decode replica computed what did not arrive), short (below "
      "--pd-min-prompt-tokens), no_kv_listener, no_prefill.\n"
      "# TYPE tachyon_router_pd_prefills_total counter\n";
  for (const char* k : {"ok", "failed", "short", "no_kv_listener", "no_prefill"}) {
    auto it = outcomes_.find(k);
    o += "tachyon_router_pd_prefills_total{outcome=\"" + std::string(k) + "\"} " +
         std::to_string(it == outcomes_.end() ? 0 : it->second) + "\n";
  }
  o += "# HELP tachyon_router_pd_kv_listeners Decode replicas whose KV listener address is known "
       "(from their /v1/replica_info).\n"
       "# TYPE tachyon_router_pd_kv_listeners gauge\n"
       "tachyon_router_pd_kv_listeners " +
       std::to_string(listeners_.size()) + "\n";
  return o;
}

namespace {

void ProbeKvListener(RouterCore* core, const MemberRef& m) {
  UpstreamTimeouts t;
  t.connect = t.read = core->options.probe_timeout;
  UpstreamRequest req;
  req.target = "/v1/replica_info";
  core->AuthorizeReplicaRequest(&req);
  auto body = std::make_shared<std::string>();
  auto status = std::make_shared<int>(0);
  UpstreamHandlers h;
  h.on_head = [status](int s, const server::Headers&) { *status = s; };
  h.on_data = [body](std::string_view d) {
    body->append(d);
    return body->size() < (size_t{1} << 20);
  };
  h.on_done = [core, m, body, status](UpstreamOutcome o, const std::string&) {
    if (o != UpstreamOutcome::kComplete || *status != 200) return;
    if (!core->pool.IsCurrent(m.replica, m.generation)) return;
    if (auto a = KvAddressFromInfo(*body, m.endpoint)) {
      if (core->pd.KvAddress(m.replica, m.generation) != *a) {
        TLOG(INFO) << "decode replica " << m.endpoint.url << ": KV listener at " << *a;
      }
      core->pd.SetKvAddress(m.replica, m.generation, *a);
    }
  };
  core->client.Start(m.endpoint, std::move(req), t, std::move(h));
}

}  // namespace

void ProbeKvListeners(RouterCore* core) {
  const std::vector<ReplicaState> states = core->pool.Snapshot();
  core->pd.prefill_mask_.store(RoleMask(states, "prefill"), std::memory_order_relaxed);
  uint64_t keep = RoleMask(states, "decode");
  for (size_t r = 0; r < states.size() && r < 64; ++r) {
    if (!states[r].up) keep &= ~(uint64_t{1} << r);
  }
  core->pd.RetainKvAddresses(keep);
  for (const MemberRef& m : core->pool.Members()) {
    if (((keep >> m.replica) & 1) && core->pd.KvAddress(m.replica, m.generation).empty()) {
      ProbeKvListener(core, m);
    }
  }
}

}  // namespace tachyon::router
