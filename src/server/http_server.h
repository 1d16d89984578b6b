// HttpServer: an asynchronous HTTP/1.1 server (Boost.Asio/Beast) with a few io threads serving
// any number of connections. Each request is handed to an HttpHandler with a ResponseChannel;
// streamed responses use chunked transfer encoding.
//
// - Keep-alive. Connection limits (each counted in `metrics` by reason, see
//   connection_metrics.h):
//   * `header_timeout`: a request header (request line + fields) not complete this long after
//     the connection opened, or after the first byte of a later request, gets 408 and a close.
//   * `idle_timeout`: a keep-alive connection with no byte of a next request this long after the
//     last answer is closed (no response).
//   * `body_timeout`: a body not complete this long after its header gets 408 and a close.
//   * `max_connections`: with that many connections open, a new one is accepted, answered a
//     fixed 503 (Connection: close, Retry-After: 1) and closed at once; open connections and
//     their streams are unaffected. 0: no limit.
//   * `max_header_bytes` / `max_headers`: a header over either limit gets 431 and a close.
// - Bodies over `max_body_bytes` get 413 before the body is read (Expect: 100-continue honoured).
// - While a request is in flight the socket is watched, so a client that disconnects is noticed
//   at once (ResponseChannel OnClose), not at the next write.
// - Stream writes are queued per connection; if more than `max_stream_buffer_bytes` are waiting
//   for a slow reader, the connection is dropped (OnClose) instead of buffering without bound.
// - With `cors`, every response allows any origin and OPTIONS preflights are answered.
//
// Thread-safety: Start/StopAccepting/Stop from one controlling thread. The handler runs on io
// threads, concurrently for different connections.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "server/connection_metrics.h"
#include "server/http.h"
#include "util/status.h"

namespace tachyon::server {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (see port())
  int io_threads = 2;
  size_t max_body_bytes = 8u << 20;
  size_t max_stream_buffer_bytes = 4u << 20;
  std::chrono::milliseconds header_timeout{30'000};
  std::chrono::milliseconds idle_timeout{60'000};
  std::chrono::milliseconds body_timeout{60'000};
  size_t max_connections = 1024;    // 0: no limit
  size_t max_header_bytes = 16384;  // request line + header fields, CRLFs included
  size_t max_headers = 100;         // header fields
  bool cors = false;
  // Where connection counts and rejections go (e.g. ServerMetrics::connection_metrics(); must
  // outlive the server). nullptr: the server keeps its own (see HttpServer::metrics()).
  ConnectionMetrics* metrics = nullptr;
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, HttpHandler handler);
  // Stops (as Stop()) if still running.
  ~HttpServer();

  // Binds and listens, then starts the io threads. Errors: Unavailable (address in use, ...).
  Status Start();
  // The bound port (after Start).
  int port() const;
  // Closes the listening socket; open connections go on. Responses from now on carry
  // "Connection: close".
  void StopAccepting();
  // Number of open connections.
  size_t connections() const;
  // The counters this server updates (options.metrics, or its own).
  const ConnectionMetrics& metrics() const;
  // Stops the io threads and closes every connection. Pending handlers are dropped.
  void Stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tachyon::server
