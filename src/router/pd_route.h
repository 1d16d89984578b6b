// Internal to router/: prefill/decode disaggregation in the router (docs/pd.md, "Through the
// router").
//
// Roles are a replica label: `role=prefill` / `role=decode` (tachyon serve --role sets it on
// its KV events and etcd registration; `tachyon route --prefill URL / --decode URL` sets it
// for a static list; a replica's own KV events snapshot wins over the flag). While some
// prefill replica is up:
//  - a chat or completion request is placed as usual (same picker: cached prefix + load) on a
//    replica that is not a prefill replica; prefill replicas take a request's main attempt
//    only when no other replica is left (e.g. every decode replica died);
//  - when that replica is a decode replica whose KV listener is known, and the prompt's part
//    the router does not expect cached there has at least `min_prompt_tokens` tokens, the
//    prompt first goes to a prefill replica (chosen by the same picker among the prefill
//    replicas, so KV-aware): the same body with max_tokens 1, not streamed, and
//    kv_transfer_params naming the decode replica's KV listener. When the prefill answers (or
//    fails: the decode replica then computes what did not arrive), the original request goes
//    to the decode replica as any request does (retries, migration). The client sees one
//    ordinary response or stream.
// The prompt's length comes from the router's tokenizer (--tokenizer); without one every
// prompt counts as short.
// Thread-safety: PdRouteState's methods may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "router/replica_pool.h"

namespace tachyon::router {

struct RouterCore;

inline constexpr char kRoleLabel[] = "role";

struct PdRouteOptions {
  int min_prompt_tokens = 256;  // uncached prompt tokens below this skip the prefill tier
};

// Bit r set: replica r is a member labelled role=`role`.
uint64_t RoleMask(const std::vector<ReplicaState>& replicas, std::string_view role);

// The prefill call's body: `body` with max_tokens (and max_completion_tokens) 1, stream false,
// no stream_options / n / logprobs / return_token_ids, and kv_transfer_params {address,
// transfer_id}.
std::string PrefillBody(nlohmann::ordered_json body, const std::string& kv_address,
                        const std::string& transfer_id);

// The KV listener's address from a replica's /v1/replica_info body (null, absent, not
// HOST:PORT: none). A wildcard host (0.0.0.0, ::) is replaced by the host of `replica`.
std::optional<std::string> KvAddressFromInfo(std::string_view info_body, const Endpoint& replica);

class PdRouteState {
 public:
  explicit PdRouteState(PdRouteOptions options) : options_(options) {}

  const PdRouteOptions& options() const { return options_; }

  // The KV listener of the member in slot `replica` at `generation` ("" while unknown).
  void SetKvAddress(int replica, uint64_t generation, std::string address);
  std::string KvAddress(int replica, uint64_t generation) const;
  // Forgets the listeners of the slots whose bit is clear in `keep`.
  void RetainKvAddresses(uint64_t keep);
  std::string NextTransferId();
  // The members labelled role=prefill, as of the last ProbeKvListeners.
  uint64_t prefill_mask() const { return prefill_mask_.load(std::memory_order_relaxed); }

  // What the prefill tier did for a request: ok, failed (the decode replica recomputed), short
  // (below the threshold), no_kv_listener (the placed replica is no decode replica with a known
  // listener), no_prefill (no prefill replica could take it).
  void Count(const char* outcome);
  // Prometheus text: tachyon_router_pd_prefills_total{outcome}, tachyon_router_pd_kv_listeners.
  std::string MetricsText() const;

 private:
  struct Listener {
    uint64_t generation = 0;
    std::string address;
  };
  const PdRouteOptions options_;
  mutable std::mutex mu_;
  std::map<int, Listener> listeners_;        // GUARDED_BY(mu_) by slot
  std::map<std::string, int64_t> outcomes_;  // GUARDED_BY(mu_)
  uint64_t next_id_ = 0;                     // GUARDED_BY(mu_)
  std::atomic<uint64_t> prefill_mask_{0};
  friend void ProbeKvListeners(RouterCore* core);
};

// Run with each probe round and after each membership change: refreshes prefill_mask() from
// the members' labels, and looks up KV listeners: a decode member that is up and whose
// listener is unknown is asked (GET /v1/replica_info); one that is down is forgotten (a
// restarted replica may listen elsewhere).
void ProbeKvListeners(RouterCore* core);

}  // namespace tachyon::router
