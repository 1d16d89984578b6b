// The only file of tachyon that includes Boost.Beast (it is slow to compile).
#include "server/http_server.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <future>
#include <iterator>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "server/protocol.h"
#include "util/logging.h"

namespace tachyon::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using beast::error_code;

// Members used by sessions come before `ioc`: sessions still queued in handlers are destroyed
// with it.
struct HttpServer::Impl {
  HttpServerOptions options;
  HttpHandler handler;
  std::atomic<bool> draining{false};
  std::atomic<size_t> connections{0};  // sessions alive (checked against max_connections)
  ConnectionMetrics own_metrics;
  ConnectionMetrics* metrics = &own_metrics;
  int port = 0;
  bool running = false;
  net::io_context ioc;
  std::optional<tcp::acceptor> acceptor;
  std::optional<net::steady_timer> accept_retry;  // on the acceptor's strand
  std::string refuse_response;                    // the whole 503 of Refuse()
  std::vector<std::thread> threads;

  void Accept();
  // Answers a fixed 503 on a connection over the limit and closes it, without a session.
  void Refuse(tcp::socket& socket);
};

namespace {

class Session;

// The ResponseChannel of one request on one connection; forwards to the session's strand.
class Channel : public ResponseChannel, public std::enable_shared_from_this<Channel> {
 public:
  explicit Channel(const std::shared_ptr<Session>& session);
  void Respond(HttpResponse response) override;
  void StartStream(Headers extra_headers) override;
  bool Write(std::string data) override;
  void EndStream() override;
  void Post(std::function<void()> fn) override;
  void SetOnClose(std::function<void()> fn) override { on_close_ = std::move(fn); }

  std::atomic<bool> closed{false};  // the client is gone or the answer is complete
  std::function<void()> on_close_;  // strand only

 private:
  // Weak: the session owns its current channel, so a strong pointer back would be a cycle
  // that leaks both when the server stops with the connection open.
  std::weak_ptr<Session> session_;
  net::any_io_executor executor_;  // the session's strand
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpServer::Impl* server)
      : stream_(std::move(socket)), timer_(stream_.get_executor()), server_(server) {
    server_->connections++;
    server_->metrics->Opened();
  }
  ~Session() {
    server_->connections--;
    server_->metrics->Closed();
  }

  net::any_io_executor executor() { return stream_.get_executor(); }
  void Run() {
    net::dispatch(executor(), [self = shared_from_this()] { self->ReadHeader(); });
  }

  // --- Called on the strand through Channel ----------------------------------------------
  void DoRespond(Channel* ch, HttpResponse r) {
    if (ch != channel_.get() || answer_started_ || closed_) return;
    answer_started_ = true;
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(r.status), 11);
    res->set(http::field::server, "tachyon");
    res->set(http::field::content_type, r.content_type);
    for (auto& [k, v] : r.headers) res->set(k, v);
    AddCommonHeaders(*res);
    res->keep_alive(KeepAlive());
    res->body() = std::move(r.body);
    res->prepare_payload();
    stream_.expires_after(std::chrono::seconds(60));
    http::async_write(stream_, *res, [self = shared_from_this(), res](error_code ec, size_t) {
      if (ec) return self->Close();
      self->FinishRequest();
    });
  }

  void DoStartStream(Channel* ch, Headers headers) {
    if (ch != channel_.get() || answer_started_ || closed_) return;
    answer_started_ = true;
    streaming_ = true;
    std::string head =
        "HTTP/1.1 200 OK\r\nServer: tachyon\r\n"
        "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        "Transfer-Encoding: chunked\r\n";
    head += KeepAlive() ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
    if (server_->options.cors) head += "Access-Control-Allow-Origin: *\r\n";
    for (auto& [k, v] : headers) head += k + ": " + v + "\r\n";
    head += "\r\n";
    Queue(std::move(head));
  }

  void DoWrite(Channel* ch, std::string data) {
    if (ch != channel_.get() || !streaming_ || end_queued_ || closed_ || data.empty()) return;
    char size_line[32];
    std::snprintf(size_line, sizeof(size_line), "%zx\r\n", data.size());
    std::string framed = size_line;
    framed += data;
    framed += "\r\n";
    Queue(std::move(framed));
    if (pending_.size() > server_->options.max_stream_buffer_bytes) {
      TLOG(WARN) << "client reads too slowly (" << pending_.size()
                 << " bytes waiting); dropping the connection";
      Close();
    }
  }

  void DoEndStream(Channel* ch) {
    if (ch != channel_.get() || !streaming_ || end_queued_ || closed_) return;
    end_queued_ = true;
    Queue("0\r\n\r\n");
  }

 private:
  bool KeepAlive() const { return keep_alive_ && !server_->draining; }

  template <class Msg>
  void AddCommonHeaders(Msg& m) {
    if (server_->options.cors) m.set(http::field::access_control_allow_origin, "*");
  }

  // --- Connection-limit timer ------------------------------------------------------------
  // One timer per connection bounds the phase it is in: the header read, the body read, the
  // keep-alive wait for a next request, or the linger before a close. When it fires, the
  // rejection is counted and the pending socket operation cancelled; the read's handler then
  // sees timed_out_ and answers or closes. Close() cancels it, so a closed session is freed at
  // once.
  enum class Phase { kNone, kHeader, kBody, kIdle, kLinger };

  void Arm(Phase phase, std::chrono::milliseconds limit) {
    Disarm();
    timed_out_ = false;
    if (limit.count() <= 0) return;  // no limit for this phase
    phase_ = phase;
    timer_.expires_after(limit);
    timer_.async_wait([self = shared_from_this(), gen = timer_gen_](error_code ec) {
      if (!ec && gen == self->timer_gen_) self->OnTimeout();
    });
  }

  void Disarm() {
    ++timer_gen_;  // a wait already completed but not yet run is ignored
    phase_ = Phase::kNone;
    timer_.cancel();
  }

  void OnTimeout() {
    if (closed_ || phase_ == Phase::kNone) return;
    if (phase_ == Phase::kLinger) return Close();
    timed_out_ = true;
    server_->metrics->Reject(phase_ == Phase::kHeader ? ConnectionRejection::kHeaderTimeout
                             : phase_ == Phase::kBody ? ConnectionRejection::kBodyTimeout
                                                      : ConnectionRejection::kIdleTimeout);
    phase_ = Phase::kNone;
    error_code ignored;
    stream_.socket().cancel(ignored);
  }

  static std::string Seconds(std::chrono::milliseconds d) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g s", static_cast<double>(d.count()) / 1000);
    return buf;
  }

  void Reject(ConnectionRejection reason, int status, std::string message) {
    server_->metrics->Reject(reason);
    SendEarlyError(status, std::move(message));
  }

  // The header of a request: from the connection's start for the first one, from the first
  // byte of the next one on a kept-alive connection (NextRequest).
  void ReadHeader() {
    const HttpServerOptions& o = server_->options;
    parser_.emplace();
    parser_->body_limit(o.max_body_bytes);
    parser_->header_limit(static_cast<uint32_t>(
        std::clamp<size_t>(o.max_header_bytes, 1, std::numeric_limits<uint32_t>::max())));
    stream_.expires_never();
    Arm(Phase::kHeader, o.header_timeout);
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(error_code ec) {
    const HttpServerOptions& o = server_->options;
    Disarm();
    if (timed_out_) {
      return SendEarlyError(408,
                            "No complete request header within " + Seconds(o.header_timeout) + ".");
    }
    if (ec == http::error::header_limit) {
      return Reject(ConnectionRejection::kHeaderTooLarge, 431,
                    "Request header (request line and fields) over the limit of " +
                        std::to_string(o.max_header_bytes) + " bytes.");
    }
    if (ec == http::error::body_limit) {
      return Reject(ConnectionRejection::kBodyTooLarge, 413, "Request body too large.");
    }
    if (ec) return Close();
    auto& req = parser_->get();
    size_t fields = static_cast<size_t>(std::distance(req.begin(), req.end()));
    if (fields > o.max_headers) {
      return Reject(ConnectionRejection::kTooManyHeaders, 431,
                    "Request has " + std::to_string(fields) + " header fields; the limit is " +
                        std::to_string(o.max_headers) + ".");
    }
    if (req.has_content_length() && parser_->content_length() &&
        *parser_->content_length() > o.max_body_bytes) {
      return Reject(ConnectionRejection::kBodyTooLarge, 413,
                    "Request body of " + std::to_string(*parser_->content_length()) +
                        " bytes is over the limit of " + std::to_string(o.max_body_bytes) + ".");
    }
    Arm(Phase::kBody, o.body_timeout);
    if (beast::iequals(req[http::field::expect], "100-continue")) {
      auto cont = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
      net::async_write(stream_, net::buffer(*cont),
                       [self = shared_from_this(), cont](error_code ec, size_t) {
                         if (ec || self->timed_out_) return self->Close();
                         self->ReadBody();
                       });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](error_code ec, size_t) { self->OnRead(ec); });
  }

  void SendEarlyError(int status, std::string message) {
    keep_alive_ = false;
    channel_ = std::make_shared<Channel>(shared_from_this());
    answer_started_ = false;
    ApiError e;
    e.http_status = status;
    e.message = std::move(message);
    HttpResponse r;
    r.status = status;
    r.body = e.Body();
    DoRespond(channel_.get(), std::move(r));
  }

  void OnRead(error_code ec) {
    Disarm();
    if (timed_out_) {
      return SendEarlyError(
          408, "Request body not complete within " + Seconds(server_->options.body_timeout) + ".");
    }
    if (ec == http::error::body_limit) {
      return Reject(ConnectionRejection::kBodyTooLarge, 413, "Request body too large.");
    }
    if (ec) return Close();
    http::request<http::string_body> msg = parser_->release();
    keep_alive_ = msg.keep_alive();
    HttpRequest req;
    req.method = std::string(msg.method_string());
    std::string target(msg.target());
    size_t q = target.find('?');
    req.path = target.substr(0, q);
    for (const auto& field : msg) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      req.headers.emplace_back(std::move(name), std::string(field.value()));
    }
    req.body = std::move(msg.body());
    answer_started_ = streaming_ = end_queued_ = false;
    channel_ = std::make_shared<Channel>(shared_from_this());
    stream_.expires_never();
    if (req.method == "OPTIONS" && server_->options.cors) {
      HttpResponse r;
      r.status = 204;
      r.content_type = "text/plain";
      r.headers = {{"Access-Control-Allow-Methods", "GET, POST, OPTIONS"},
                   {"Access-Control-Allow-Headers", "Authorization, Content-Type"},
                   {"Access-Control-Max-Age", "86400"}};
      return DoRespond(channel_.get(), std::move(r));
    }
    try {
      server_->handler(std::move(req), channel_);
    } catch (const std::exception& e) {
      TLOG(ERROR) << "handler threw: " << e.what();
      ApiError err;
      err.http_status = 500;
      err.type = "server_error";
      err.message = "Internal error.";
      HttpResponse r;
      r.status = 500;
      r.body = err.Body();
      DoRespond(channel_.get(), std::move(r));
    }
    // Watch the socket while the answer is pending (Respond above was only posted).
    if (channel_ && !watching_) Watch();
  }

  void Watch() {
    watching_ = true;
    stream_.async_read_some(
        buffer_.prepare(4096),
        [self = shared_from_this()](error_code ec, size_t n) { self->OnWatch(ec, n); });
  }

  // Half-closes, then discards what the client still sends (so that it reads our answer
  // instead of a reset) until it closes too or a short timer runs out.
  void Linger() {
    lingering_ = true;
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    Arm(Phase::kLinger, std::chrono::seconds(2));
    if (!watching_) Watch();
  }

  void OnWatch(error_code ec, size_t n) {
    watching_ = false;
    buffer_.commit(n);
    if (closed_) return;
    if (lingering_) {
      buffer_.consume(buffer_.size());
      return ec ? Close() : Watch();
    }
    if (idle_) {  // the keep-alive wait: a next request begins, or the idle timeout ran out
      idle_ = false;
      Disarm();
      if (timed_out_ || ec) return Close();
      return ReadHeader();
    }
    if (!channel_) {  // the answer completed meanwhile (FinishRequest cancelled this read)
      if (ec && ec != net::error::operation_aborted) return Close();
      return NextRequest();
    }
    if (ec) {
      TLOG(DEBUG) << "client disconnected during a request";
      return Close();
    }
    if (buffer_.size() < 64 * 1024) Watch();  // pipelined bytes: keep them for later
  }

  void Queue(std::string bytes) {
    pending_ += bytes;
    if (!writing_) Flush();
  }

  void Flush() {
    if (pending_.empty() || closed_) {
      if (end_queued_ && !closed_) FinishRequest();
      return;
    }
    writing_ = true;
    out_.swap(pending_);
    pending_.clear();
    // A client that reads nothing for this long is gone (only the write timer is set: the
    // watch read may be pending).
    stream_.expires_after(std::chrono::seconds(120));
    net::async_write(stream_, net::buffer(out_),
                     [self = shared_from_this()](error_code ec, size_t) {
                       self->writing_ = false;
                       self->out_.clear();
                       if (ec) return self->Close();
                       self->Flush();
                     });
  }

  void FinishRequest() {
    if (channel_) channel_->closed = true;
    channel_.reset();
    streaming_ = end_queued_ = false;
    if (!KeepAlive()) return Linger();
    if (watching_) {
      error_code ignored;
      stream_.socket().cancel(ignored);  // OnWatch continues with NextRequest
      return;
    }
    NextRequest();
  }

  // After an answer on a kept-alive connection: pipelined bytes start the next header at once;
  // otherwise the idle timeout runs until the first byte of a next request arrives.
  void NextRequest() {
    stream_.expires_never();
    if (buffer_.size() > 0) return ReadHeader();
    Arm(Phase::kIdle, server_->options.idle_timeout);
    idle_ = true;
    Watch();
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    Disarm();
    if (channel_) {
      channel_->closed = true;
      auto on_close = std::move(channel_->on_close_);
      channel_.reset();
      if (on_close) on_close();
    }
    error_code ignored;
    stream_.socket().close(ignored);
  }

  beast::tcp_stream stream_;
  net::steady_timer timer_;  // the connection-limit timer (Arm)
  Phase phase_ = Phase::kNone;
  uint64_t timer_gen_ = 0;
  bool timed_out_ = false;  // the armed phase's limit ran out
  bool idle_ = false;       // the watch read is the keep-alive wait (NextRequest)
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  HttpServer::Impl* server_;
  std::shared_ptr<Channel> channel_;  // the request being answered, if any
  bool keep_alive_ = true;
  bool answer_started_ = false;
  bool streaming_ = false;
  bool end_queued_ = false;
  bool watching_ = false;
  bool writing_ = false;
  bool closed_ = false;
  bool lingering_ = false;
  std::string pending_;  // bytes queued behind the write in flight
  std::string out_;      // bytes of the write in flight
};

Channel::Channel(const std::shared_ptr<Session>& session)
    : session_(session), executor_(session->executor()) {}

void Channel::Respond(HttpResponse response) {
  if (closed) return;
  net::post(executor_,
            [w = session_, self = shared_from_this(), r = std::move(response)]() mutable {
              if (auto s = w.lock()) s->DoRespond(self.get(), std::move(r));
            });
}

void Channel::StartStream(Headers headers) {
  if (closed) return;
  net::post(executor_, [w = session_, self = shared_from_this(), h = std::move(headers)]() mutable {
    if (auto s = w.lock()) s->DoStartStream(self.get(), std::move(h));
  });
}

bool Channel::Write(std::string data) {
  if (closed) return false;
  net::post(executor_, [w = session_, self = shared_from_this(), d = std::move(data)]() mutable {
    if (auto s = w.lock()) s->DoWrite(self.get(), std::move(d));
  });
  return true;
}

void Channel::EndStream() {
  if (closed) return;
  net::post(executor_, [w = session_, self = shared_from_this()] {
    if (auto s = w.lock()) s->DoEndStream(self.get());
  });
}

void Channel::Post(std::function<void()> fn) {
  net::post(executor_, std::move(fn));
}

}  // namespace

void HttpServer::Impl::Accept() {
  acceptor->async_accept(net::make_strand(ioc), [this](error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor->is_open()) return;
    if (ec) {
      // E.g. out of file descriptors: try again shortly instead of spinning on the error.
      TLOG(WARN) << "accept failed: " << ec.message();
      accept_retry->expires_after(std::chrono::milliseconds(100));
      accept_retry->async_wait([this](error_code e) {
        if (!e && acceptor->is_open()) Accept();
      });
      return;
    }
    // Sessions are created on this strand only, so the count cannot overshoot the limit.
    if (options.max_connections > 0 && connections >= options.max_connections) {
      Refuse(socket);
    } else {
      socket.set_option(tcp::no_delay(true), ec);
      std::make_shared<Session>(std::move(socket), this)->Run();
    }
    Accept();
  });
}

void HttpServer::Impl::Refuse(tcp::socket& socket) {
  metrics->Refused();
  error_code ec;
  socket.non_blocking(true, ec);
  // A fresh socket's send buffer is empty: the short answer goes out without blocking, or not
  // at all.
  if (!ec) socket.write_some(net::buffer(refuse_response), ec);
  // Discard what the client already sent, so that the close is a FIN rather than a reset that
  // could destroy the answer before the client reads it.
  char sink[4096];
  for (int i = 0; i < 16 && !ec; ++i) socket.read_some(net::buffer(sink), ec);
  socket.shutdown(tcp::socket::shutdown_both, ec);
  socket.close(ec);
}

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler)
    : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->handler = std::move(handler);
  Impl& s = *impl_;
  if (s.options.metrics) s.metrics = s.options.metrics;
  ApiError e;
  e.http_status = 503;
  e.type = "server_error";
  e.message = "Too many open connections (the limit is " +
              std::to_string(s.options.max_connections) + "); try again later.";
  e.retry_after_s = 1;
  std::string body = e.Body();
  s.refuse_response =
      "HTTP/1.1 503 Service Unavailable\r\nServer: tachyon\r\n"
      "Content-Type: application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\nRetry-After: 1\r\nConnection: close\r\n" +
      (s.options.cors ? "Access-Control-Allow-Origin: *\r\n" : "") + "\r\n" + body;
}

HttpServer::~HttpServer() {
  Stop();
}

Status HttpServer::Start() {
  Impl& s = *impl_;
  error_code ec;
  auto address = net::ip::make_address(s.options.host, ec);
  if (ec) return InvalidArgument("bad --host '" + s.options.host + "': " + ec.message());
  tcp::endpoint endpoint(address, static_cast<unsigned short>(s.options.port));
  s.acceptor.emplace(net::make_strand(s.ioc));
  s.acceptor->open(endpoint.protocol(), ec);
  if (!ec) s.acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor->bind(endpoint, ec);
  if (!ec) s.acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return Unavailable("cannot listen on " + s.options.host + ":" + std::to_string(s.options.port) +
                       ": " + ec.message());
  }
  s.port = s.acceptor->local_endpoint().port();
  s.accept_retry.emplace(s.acceptor->get_executor());
  s.Accept();
  s.running = true;
  for (int i = 0; i < std::max(1, s.options.io_threads); ++i) {
    // Last resort: an exception escaping a handler must not end the io thread (or, uncaught,
    // the process); it is logged and the thread goes on serving.
    s.threads.emplace_back([&s] { RunLoggingExceptions("io thread", [&s] { s.ioc.run(); }); });
  }
  return OkStatus();
}

int HttpServer::port() const {
  return impl_->port;
}

size_t HttpServer::connections() const {
  return impl_->connections;
}

const ConnectionMetrics& HttpServer::metrics() const {
  return *impl_->metrics;
}

void HttpServer::StopAccepting() {
  Impl& s = *impl_;
  s.draining = true;
  if (!s.acceptor) return;
  std::promise<void> done;
  net::post(s.acceptor->get_executor(), [&] {
    error_code ignored;
    s.acceptor->close(ignored);
    done.set_value();
  });
  if (s.running) done.get_future().wait();
}

void HttpServer::Stop() {
  Impl& s = *impl_;
  if (!s.running) return;
  s.running = false;
  s.ioc.stop();
  for (auto& t : s.threads) t.join();
  s.threads.clear();
}

}  // namespace tachyon::server
