// Server-side metrics and their Prometheus text exposition (format 0.0.4).
//
// ServerMetrics counts finished HTTP requests by endpoint and status and keeps latency
// histograms measured at the server (TTFT, TPOT, end-to-end, queue time). It owns the HTTP
// layer's ConnectionMetrics (open connections, rejections by reason; the HttpServer is given a
// pointer to them). Render() adds the backend's gauges and counters. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "server/backend.h"
#include "server/connection_metrics.h"

namespace tachyon::server {

// A cumulative histogram with fixed upper bounds (seconds). Not thread-safe by itself.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  // Appends the _bucket/_sum/_count lines of metric `name`.
  void Render(const std::string& name, std::string& out) const;
  int64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bucket, not cumulative; last is +Inf
  int64_t count_ = 0;
  double sum_ = 0;
};

class ServerMetrics {
 public:
  ServerMetrics();

  // A finished HTTP request to `endpoint` ("/v1/completions", ...) with HTTP `status`.
  void CountRequest(const std::string& endpoint, int status);
  // Timings of one finished generation (one choice), in seconds; negative values are skipped.
  void ObserveGeneration(double ttft, double tpot, double e2e, double queue);

  // Counted by the HttpServer (HttpServerOptions::metrics); rendered with the rest.
  ConnectionMetrics& connection_metrics() { return connections_; }

  // The whole /metrics page.
  std::string Render(const engine::EngineMetrics& engine, bool ready) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> requests_;
  Histogram ttft_;
  Histogram tpot_;
  Histogram e2e_;
  Histogram queue_;
  ConnectionMetrics connections_;
};

}  // namespace tachyon::server
