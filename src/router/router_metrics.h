// RouterMetrics: what `tachyon route` counts, and its /metrics page (Prometheus text 0.0.4).
//
//   tachyon_router_requests_total{replica,outcome}   attempts on a replica by how they ended:
//       ok (complete answer, any HTTP status the replica chose), connect_failed, timeout,
//       broken (reset / EOF before the end), refused (the replica answered 429 or 503 and
//       the request went elsewhere), client_gone
//   tachyon_router_retries_total                      attempts re-issued on another replica
//   tachyon_router_rejected_total{reason}             429 queue_full; 503 no_replica,
//                                                     queue_timeout, retries_exhausted
//   tachyon_router_migrations_total                   streams resumed on another replica
//   tachyon_router_broken_streams_total               streams cut by a replica failure after
//                                                     output had reached the client and not
//                                                     migrated
//   tachyon_router_predicted_cached_tokens_total{replica}  prompt tokens the index predicted
//   tachyon_router_prompt_tokens_total{replica}             cached, of prompt tokens routed
//   tachyon_router_reported_cached_tokens_total{replica}    cached, as the replicas' usage said
//   tachyon_router_forgone_cached_tokens_total{reason}  kv: cached prompt tokens another
//       replica held beyond the chosen one's (Placement::forgone_cached_tokens), by what chose:
//       balance_guard or score
//   tachyon_router_decision_seconds                   histogram of routing decision time
//   tachyon_router_kv_events_applied_total{replica}   block events applied from its stream
//   tachyon_router_kv_event_resyncs_total{replica}    snapshots received (each (re)connect)
//   tachyon_router_kv_event_lag_seconds               histogram: arrival minus the replica's
//                                                     timestamp of each batch's first event
//   tachyon_router_weighted_requests_total{group}     with --weight: placements per share drawn
//                                                     ("KEY=VALUE" or "other")
// plus gauges rendered from the pool at scrape time: replica_up, replica_in_flight,
// replica_kv_events (1 while its events are in sync), replica_reported_load,
// replica_labels{replica, <its labels>} (1; join on replica to split any metric by label),
// queue_length,
// prefix_index_blocks, and kv_index_mode{mode="events"|"approximate"} (replicas per source).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "router/replica_pool.h"
#include "server/metrics.h"

namespace tachyon::router {

class RouterMetrics {
 public:
  RouterMetrics();

  void CountAttempt(const std::string& replica, const std::string& outcome);
  void CountRetry();
  void CountRejected(const std::string& reason);
  void CountBrokenStream();
  void CountMigration();
  void ObservePlacement(const std::string& replica, const Placement& p, int prompt_tokens);
  // A replica's answer reported `cached` prompt tokens (usage.prompt_tokens_details).
  void CountReportedCached(const std::string& replica, int64_t cached);
  // KV events of a replica's stream: `n` applied, the batch `lag_seconds` old.
  void CountKvEvents(const std::string& replica, int64_t n, double lag_seconds);
  void CountKvResync(const std::string& replica);

  // The value of a counter (tests): requests_total of (replica, outcome), rejected of reason.
  int64_t attempts(const std::string& replica, const std::string& outcome) const;
  int64_t rejected(const std::string& reason) const;
  int64_t kv_events_applied(const std::string& replica) const;
  int64_t weighted(const std::string& group) const;
  int64_t forgone_cached(const std::string& reason) const;

  std::string Render(const std::vector<ReplicaState>& replicas, size_t queue_length,
                     size_t indexed_blocks, const char* policy) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, int64_t> attempts_;
  std::map<std::string, int64_t> rejected_;
  std::map<std::string, int64_t> predicted_cached_;
  std::map<std::string, int64_t> prompt_tokens_;
  std::map<std::string, int64_t> reported_cached_;
  std::map<std::string, int64_t> forgone_cached_;  // by reason
  int64_t retries_ = 0;
  int64_t broken_streams_ = 0;
  int64_t migrations_ = 0;
  std::map<std::string, int64_t> kv_events_;
  std::map<std::string, int64_t> kv_resyncs_;
  std::map<std::string, int64_t> weighted_;
  server::Histogram decision_;
  server::Histogram kv_lag_;
};

}  // namespace tachyon::router
