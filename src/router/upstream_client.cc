// The router's only file that includes Boost.Beast.
#include "router/upstream_client.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "util/logging.h"

namespace tachyon::router {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using beast::error_code;

Result<Endpoint> ParseReplicaUrl(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  const std::string quoted = "'" + std::string(url) + "'";
  if (url.substr(0, kScheme.size()) != kScheme) {
    return InvalidArgument(quoted + " is not an http://HOST:PORT URL");
  }
  std::string_view rest = url.substr(kScheme.size());
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) {
    return InvalidArgument(quoted + ": a replica URL has no path (http://HOST:PORT)");
  }
  const size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return InvalidArgument(quoted + " names no port (http://HOST:PORT)");
  }
  std::string_view host = rest.substr(0, colon);
  std::string_view port_text = rest.substr(colon + 1);
  int port = 0;
  auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || ptr != port_text.data() + port_text.size() || port < 1 || port > 65535) {
    return InvalidArgument(quoted + ": port '" + std::string(port_text) + "' is not in [1, 65535]");
  }
  if (host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  for (char c : host) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != ':' &&
        c != '_') {
      return InvalidArgument(quoted + ": host '" + std::string(host) +
                             "' is not a name or address");
    }
  }
  Endpoint e;
  e.host = std::string(host);
  e.port = port;
  e.url = "http://" + std::string(rest);
  return e;
}

const char* UpstreamOutcomeName(UpstreamOutcome o) {
  switch (o) {
    case UpstreamOutcome::kComplete:
      return "complete";
    case UpstreamOutcome::kConnect:
      return "connect_failed";
    case UpstreamOutcome::kTimeout:
      return "timeout";
    case UpstreamOutcome::kBroken:
      return "broken";
    case UpstreamOutcome::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

struct UpstreamClient::Impl {
  net::io_context ioc;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::vector<std::thread> threads;
};

namespace {

class Call : public UpstreamCall, public std::enable_shared_from_this<Call> {
 public:
  Call(net::io_context& ioc, const Endpoint& to, UpstreamRequest request,
       const UpstreamTimeouts& timeouts, UpstreamHandlers handlers)
      : strand_(net::make_strand(ioc)),
        stream_(strand_),
        resolver_(strand_),
        to_(to),
        timeouts_(timeouts),
        handlers_(std::move(handlers)) {
    req_.method_string(request.method);
    req_.target(request.target);
    req_.version(11);
    req_.set(http::field::host, to.host + ":" + std::to_string(to.port));
    for (auto& [k, v] : request.headers) req_.set(k, v);
    req_.keep_alive(false);
    req_.body() = std::move(request.body);
    req_.prepare_payload();
  }

  void Run() {
    net::dispatch(strand_, [self = shared_from_this()] { self->Resolve(); });
  }

  void Cancel() override {
    net::dispatch(strand_, [self = shared_from_this()] {
      if (self->done_) return;
      self->cancelled_ = true;
      self->resolver_.cancel();
      error_code ignored;
      self->stream_.socket().close(ignored);
      self->Finish(UpstreamOutcome::kCancelled, "cancelled");
    });
  }

 private:
  // A zero timeout means none.
  void Expire(std::chrono::milliseconds t) {
    if (t.count() > 0) {
      stream_.expires_after(t);
    } else {
      stream_.expires_never();
    }
  }

  void Resolve() {
    if (done_) return;
    resolver_.async_resolve(
        to_.host, std::to_string(to_.port),
        [self = shared_from_this()](error_code ec, tcp::resolver::results_type results) {
          if (ec) return self->Fail(ec, UpstreamOutcome::kConnect, "resolve");
          self->Expire(self->timeouts_.connect);
          self->stream_.async_connect(results, [self](error_code ec, const tcp::endpoint&) {
            if (ec) return self->Fail(ec, UpstreamOutcome::kConnect, "connect");
            self->Write();
          });
        });
  }

  void Write() {
    Expire(timeouts_.read);
    http::async_write(stream_, req_, [self = shared_from_this()](error_code ec, size_t) {
      if (ec) return self->Fail(ec, UpstreamOutcome::kBroken, "send");
      self->ReadHead();
    });
  }

  void ReadHead() {
    parser_.emplace();
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    Expire(timeouts_.read);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](error_code ec, size_t) {
                              if (ec) return self->Fail(ec, UpstreamOutcome::kBroken, "head");
                              self->OnHead();
                            });
  }

  void OnHead() {
    if (done_) return;
    server::Headers headers;
    for (const auto& f : parser_->get()) {
      std::string name(f.name_string());
      std::transform(name.begin(), name.end(), name.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      headers.emplace_back(std::move(name), std::string(f.value()));
    }
    if (handlers_.on_head)
      handlers_.on_head(static_cast<int>(parser_->get().result_int()), headers);
    if (done_) return;
    if (parser_->is_done()) return Finish(UpstreamOutcome::kComplete, "");
    ReadBody();
  }

  void ReadBody() {
    parser_->get().body().data = chunk_;
    parser_->get().body().size = sizeof(chunk_);
    Expire(timeouts_.idle.count() > 0 ? timeouts_.idle : timeouts_.read);
    // read_some: hand on what arrived at once (a stream's small events), not when the chunk
    // buffer is full.
    http::async_read_some(
        stream_, buffer_, *parser_, [self = shared_from_this()](error_code ec, size_t) {
          if (ec == http::error::need_buffer) ec = {};
          // Bytes parsed before an error (a reset right after them) still count.
          const size_t got = sizeof(self->chunk_) - self->parser_->get().body().size;
          if (got > 0 && !self->done_ && self->handlers_.on_data &&
              !self->handlers_.on_data(std::string_view(self->chunk_, got))) {
            return self->Finish(UpstreamOutcome::kCancelled, "stopped by the reader");
          }
          if (ec) return self->Fail(ec, UpstreamOutcome::kBroken, "body");
          if (self->done_) return;
          if (self->parser_->is_done()) {
            return self->Finish(UpstreamOutcome::kComplete, "");
          }
          self->ReadBody();
        });
  }

  void Fail(error_code ec, UpstreamOutcome outcome, const char* stage) {
    if (done_) return;
    if (cancelled_ || ec == net::error::operation_aborted) {
      return Finish(UpstreamOutcome::kCancelled, "cancelled");
    }
    if (ec == beast::error::timeout) outcome = UpstreamOutcome::kTimeout;
    Finish(outcome, std::string(stage) + ": " + ec.message());
  }

  void Finish(UpstreamOutcome outcome, const std::string& message) {
    if (done_) return;
    done_ = true;
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
    UpstreamHandlers handlers = std::move(handlers_);
    handlers_ = {};
    if (handlers.on_done) handlers.on_done(outcome, message);
  }

  net::strand<net::io_context::executor_type> strand_;
  beast::tcp_stream stream_;
  tcp::resolver resolver_;
  Endpoint to_;
  UpstreamTimeouts timeouts_;
  UpstreamHandlers handlers_;
  http::request<http::string_body> req_;
  beast::flat_buffer buffer_;
  std::optional<http::response_parser<http::buffer_body>> parser_;
  char chunk_[16384];
  bool done_ = false;
  bool cancelled_ = false;
};

}  // namespace

UpstreamClient::UpstreamClient(int io_threads) : impl_(std::make_unique<Impl>()) {
  impl_->work.emplace(net::make_work_guard(impl_->ioc));
  for (int i = 0; i < std::max(1, io_threads); ++i) {
    // A handler that throws (a bug) is logged; the router goes on serving.
    impl_->threads.emplace_back(
        [this] { RunLoggingExceptions("upstream io thread", [this] { impl_->ioc.run(); }); });
  }
}

UpstreamClient::~UpstreamClient() {
  Stop();
}

std::shared_ptr<UpstreamCall> UpstreamClient::Start(const Endpoint& to, UpstreamRequest request,
                                                    const UpstreamTimeouts& timeouts,
                                                    UpstreamHandlers handlers) {
  auto call =
      std::make_shared<Call>(impl_->ioc, to, std::move(request), timeouts, std::move(handlers));
  call->Run();
  return call;
}

void UpstreamClient::RunAfter(std::chrono::milliseconds delay, std::function<void()> fn) {
  auto timer = std::make_shared<net::steady_timer>(impl_->ioc, delay);
  timer->async_wait([timer, fn = std::move(fn)](error_code ec) {
    if (!ec) fn();
  });
}

void UpstreamClient::Stop() {
  if (impl_->threads.empty()) return;
  impl_->work.reset();
  impl_->ioc.stop();
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
}

}  // namespace tachyon::router
