// Internal to router/: the state a Router shares with its in-flight ProxyCalls, and the queue
// of requests waiting for a replica slot.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <random>

#include "router/router.h"

namespace tachyon::router {

class ProxyCall;

struct RouterCore {
  RouterCore(const RouterOptions& o, const PromptKeys* k)
      : options(o), pool({}, o.pool), keys(k), pd(o.pd), client(o.upstream_threads) {}

  // Queues a saturated request (deadline: options.queue_timeout). False when the queue is full.
  bool Enqueue(const std::shared_ptr<ProxyCall>& call);
  // Takes `call` out of the queue. False when it was not there (already taken).
  bool RemoveQueued(const ProxyCall* call);
  // Offers replica slots to queued requests, oldest first, until one finds none.
  void PumpQueue();
  size_t QueueLength() const;
  // A fresh 64-bit seed for a request the client did not seed.
  uint64_t NextSeed();
  // Adds the replicas' API key (options.replica_api_key), if one is set, to a request the
  // router itself makes of a replica (KV events, replica info).
  void AuthorizeReplicaRequest(UpstreamRequest* req) const {
    if (!options.replica_api_key.empty()) {
      req->headers.emplace_back("Authorization", "Bearer " + options.replica_api_key);
    }
  }

  // Declaration order is destruction order in reverse: `discovery` goes first (its thread
  // feeds the pool and starts calls), then `client` (its pending handlers hold ProxyCalls,
  // which count themselves out of `in_flight` and the queue).
  std::atomic<int> in_flight{0};
  std::atomic<bool> stopped{false};
  std::atomic<bool> draining{false};
  const RouterOptions options;
  ReplicaPool pool;
  RouterMetrics metrics;
  const PromptKeys* keys;
  PdRouteState pd;

 private:
  mutable std::mutex queue_mu_;
  std::deque<std::shared_ptr<ProxyCall>> queue_;   // GUARDED_BY(queue_mu_)
  std::mt19937_64 seeds_{std::random_device{}()};  // GUARDED_BY(queue_mu_)

 public:
  UpstreamClient client;
  std::unique_ptr<Discovery> discovery;  // set by Router::Start
};

}  // namespace tachyon::router
