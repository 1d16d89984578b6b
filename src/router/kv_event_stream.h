// The router's side of replicas' KV events (`GET /v1/kv_events` of `tachyon serve`, wire form in
// server/kv_events.h and docs/router.md).
//
// KvEventFeed turns one subscription's bytes into ReplicaPool updates: a snapshot (in parts)
// replaces what the index holds for the replica and, once complete, marks it in sync; event
// batches apply in sequence order (a gap or a malformed message is a protocol error: the
// caller drops the stream and resubscribes, which starts from a snapshot); load messages set
// the replica's reported load; {"type":"draining"} takes the replica out of placement (its
// in-flight requests go on). It also counts applied events and their lag (now minus the
// replica's timestamp of the batch's first event; meaningful when clocks agree, e.g. NTP).
//
// StartKvEventStream subscribes to one replica and keeps the subscription alive while the
// replica stays the member it joined as (ReplicaPool::IsCurrent): a stream that ends, fails
// or answers non-200 (an old replica: 404) is retried after `retry_delay`, and meanwhile the
// replica's index is the approximate one (ReplicaPool::SetEventsSynced). Once the replica
// left, the subscription ends at its next message or retry.
//
// Thread-safety: a KvEventFeed is used by one subscription at a time (its upstream strand).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "router/replica_pool.h"
#include "router/router_metrics.h"

namespace tachyon::router {

class KvEventFeed {
 public:
  // `pool` and `metrics` must outlive the feed. `max_event_bytes` bounds one SSE event.
  KvEventFeed(int replica, ReplicaPool* pool, RouterMetrics* metrics,
              size_t max_event_bytes = size_t{64} << 20);

  // Bytes of the stream, in order. False on a protocol error (error() says which); the feed
  // must then be Reset() before more bytes.
  bool Consume(std::string_view bytes);
  // A new subscription starts (forgets a partial event and the sequence).
  void Reset();
  // Whether the replica announced that it drains.
  bool draining() const { return draining_; }
  const std::string& error() const { return error_; }
  // The labels of the last snapshot.
  const std::map<std::string, std::string>& labels() const { return labels_; }

 private:
  bool Message(std::string_view data);
  bool Fail(std::string why);
  bool Blocks(const nlohmann::json& list, bool complete);

  const int replica_;
  ReplicaPool* pool_;
  RouterMetrics* metrics_;
  const size_t max_event_bytes_;
  std::string buffer_;  // bytes of the event being received
  bool have_snapshot_ = false;
  bool in_snapshot_ = false;
  uint64_t seq_ = 0;  // the last event applied
  bool draining_ = false;
  std::string error_;
  std::map<std::string, std::string> labels_;
};

struct RouterCore;

// Subscribes to `member`'s events (see above). Called when it joins (Router::SetReplicas).
void StartKvEventStream(RouterCore* core, const MemberRef& member,
                        std::chrono::milliseconds retry_delay);

}  // namespace tachyon::router
