// Transport-neutral HTTP types: the request the API layer sees and the channel it answers on.
// http_server.cc implements ResponseChannel over Boost.Beast; tests implement it in memory.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tachyon::server {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // without the query string
  std::string body;
  Headers headers;  // names in lower case

  // The value of a header (name in lower case), or "" when absent.
  std::string_view Header(std::string_view name) const {
    for (const auto& [k, v] : headers) {
      if (k == name) return v;
    }
    return {};
  }
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  Headers headers;  // extra headers (Retry-After, ...)
};

// How a handler answers one request: either Respond() once, or StartStream() once followed by
// Write()s and one EndStream(). Calls after the answer is complete are ignored.
// Thread-safety: every method may be called from any thread; calls are applied in order on the
// connection's executor.
class ResponseChannel {
 public:
  virtual ~ResponseChannel() = default;

  virtual void Respond(HttpResponse response) = 0;
  // Sends the head of a `text/event-stream` response (chunked transfer).
  virtual void StartStream(Headers extra_headers) = 0;
  // Queues bytes of the stream. Returns false when the client is gone or the bounded buffer
  // overflowed (the client reads too slowly); the connection is then closed and OnClose runs.
  virtual bool Write(std::string data) = 0;
  virtual void EndStream() = 0;

  // Runs `fn` on the connection's executor (serialized with the channel's own work).
  virtual void Post(std::function<void()> fn) = 0;
  // `fn` runs once, on the executor, if the client disconnects before the answer is complete.
  // Must be set from the handler (on the executor) before returning.
  virtual void SetOnClose(std::function<void()> fn) = 0;
};

using HttpHandler =
    std::function<void(HttpRequest request, std::shared_ptr<ResponseChannel> channel)>;

}  // namespace tachyon::server
