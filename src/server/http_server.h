// HttpServer: an asynchronous HTTP/1.1 server (Boost.Asio/Beast) with a few io threads serving
// any number of connections. Each request is handed to an HttpHandler with a ResponseChannel;
// streamed responses use chunked transfer encoding.
//
// - Keep-alive; idle connections close after `idle_timeout`.
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

#include "server/http.h"
#include "util/status.h"

namespace tachyon::server {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (see port())
  int io_threads = 2;
  size_t max_body_bytes = 8u << 20;
  size_t max_stream_buffer_bytes = 4u << 20;
  std::chrono::seconds idle_timeout{60};
  bool cors = false;
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
  // Stops the io threads and closes every connection. Pending handlers are dropped.
  void Stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tachyon::server
