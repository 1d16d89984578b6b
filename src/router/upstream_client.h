// UpstreamClient: the router's asynchronous HTTP/1.1 client towards replicas (Boost.Asio /
// Beast, only in upstream_client.cc). A few io threads carry any number of calls: a streamed
// response is handed on piece by piece as it arrives, never buffered whole, so hundreds of
// open streams cost sockets and small buffers, not threads.
//
// One call is one TCP connection (Connection: close): resolve, connect under
// `timeouts.connect`, send the request, then the response head must arrive within
// `timeouts.read` and every later read within `timeouts.idle` (a stream silent longer than that
// is a timeout).
//
// Thread-safety: Start may be called from any thread. A call's handlers run on that call's own
// strand, one at a time, in the order on_head, on_data*, on_done (exactly once, last; on_head
// is skipped when the call fails before a head arrived). Cancel() may be called from any
// thread, also after the call ended (then it does nothing).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "server/http.h"
#include "util/status.h"

namespace tachyon::router {

// Where a replica listens: "http://HOST:PORT" (an optional trailing '/' is dropped; no path,
// no https).
struct Endpoint {
  std::string host;
  int port = 80;
  std::string url;  // "http://HOST:PORT", how logs and metrics name the replica
};

// Errors: InvalidArgument naming what is wrong with `url`.
Result<Endpoint> ParseReplicaUrl(std::string_view url);

struct UpstreamRequest {
  std::string method = "GET";
  std::string target = "/";  // path (and query)
  std::string body;
  server::Headers headers;  // extra header fields (content-type, authorization, ...)
};

struct UpstreamTimeouts {
  std::chrono::milliseconds connect{2000};  // 0: no limit
  std::chrono::milliseconds read{300'000};  // sending, and the response head; 0: no limit
  // Each read after the head (a stream's next piece); 0: the same as `read`.
  std::chrono::milliseconds idle{0};
};

// How a call ended.
enum class UpstreamOutcome {
  kComplete,   // the whole response arrived
  kConnect,    // no connection (refused, unreachable, name not resolved)
  kTimeout,    // connect or a read took longer than its timeout
  kBroken,     // connection reset, or EOF before the end of the response
  kCancelled,  // Cancel(), on_data returned false, or the client stopped
};

const char* UpstreamOutcomeName(UpstreamOutcome o);

struct UpstreamHandlers {
  // The response head: status and header fields (names in lower case).
  std::function<void(int status, const server::Headers& headers)> on_head;
  // Body bytes as they arrive (chunked framing removed). Returning false cancels the call.
  std::function<bool(std::string_view data)> on_data;
  // Last, exactly once. `message` says what failed (empty for kComplete).
  std::function<void(UpstreamOutcome outcome, const std::string& message)> on_done;
};

class UpstreamCall {
 public:
  virtual ~UpstreamCall() = default;
  // Closes the connection; on_done(kCancelled) follows unless the call already ended.
  virtual void Cancel() = 0;
};

class UpstreamClient {
 public:
  explicit UpstreamClient(int io_threads);
  // Stops (as Stop()).
  ~UpstreamClient();
  UpstreamClient(const UpstreamClient&) = delete;
  UpstreamClient& operator=(const UpstreamClient&) = delete;

  // Starts one request. The handlers are released after on_done.
  std::shared_ptr<UpstreamCall> Start(const Endpoint& to, UpstreamRequest request,
                                      const UpstreamTimeouts& timeouts, UpstreamHandlers handlers);

  // Runs `fn` once after `delay` on an io thread (timers of the router: probes, queue
  // deadlines). Dropped without running when the client stops first.
  void RunAfter(std::chrono::milliseconds delay, std::function<void()> fn);

  // Stops the io threads; calls in progress end without their on_done. Idempotent.
  void Stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tachyon::router
