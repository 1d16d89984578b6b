// ConnectionMetrics: what the HTTP layer counts about connections, for /metrics.
//
//   tachyon_http_connections_open               gauge: connections open now
//   tachyon_http_connections_total              counter: connections accepted (refused ones too)
//   tachyon_http_rejections_total{reason="..."} counter: connections closed or requests refused
//                                                by a connection limit, one series per reason
//
// Kept apart from ServerMetrics (metrics.h) so that the HTTP server does not depend on the
// backend's types. Thread-safe (atomics only).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

namespace tachyon::server {

enum class ConnectionRejection {
  kHeaderTimeout,   // no complete request header within the header timeout (408)
  kIdleTimeout,     // a keep-alive connection sent nothing for the idle timeout (closed)
  kBodyTimeout,     // the body did not arrive within the body timeout (408)
  kMaxConnections,  // refused at accept: the connection limit is reached (503)
  kHeaderTooLarge,  // request line + header fields over the header byte limit (431)
  kTooManyHeaders,  // more header fields than the limit (431)
  kBodyTooLarge,    // Content-Length or chunked body over the body limit (413)
};
inline constexpr int kNumConnectionRejections = 7;

// The `reason` label: "header_timeout", "idle_timeout", ...
const char* ConnectionRejectionName(ConnectionRejection reason);

class ConnectionMetrics {
 public:
  void Opened() {
    open_++;
    accepted_++;
  }
  void Closed() { open_--; }
  // A connection refused before it became a session (counted as accepted, never open).
  void Refused() {
    accepted_++;
    Reject(ConnectionRejection::kMaxConnections);
  }
  void Reject(ConnectionRejection reason) { rejections_[static_cast<int>(reason)]++; }

  int64_t open() const { return open_; }
  int64_t accepted() const { return accepted_; }
  int64_t rejections(ConnectionRejection reason) const {
    return rejections_[static_cast<int>(reason)];
  }

  // Appends the exposition lines of the metrics above (every reason, zeros included).
  void Render(std::string& out) const;

 private:
  std::atomic<int64_t> open_{0};
  std::atomic<int64_t> accepted_{0};
  std::array<std::atomic<int64_t>, kNumConnectionRejections> rejections_{};
};

}  // namespace tachyon::server
