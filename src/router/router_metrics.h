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
//   tachyon_router_decision_seconds                   histogram of routing decision time
// plus gauges rendered from the pool at scrape time: replica_up, replica_in_flight,
// queue_length, prefix_index_blocks, and kv_index_mode{mode="approximate"}.
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

  // The value of a counter (tests): requests_total of (replica, outcome), rejected of reason.
  int64_t attempts(const std::string& replica, const std::string& outcome) const;
  int64_t rejected(const std::string& reason) const;

  std::string Render(const std::vector<ReplicaState>& replicas, size_t queue_length,
                     size_t indexed_blocks, const char* policy) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, int64_t> attempts_;
  std::map<std::string, int64_t> rejected_;
  std::map<std::string, int64_t> predicted_cached_;
  std::map<std::string, int64_t> prompt_tokens_;
  std::map<std::string, int64_t> reported_cached_;
  int64_t retries_ = 0;
  int64_t broken_streams_ = 0;
  int64_t migrations_ = 0;
  server::Histogram decision_;
};

}  // namespace tachyon::router
