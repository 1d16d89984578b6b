#include "server/connection_metrics.h"

namespace tachyon::server {

const char* ConnectionRejectionName(ConnectionRejection reason) {
  switch (reason) {
    case ConnectionRejection::kHeaderTimeout:
      return "header_timeout";
    case ConnectionRejection::kIdleTimeout:
      return "idle_timeout";
    case ConnectionRejection::kBodyTimeout:
      return "body_timeout";
    case ConnectionRejection::kMaxConnections:
      return "max_connections";
    case ConnectionRejection::kHeaderTooLarge:
      return "header_too_large";
    case ConnectionRejection::kTooManyHeaders:
      return "too_many_headers";
    case ConnectionRejection::kBodyTooLarge:
      return "body_too_large";
  }
  return "unknown";
}

void ConnectionMetrics::Render(std::string& out) const {
  out +=
      "# HELP tachyon_http_connections_open HTTP connections open now.\n"
      "# TYPE tachyon_http_connections_open gauge\n"
      "tachyon_http_connections_open " +
      std::to_string(open()) + "\n";
  out +=
      "# HELP tachyon_http_connections_total HTTP connections accepted (refused ones "
      "included).\n"
      "# TYPE tachyon_http_connections_total counter\n"
      "tachyon_http_connections_total " +
      std::to_string(accepted()) + "\n";
  out +=
      "# HELP tachyon_http_rejections_total Connections closed or requests refused by a "
      "connection limit, by reason.\n"
      "# TYPE tachyon_http_rejections_total counter\n";
  for (int i = 0; i < kNumConnectionRejections; ++i) {
    auto reason = static_cast<ConnectionRejection>(i);
    out += std::string("tachyon_http_rejections_total{reason=\"") +
           ConnectionRejectionName(reason) + "\"} " + std::to_string(rejections(reason)) + "\n";
  }
}

}  // namespace tachyon::server
