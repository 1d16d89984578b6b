// The only file of tachyon that includes Boost.Beast (it is slow to compile).
#include "server/http_server.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <future>
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
  std::atomic<size_t> connections{0};
  int port = 0;
  bool running = false;
  net::io_context ioc;
  std::optional<tcp::acceptor> acceptor;
  std::vector<std::thread> threads;

  void Accept();
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
      : stream_(std::move(socket)), server_(server) {
    server_->connections++;
  }
  ~Session() { server_->connections--; }

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

  void ReadHeader() {
    parser_.emplace();
    parser_->body_limit(server_->options.max_body_bytes);
    parser_->header_limit(64 * 1024);
    stream_.expires_after(server_->options.idle_timeout);
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(error_code ec) {
    if (ec == http::error::body_limit) return SendEarlyError(413, "Request body too large.");
    if (ec) return Close();
    auto& req = parser_->get();
    if (req.has_content_length() && parser_->content_length() &&
        *parser_->content_length() > server_->options.max_body_bytes) {
      return SendEarlyError(413, "Request body of " + std::to_string(*parser_->content_length()) +
                                     " bytes is over the limit of " +
                                     std::to_string(server_->options.max_body_bytes) + ".");
    }
    if (beast::iequals(req[http::field::expect], "100-continue")) {
      auto cont = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
      net::async_write(stream_, net::buffer(*cont),
                       [self = shared_from_this(), cont](error_code ec, size_t) {
                         if (ec) return self->Close();
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
    if (ec == http::error::body_limit) return SendEarlyError(413, "Request body too large.");
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
    auto timer = std::make_shared<net::steady_timer>(executor(), std::chrono::seconds(2));
    timer->async_wait([self = shared_from_this(), timer](error_code) { self->Close(); });
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
    if (!channel_) {  // the answer completed meanwhile
      if (ec && ec != net::error::operation_aborted) return Close();
      return ReadHeader();
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
      stream_.socket().cancel(ignored);  // OnWatch continues with ReadHeader
      return;
    }
    ReadHeader();
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
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
  net::post(executor_, [w = session_, self = shared_from_this(), r = std::move(response)]() mutable {
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

void Channel::Post(std::function<void()> fn) { net::post(executor_, std::move(fn)); }

}  // namespace

void HttpServer::Impl::Accept() {
  acceptor->async_accept(net::make_strand(ioc), [this](error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor->is_open()) return;
    if (!ec) {
      socket.set_option(tcp::no_delay(true), ec);
      std::make_shared<Session>(std::move(socket), this)->Run();
    } else {
      TLOG(WARN) << "accept failed: " << ec.message();
    }
    Accept();
  });
}

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler)
    : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->handler = std::move(handler);
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
  s.Accept();
  s.running = true;
  for (int i = 0; i < std::max(1, s.options.io_threads); ++i) {
    s.threads.emplace_back([&s] { s.ioc.run(); });
  }
  return OkStatus();
}

int HttpServer::port() const {
  return impl_->port;
}

size_t HttpServer::connections() const {
  return impl_->connections;
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
