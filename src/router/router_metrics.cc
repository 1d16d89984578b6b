#include "router/router_metrics.h"

#include <algorithm>
#include <cstdio>

namespace tachyon::router {
namespace {

void Header(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n";
  out += std::string("# TYPE ") + name + " " + type + "\n";
}

// Label values are replica URLs and fixed words; escape what the format requires anyway.
std::string Label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// A Prometheus label name from a replica's label key: [a-zA-Z_][a-zA-Z0-9_]*, other characters
// as '_'.
std::string LabelName(const std::string& key) {
  std::string out = key.empty() ? "_" : key;
  for (size_t i = 0; i < out.size(); ++i) {
    const char c = out[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                    (i > 0 && c >= '0' && c <= '9');
    if (!ok) out[i] = '_';
  }
  return out;
}

void Line(std::string& out, const std::string& name_and_labels, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  out += name_and_labels + " " + buf + "\n";
}

// A counter with one label: `name{label="KEY"} N` for each entry of `counts`.
void LabelledCounter(std::string& out, const char* name, const char* help, const char* label,
                     const std::map<std::string, int64_t>& counts) {
  Header(out, name, "counter", help);
  for (const auto& [key, n] : counts) {
    Line(out, std::string(name) + "{" + label + "=\"" + Label(key) + "\"}", static_cast<double>(n));
  }
}

// A gauge per replica: `name{replica="URL"} value(state)`.
template <typename Fn>
void ReplicaGauge(std::string& out, const char* name, const char* help,
                  const std::vector<ReplicaState>& replicas, Fn value) {
  Header(out, name, "gauge", help);
  for (const ReplicaState& s : replicas) {
    Line(out, std::string(name) + "{replica=\"" + Label(s.url) + "\"}",
         static_cast<double>(value(s)));
  }
}

template <typename Map>
int64_t CountOf(const Map& counts, const typename Map::key_type& key) {
  auto it = counts.find(key);
  return it == counts.end() ? 0 : it->second;
}

}  // namespace

RouterMetrics::RouterMetrics()
    : decision_({1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 1e-2}),
      kv_lag_({1e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5}) {}

void RouterMetrics::CountAttempt(const std::string& replica, const std::string& outcome) {
  std::lock_guard<std::mutex> lock(mu_);
  attempts_[{replica, outcome}]++;
}

void RouterMetrics::CountRetry() {
  std::lock_guard<std::mutex> lock(mu_);
  retries_++;
}

void RouterMetrics::CountRejected(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  rejected_[reason]++;
}

void RouterMetrics::CountBrokenStream() {
  std::lock_guard<std::mutex> lock(mu_);
  broken_streams_++;
}

void RouterMetrics::CountMigration() {
  std::lock_guard<std::mutex> lock(mu_);
  migrations_++;
}

void RouterMetrics::ObservePlacement(const std::string& replica, const Placement& p,
                                     int prompt_tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  predicted_cached_[replica] += p.predicted_cached_tokens;
  prompt_tokens_[replica] += prompt_tokens;
  forgone_cached_[p.forgone_by_guard ? "balance_guard" : "score"] += p.forgone_cached_tokens;
  decision_.Observe(p.decision_seconds);
  if (!p.weight_group.empty()) weighted_[p.weight_group]++;
}

void RouterMetrics::CountReportedCached(const std::string& replica, int64_t cached) {
  std::lock_guard<std::mutex> lock(mu_);
  reported_cached_[replica] += cached;
}

void RouterMetrics::CountKvEvents(const std::string& replica, int64_t n, double lag_seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  kv_events_[replica] += n;
  kv_lag_.Observe(lag_seconds);
}

void RouterMetrics::CountKvResync(const std::string& replica) {
  std::lock_guard<std::mutex> lock(mu_);
  kv_resyncs_[replica]++;
}

int64_t RouterMetrics::attempts(const std::string& replica, const std::string& outcome) const {
  std::lock_guard<std::mutex> lock(mu_);
  return CountOf(attempts_, {replica, outcome});
}

int64_t RouterMetrics::rejected(const std::string& reason) const {
  std::lock_guard<std::mutex> lock(mu_);
  return CountOf(rejected_, reason);
}

int64_t RouterMetrics::weighted(const std::string& group) const {
  std::lock_guard<std::mutex> lock(mu_);
  return CountOf(weighted_, group);
}

int64_t RouterMetrics::forgone_cached(const std::string& reason) const {
  std::lock_guard<std::mutex> lock(mu_);
  return CountOf(forgone_cached_, reason);
}

int64_t RouterMetrics::kv_events_applied(const std::string& replica) const {
  std::lock_guard<std::mutex> lock(mu_);
  return CountOf(kv_events_, replica);
}

std::string RouterMetrics::Render(const std::vector<ReplicaState>& replicas, size_t queue_length,
                                  size_t indexed_blocks, const char* policy) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  Header(out, "tachyon_router_requests_total", "counter",
         "Attempts on a replica by how they ended.");
  for (const auto& [key, n] : attempts_) {
    Line(out,
         "tachyon_router_requests_total{replica=\"" + Label(key.first) + "\",outcome=\"" +
             Label(key.second) + "\"}",
         static_cast<double>(n));
  }
  Header(out, "tachyon_router_retries_total", "counter",
         "Requests re-issued on another replica before any output reached the client.");
  Line(out, "tachyon_router_retries_total", static_cast<double>(retries_));
  Header(out, "tachyon_router_rejected_total", "counter",
         "Requests answered by the router itself: 429 queue_full, 503 otherwise.");
  for (const char* reason : {"queue_full", "no_replica", "queue_timeout", "retries_exhausted"}) {
    auto it = rejected_.find(reason);
    Line(out, std::string("tachyon_router_rejected_total{reason=\"") + reason + "\"}",
         it == rejected_.end() ? 0.0 : static_cast<double>(it->second));
  }
  Header(out, "tachyon_router_migrations_total", "counter",
         "Streams resumed on another replica after the one serving them failed.");
  Line(out, "tachyon_router_migrations_total", static_cast<double>(migrations_));
  Header(out, "tachyon_router_broken_streams_total", "counter",
         "Streams cut by a replica failure after output had reached the client, not migrated.");
  Line(out, "tachyon_router_broken_streams_total", static_cast<double>(broken_streams_));
  LabelledCounter(out, "tachyon_router_predicted_cached_tokens_total",
                  "Prompt tokens the prefix index predicted cached on the chosen replica.",
                  "replica", predicted_cached_);
  LabelledCounter(out, "tachyon_router_prompt_tokens_total",
                  "Prompt tokens routed to each replica (requests with a computed prompt).",
                  "replica", prompt_tokens_);
  LabelledCounter(out, "tachyon_router_reported_cached_tokens_total",
                  "Cached prompt tokens the replicas reported in their answers' usage.", "replica",
                  reported_cached_);
  Header(out, "tachyon_router_forgone_cached_tokens_total", "counter",
         "Cached prompt tokens another replica held beyond the chosen one's, by what decided: "
         "the balance guard or the score (pending prefill, load).");
  for (const char* reason : {"balance_guard", "score"}) {
    auto it = forgone_cached_.find(reason);
    Line(out, std::string("tachyon_router_forgone_cached_tokens_total{reason=\"") + reason + "\"}",
         it == forgone_cached_.end() ? 0.0 : static_cast<double>(it->second));
  }
  Header(out, "tachyon_router_decision_seconds", "histogram", "Routing decision time.");
  decision_.Render("tachyon_router_decision_seconds", out);
  ReplicaGauge(out, "tachyon_router_replica_up", "1 while the replica takes requests.", replicas,
               [](const ReplicaState& s) { return s.up ? 1 : 0; });
  ReplicaGauge(out, "tachyon_router_replica_in_flight", "Requests in flight per replica.", replicas,
               [](const ReplicaState& s) { return s.in_flight; });
  ReplicaGauge(out, "tachyon_router_replica_pending_prefill_tokens",
               "Uncached prompt tokens of the requests in flight per replica that have produced "
               "no output yet.",
               replicas, [](const ReplicaState& s) { return s.pending_prefill_tokens; });
  Header(out, "tachyon_router_queue_length", "gauge", "Requests waiting for a replica slot.");
  Line(out, "tachyon_router_queue_length", static_cast<double>(queue_length));
  Header(out, "tachyon_router_prefix_index_blocks", "gauge", "Block hashes in the prefix index.");
  Line(out, "tachyon_router_prefix_index_blocks", static_cast<double>(indexed_blocks));
  LabelledCounter(out, "tachyon_router_kv_events_applied_total",
                  "Block stored / removed events applied from each replica's KV event stream.",
                  "replica", kv_events_);
  LabelledCounter(out, "tachyon_router_kv_event_resyncs_total",
                  "Snapshots received from each replica's KV event stream (one per (re)connect).",
                  "replica", kv_resyncs_);
  Header(out, "tachyon_router_kv_event_lag_seconds", "histogram",
         "Age of KV event batches on arrival (the replica's clock).");
  kv_lag_.Render("tachyon_router_kv_event_lag_seconds", out);
  ReplicaGauge(out, "tachyon_router_replica_kv_events",
               "1 while the replica's KV events feed the index (in sync), 0 while it is "
               "approximate.",
               replicas, [](const ReplicaState& s) { return s.events_synced ? 1 : 0; });
  const auto synced = std::count_if(replicas.begin(), replicas.end(),
                                    [](const ReplicaState& s) { return s.events_synced; });
  ReplicaGauge(out, "tachyon_router_replica_reported_load",
               "Sequences running plus waiting on the replica, as its KV event stream reports.",
               replicas,
               [](const ReplicaState& s) { return s.reported.running + s.reported.waiting; });
  Header(out, "tachyon_router_replica_labels", "gauge",
         "1 per replica, with its labels (from its KV events): join on replica to split by label.");
  for (const ReplicaState& s : replicas) {
    std::string labels = "replica=\"" + Label(s.url) + "\"";
    for (const auto& [k, v] : s.labels) {
      if (k == "replica") continue;
      labels += "," + LabelName(k) + "=\"" + Label(v) + "\"";
    }
    Line(out, "tachyon_router_replica_labels{" + labels + "}", 1);
  }
  LabelledCounter(out, "tachyon_router_weighted_requests_total",
                  "Placements per --weight share drawn (KEY=VALUE, or other for the rest).",
                  "group", weighted_);
  Header(out, "tachyon_router_kv_index_mode", "gauge",
         "Replicas whose prefix index is fed by their KV events (events) or by the router's "
         "routing history alone (approximate).");
  Line(out, "tachyon_router_kv_index_mode{mode=\"events\"}", static_cast<double>(synced));
  Line(out, "tachyon_router_kv_index_mode{mode=\"approximate\"}",
       static_cast<double>(replicas.size() - static_cast<size_t>(synced)));
  Header(out, "tachyon_router_info", "gauge", "The routing policy.");
  Line(out, std::string("tachyon_router_info{policy=\"") + policy + "\"}", 1);
  return out;
}

}  // namespace tachyon::router
