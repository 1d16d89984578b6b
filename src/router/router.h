// Router: the HTTP handler of `tachyon route`, an OpenAI-compatible front over replicas that
// are plain `tachyon serve` processes.
//
// - POST /v1/chat/completions, /v1/completions, /tokenize, /detokenize and GET /v1/models[/ID]
//   are proxied to one replica, chosen by the ReplicaPool (policy kv: the prompt's prefix
//   blocks, computed by PromptKeys, against what was routed where, plus load). Streams are
//   passed on piece by piece as the replica writes them. Responses carry
//   `X-Tachyon-Replica: URL`.
// - Failures: an attempt that fails before any byte reached the client (connect refused,
//   reset, EOF before the end, timeout, a 429/503 from the replica) is retried on a replica not
//   tried yet, at most `max_retries` times; then 503 with Retry-After. A stream cut after
//   output reached the client is migrated (same budget): re-issued elsewhere as a continuation
//   (resume_token_ids = the token ids forwarded so far, which replicas are asked to return),
//   its events rewritten into the original stream. Each unfinished choice of n > 1 resumes
//   as a continuation of its own (n = 1, the seed of that choice), one after another, its
//   events renumbered to the choice's index; a structured output's constraint is replayed over
//   the resumed tokens by the replica, as are stop strings, penalties and the reasoning /
//   tool-call parsers. A stream a continuation cannot reproduce (several prompts, echo) ends
//   with an SSE error event instead (a broken stream).
// - Saturation: with every up replica at its in-flight cap, a request waits in a FIFO queue
//   of at most `max_queue`, at most `queue_timeout` (then 503); beyond the bound, 429 with
//   Retry-After. No replica up: 503 with Retry-After at once.
// - GET /health: 200 while the process serves. GET /ready, /health/ready: 200 while some
//   replica is up, else 503. GET /metrics: RouterMetrics.
// - Membership: a Discovery (router/discovery.h: a static list, DNS or etcd) hands each replica
//   set to ReplicaPool::SetMembers; a replica that joins is probed and subscribed to at once,
//   one that leaves takes no new request (those in flight there go on). GET /metrics adds the
//   discovery's state (tachyon_router_discovery_*).
// - Active probes: GET /ready of every replica each `probe_interval`.
// - Prefill/decode disaggregation: replicas labelled role=prefill run long prompts for the
//   decode replica chosen (router/pd_route.h); GET /metrics adds tachyon_router_pd_*.
// - KV events: a subscription to every replica's GET /v1/kv_events (router/kv_event_stream.h)
//   feeds the prefix index and the replicas' reported load; resubscribed each
//   `probe_interval` while down.
//
// Thread-safety: Handle may be called concurrently (HttpServer io threads).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "router/discovery.h"
#include "router/pd_route.h"
#include "router/prompt_keys.h"
#include "router/replica_pool.h"
#include "router/router_metrics.h"
#include "router/upstream_client.h"
#include "server/http.h"

namespace tachyon::router {

struct RouterOptions {
  PoolOptions pool;
  int max_queue = 256;
  std::chrono::milliseconds queue_timeout{30'000};
  int max_retries = 2;
  UpstreamTimeouts timeouts;
  std::chrono::milliseconds probe_interval{1000};
  std::chrono::milliseconds probe_timeout{1000};
  int retry_after_s = 1;  // the Retry-After of the router's own 429 / 503
  int upstream_threads = 2;
  size_t max_response_bytes = size_t{64} << 20;  // a non-streamed answer larger than this: 502
  std::string replica_api_key;  // sent with the router's own calls (GET /v1/kv_events)
  bool kv_events = true;        // subscribe to the replicas' KV events
  PdRouteOptions pd;            // prefill/decode disaggregation (router/pd_route.h)
};

struct RouterCore;

class Router {
 public:
  // `keys` (may be null: no prefix keys; then policy kv scores load only) must outlive the
  // router. The replicas come from the Discovery given to Start.
  Router(const RouterOptions& options, const PromptKeys* keys);
  ~Router();

  // Starts `discovery` (the router owns it from now on) and the health probes (the first
  // round at once). Call once.
  void Start(std::unique_ptr<Discovery> discovery);
  void Handle(server::HttpRequest request, std::shared_ptr<server::ResponseChannel> channel);

  // Ready: some replica is up and the router is not draining.
  bool Ready() const;
  // SIGTERM: /ready answers 503 from now on (a load balancer in front stops sending); requests
  // still arriving are served.
  void Drain();
  // Client requests not yet answered completely.
  int InFlight() const;
  // Stops discovery, probes and upstream io; requests in flight end without an answer.
  // Idempotent.
  void Stop();

  const RouterMetrics& metrics() const;
  const ReplicaPool& pool() const;

 private:
  void Probe();
  // A discovery's new set: joins and leaves in the pool; joined replicas probed and
  // subscribed to.
  void SetReplicas(std::vector<DiscoveredReplica> set);

  std::unique_ptr<RouterCore> core_;
};

}  // namespace tachyon::router
