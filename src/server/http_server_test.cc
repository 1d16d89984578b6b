// HttpServer over real sockets on 127.0.0.1 with the fake backend.
#include "server/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <thread>

#include "server/api.h"
#include "server/testing/fake_backend.h"

namespace tachyon::server {
namespace {

// A blocking test client on one TCP connection.
class Client {
 public:
  explicit Client(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~Client() { Close(); }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  bool connected() const { return connected_; }

  void Send(const std::string& data) {
    size_t sent = 0;
    while (sent < data.size()) {
      ssize_t n = send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<size_t>(n);
    }
  }
  void SendRequest(const std::string& method, const std::string& path, const std::string& body,
                   const std::string& extra = "") {
    Send(method + " " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
         "Content-Length: " + std::to_string(body.size()) + "\r\n" + extra + "\r\n" + body);
  }
  // Reads until `pred(buffer)` holds, EOF, or the timeout; returns what was read so far.
  template <class Pred>
  std::string ReadUntil(Pred pred, int timeout_ms = 5000) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!pred(buf_)) {
      int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      deadline - std::chrono::steady_clock::now())
                                      .count());
      pollfd p{fd_, POLLIN, 0};
      if (left <= 0 || poll(&p, 1, left) <= 0) break;
      char tmp[16384];
      ssize_t n = recv(fd_, tmp, sizeof(tmp), 0);
      if (n <= 0) {
        eof_ = true;
        break;
      }
      buf_.append(tmp, static_cast<size_t>(n));
    }
    return buf_;
  }
  // Reads one whole response with a Content-Length, or a chunked one; removes it from the buffer.
  std::string ReadResponse(int timeout_ms = 5000) {
    auto complete = [](const std::string& b) { return ResponseLength(b) > 0; };
    ReadUntil(complete, timeout_ms);
    size_t len = ResponseLength(buf_);
    if (len == 0) return std::exchange(buf_, "");
    std::string r = buf_.substr(0, len);
    buf_.erase(0, len);
    return r;
  }
  bool eof() const { return eof_; }

  static size_t ResponseLength(const std::string& b) {
    size_t head_end = b.find("\r\n\r\n");
    if (head_end == std::string::npos) return 0;
    std::string head = b.substr(0, head_end);
    for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (head.find("transfer-encoding: chunked") != std::string::npos) {
      size_t end = b.find("\r\n0\r\n\r\n", head_end);
      return end == std::string::npos ? 0 : end + 7;
    }
    size_t cl = head.find("content-length: ");
    size_t n = cl == std::string::npos ? 0 : std::stoul(head.substr(cl + 16));
    return b.size() >= head_end + 4 + n ? head_end + 4 + n : 0;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool eof_ = false;
  std::string buf_;
};

class HttpServerTest : public ::testing::Test {
 protected:
  void Start(FakeBackendOptions fake = {}, HttpServerOptions opts = {}) {
    backend_ = std::make_unique<FakeBackend>(fake);
    ApiOptions api_options;
    api_options.served_model_names = {"tiny"};
    api_ = std::make_unique<OpenAiApi>(backend_.get(), api_options);
    opts.port = 0;
    opts.metrics = &api_->metrics().connection_metrics();
    server_ = std::make_unique<HttpServer>(
        opts, [this](HttpRequest r, std::shared_ptr<ResponseChannel> c) {
          api_->Handle(std::move(r), std::move(c));
        });
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override {
    if (api_) api_->CancelAll();
    WaitFor([&] { return !api_ || api_->InFlight() == 0; });
    if (server_) server_->Stop();
    server_.reset();
    api_.reset();
    backend_.reset();
  }
  template <class Pred>
  bool WaitFor(Pred pred, int timeout_ms = 3000) {
    for (int i = 0; i < timeout_ms / 2; ++i) {
      if (pred()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return pred();
  }

  int64_t Rejections(ConnectionRejection reason) const {
    return server_->metrics().rejections(reason);
  }
  // The /metrics page, on a connection of its own.
  std::string MetricsPage() {
    Client m(server_->port());
    m.SendRequest("GET", "/metrics", "");
    return m.ReadResponse();
  }
  // Reads until the server closes the connection (or 10 s pass); returns what arrived.
  static std::string ReadToEof(Client& c) {
    return c.ReadUntil([](const std::string&) { return false; }, 10000);
  }

  std::unique_ptr<FakeBackend> backend_;
  std::unique_ptr<OpenAiApi> api_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, KeepAliveServesSeveralRequests) {
  Start();
  Client c(server_->port());
  ASSERT_TRUE(c.connected());
  for (int i = 0; i < 3; ++i) {
    c.SendRequest("GET", "/health", "");
    std::string r = c.ReadResponse();
    EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
    EXPECT_NE(r.find("\"ok\""), std::string::npos);
  }
  c.SendRequest("POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 4})");
  std::string r = c.ReadResponse();
  EXPECT_NE(r.find("\"text\":\"Once\""), std::string::npos) << r;
}

TEST_F(HttpServerTest, StreamsChunkedSse) {
  Start();
  Client c(server_->port());
  c.SendRequest("POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 6, "stream": true})");
  std::string r = c.ReadResponse();
  EXPECT_NE(r.find("Transfer-Encoding: chunked"), std::string::npos) << r;
  EXPECT_NE(r.find("text/event-stream"), std::string::npos);
  EXPECT_NE(r.find("data: [DONE]\n\n"), std::string::npos) << r;
  EXPECT_NE(r.find("\"finish_reason\":\"length\""), std::string::npos);
  // The connection stays usable.
  c.SendRequest("GET", "/health", "");
  EXPECT_EQ(c.ReadResponse().rfind("HTTP/1.1 200", 0), 0u);
}

TEST_F(HttpServerTest, OversizedBodyIs413) {
  HttpServerOptions opts;
  opts.max_body_bytes = 1000;
  Start({}, opts);
  Client c(server_->port());
  c.SendRequest("POST", "/v1/completions", std::string(5000, ' '));
  std::string r = c.ReadResponse();
  EXPECT_EQ(r.rfind("HTTP/1.1 413", 0), 0u) << r;
  EXPECT_NE(r.find("\"error\""), std::string::npos);
}

TEST_F(HttpServerTest, MalformedHttpClosesConnection) {
  Start();
  Client c(server_->port());
  c.Send("THIS IS NOT HTTP\r\n\r\n");
  c.ReadUntil([](const std::string&) { return false; }, 2000);
  EXPECT_TRUE(c.eof());
}

TEST_F(HttpServerTest, DisconnectMidStreamAbortsPromptly) {
  FakeBackendOptions fake;
  fake.context_length = 100000;
  fake.step_interval = std::chrono::microseconds(5000);
  Start(fake);
  Client c(server_->port());
  c.SendRequest("POST", "/v1/completions",
                R"({"prompt": "x", "max_tokens": 5000, "stream": true})");
  c.ReadUntil([](const std::string& b) { return b.find("\"text\"") != std::string::npos; });
  EXPECT_EQ(backend_->Live(), 1);
  c.Close();
  EXPECT_TRUE(WaitFor([&] { return backend_->Live() == 0; }, 1000));
  EXPECT_TRUE(WaitFor([&] { return api_->InFlight() == 0; }, 1000));
}

TEST_F(HttpServerTest, DisconnectWhileQueuedAbortsToo) {
  FakeBackendOptions fake;
  fake.max_running = 0;  // nothing ever runs: the request waits, writes nothing
  Start(fake);
  Client c(server_->port());
  c.SendRequest("POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 5})");
  EXPECT_TRUE(WaitFor([&] { return backend_->Live() == 1; }));
  c.Close();
  EXPECT_TRUE(WaitFor([&] { return backend_->Live() == 0; }, 1000));
}

TEST_F(HttpServerTest, ManyConcurrentStreams) {
  FakeBackendOptions fake;
  fake.max_running = 300;
  fake.max_waiting = 300;
  Start(fake);
  constexpr int kClients = 200;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(std::make_unique<Client>(server_->port()));
    ASSERT_TRUE(clients.back()->connected());
    clients.back()->SendRequest("POST", "/v1/completions",
                                R"({"prompt": "x", "max_tokens": 8, "stream": true})");
  }
  int done = 0;
  for (auto& c : clients) {
    std::string r = c->ReadResponse(10000);
    done += r.find("data: [DONE]") != std::string::npos;
  }
  EXPECT_EQ(done, kClients);
  EXPECT_TRUE(WaitFor([&] { return backend_->Live() == 0; }));
}

TEST_F(HttpServerTest, SlowReaderIsDroppedNotBuffered) {
  FakeBackendOptions fake;
  fake.context_length = 1 << 22;
  fake.step_interval = std::chrono::microseconds(1);
  fake.max_running = 1;
  HttpServerOptions opts;
  opts.max_stream_buffer_bytes = 64 * 1024;
  Start(fake, opts);
  Client c(server_->port());
  c.SendRequest("POST", "/v1/completions",
                R"({"prompt": "x", "max_tokens": 1000000, "stream": true})");
  ASSERT_TRUE(WaitFor([&] { return backend_->Live() == 1; }));
  // Never read: socket buffers fill, then the server's bounded queue overflows and the request
  // is aborted long before its million tokens.
  EXPECT_TRUE(WaitFor([&] { return backend_->Live() == 0; }, 20000));
  // The job leaves the in-flight count on the connection's strand, just after the backend.
  EXPECT_TRUE(WaitFor([&] { return api_->InFlight() == 0; }));
  std::string r = c.ReadUntil([](const std::string&) { return false; }, 3000);
  EXPECT_TRUE(c.eof());
  EXPECT_LT(r.size(), 100000000u);
}

TEST_F(HttpServerTest, CorsPreflight) {
  HttpServerOptions opts;
  opts.cors = true;
  Start({}, opts);
  Client c(server_->port());
  c.SendRequest("OPTIONS", "/v1/completions", "");
  std::string r = c.ReadResponse();
  EXPECT_EQ(r.rfind("HTTP/1.1 204", 0), 0u) << r;
  EXPECT_NE(r.find("Access-Control-Allow-Origin: *"), std::string::npos) << r;
  c.SendRequest("GET", "/health", "");
  EXPECT_NE(c.ReadResponse().find("Access-Control-Allow-Origin: *"), std::string::npos);
}

TEST_F(HttpServerTest, StopAcceptingKeepsInFlightStreams) {
  FakeBackendOptions fake;
  fake.step_interval = std::chrono::microseconds(2000);
  Start(fake);
  Client c(server_->port());
  c.SendRequest("POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 20, "stream": true})");
  c.ReadUntil([](const std::string& b) { return b.find("\"text\"") != std::string::npos; });
  server_->StopAccepting();
  api_->SetDraining(true);
  Client late(server_->port());
  EXPECT_FALSE(late.connected());
  std::string r = c.ReadResponse();
  EXPECT_NE(r.find("data: [DONE]"), std::string::npos);
  EXPECT_NE(r.find("Connection: keep-alive"), std::string::npos);  // sent before draining
}

// --- Connection limits ---------------------------------------------------------------------

TEST_F(HttpServerTest, HalfHeaderGets408AfterHeaderTimeout) {
  HttpServerOptions opts;
  opts.header_timeout = std::chrono::milliseconds(300);
  Start({}, opts);
  Client half(server_->port());
  half.Send("GET /health HTTP/1.1\r\nHost: x\r\n");  // no blank line: the header never ends
  Client silent(server_->port());                    // sends nothing at all
  std::string r = ReadToEof(half);
  EXPECT_TRUE(half.eof());
  EXPECT_EQ(r.rfind("HTTP/1.1 408", 0), 0u) << r;
  EXPECT_NE(r.find("Connection: close"), std::string::npos) << r;
  EXPECT_NE(r.find("\"error\""), std::string::npos) << r;
  r = ReadToEof(silent);
  EXPECT_TRUE(silent.eof());
  EXPECT_EQ(r.rfind("HTTP/1.1 408", 0), 0u) << r;
  EXPECT_EQ(Rejections(ConnectionRejection::kHeaderTimeout), 2);
  EXPECT_TRUE(WaitFor([&] { return server_->connections() == 0; }, 5000));
  std::string m = MetricsPage();
  EXPECT_NE(m.find("tachyon_http_rejections_total{reason=\"header_timeout\"} 2\n"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("tachyon_http_rejections_total{reason=\"idle_timeout\"} 0\n"),
            std::string::npos);
  EXPECT_NE(m.find("tachyon_http_connections_open 1\n"), std::string::npos) << m;  // this one
  EXPECT_NE(m.find("tachyon_http_connections_total 3\n"), std::string::npos) << m;
}

TEST_F(HttpServerTest, TricklingHeaderBytesDoesNotExtendTheHeaderTimeout) {
  HttpServerOptions opts;
  opts.header_timeout = std::chrono::milliseconds(300);
  Start({}, opts);
  Client c(server_->port());
  c.Send("GET /health HTTP/1.1\r\n");
  // One header byte every 50 ms would take 20 s; the whole header has 300 ms.
  std::string r;
  for (int i = 0; i < 400 && r.empty() && !c.eof(); ++i) {
    c.Send("x");
    r = c.ReadUntil([](const std::string& b) { return !b.empty(); }, 50);
  }
  EXPECT_EQ(r.rfind("HTTP/1.1 408", 0), 0u) << r;
  ReadToEof(c);
  EXPECT_TRUE(c.eof());
  EXPECT_EQ(Rejections(ConnectionRejection::kHeaderTimeout), 1);
}

TEST_F(HttpServerTest, IdleKeepAliveConnectionIsClosed) {
  HttpServerOptions opts;
  opts.idle_timeout = std::chrono::milliseconds(300);
  Start({}, opts);
  Client c(server_->port());
  c.SendRequest("GET", "/health", "");
  EXPECT_EQ(c.ReadResponse().rfind("HTTP/1.1 200", 0), 0u);
  std::string r = ReadToEof(c);
  EXPECT_TRUE(c.eof());
  EXPECT_EQ(r, "");  // closed without an answer: no request was pending
  EXPECT_EQ(Rejections(ConnectionRejection::kIdleTimeout), 1);
  EXPECT_EQ(Rejections(ConnectionRejection::kHeaderTimeout), 0);
}

TEST_F(HttpServerTest, HeaderTimeoutOfALaterRequestStartsAtItsFirstByte) {
  HttpServerOptions opts;
  opts.header_timeout = std::chrono::milliseconds(400);
  opts.idle_timeout = std::chrono::milliseconds(20000);
  Start({}, opts);
  Client c(server_->port());
  c.SendRequest("GET", "/health", "");
  EXPECT_EQ(c.ReadResponse().rfind("HTTP/1.1 200", 0), 0u);
  // Idle for longer than the header timeout: the idle timeout applies, not the header one.
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  c.SendRequest("GET", "/health", "");
  std::string r = c.ReadResponse();
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
  EXPECT_EQ(Rejections(ConnectionRejection::kHeaderTimeout), 0);
  EXPECT_EQ(Rejections(ConnectionRejection::kIdleTimeout), 0);
}

TEST_F(HttpServerTest, IncompleteBodyGets408AfterBodyTimeout) {
  HttpServerOptions opts;
  opts.body_timeout = std::chrono::milliseconds(300);
  Start({}, opts);
  Client c(server_->port());
  c.Send(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: 100\r\n\r\n{\"prompt\":");
  std::string r = ReadToEof(c);
  EXPECT_TRUE(c.eof());
  EXPECT_EQ(r.rfind("HTTP/1.1 408", 0), 0u) << r;
  EXPECT_EQ(Rejections(ConnectionRejection::kBodyTimeout), 1);
  EXPECT_EQ(Rejections(ConnectionRejection::kHeaderTimeout), 0);
  EXPECT_EQ(backend_->Live(), 0);
}

TEST_F(HttpServerTest, ConnectionsOverTheLimitGet503AndOpenStreamsGoOn) {
  FakeBackendOptions fake;
  fake.step_interval = std::chrono::microseconds(20000);
  HttpServerOptions opts;
  opts.max_connections = 2;
  Start(fake, opts);
  Client streaming(server_->port());
  streaming.SendRequest("POST", "/v1/completions",
                        R"({"prompt": "x", "max_tokens": 30, "stream": true})");
  streaming.ReadUntil([](const std::string& b) { return b.find("\"text\"") != std::string::npos; });
  Client idle(server_->port());
  ASSERT_TRUE(WaitFor([&] { return server_->connections() == 2; }));

  Client over(server_->port());
  ASSERT_TRUE(over.connected());  // accepted by the kernel, then refused by the server
  std::string r = ReadToEof(over);
  EXPECT_TRUE(over.eof());
  EXPECT_EQ(r.rfind("HTTP/1.1 503", 0), 0u) << r;
  EXPECT_NE(r.find("Retry-After: 1"), std::string::npos) << r;
  EXPECT_NE(r.find("Connection: close"), std::string::npos) << r;
  EXPECT_EQ(Rejections(ConnectionRejection::kMaxConnections), 1);

  // The open stream and the idle connection are unaffected.
  r = streaming.ReadResponse(20000);
  EXPECT_NE(r.find("data: [DONE]"), std::string::npos) << r;
  idle.SendRequest("GET", "/health", "");
  EXPECT_EQ(idle.ReadResponse().rfind("HTTP/1.1 200", 0), 0u);

  // A slot freed is a slot a new client gets.
  streaming.Close();
  ASSERT_TRUE(WaitFor([&] { return server_->connections() == 1; }, 5000));
  std::string m = MetricsPage();
  EXPECT_EQ(m.rfind("HTTP/1.1 200", 0), 0u) << m;
  EXPECT_NE(m.find("tachyon_http_rejections_total{reason=\"max_connections\"} 1\n"),
            std::string::npos)
      << m;
}

TEST_F(HttpServerTest, OversizedHeaderGets431) {
  HttpServerOptions opts;
  opts.max_header_bytes = 1024;
  Start({}, opts);
  Client ok(server_->port());
  ok.SendRequest("GET", "/health", "", "X-Pad: " + std::string(800, 'a') + "\r\n");
  EXPECT_EQ(ok.ReadResponse().rfind("HTTP/1.1 200", 0), 0u);
  Client big(server_->port());
  big.SendRequest("GET", "/health", "", "X-Pad: " + std::string(2000, 'a') + "\r\n");
  std::string r = ReadToEof(big);
  EXPECT_TRUE(big.eof());
  EXPECT_EQ(r.rfind("HTTP/1.1 431", 0), 0u) << r;
  EXPECT_NE(r.find("1024 bytes"), std::string::npos) << r;
  EXPECT_EQ(Rejections(ConnectionRejection::kHeaderTooLarge), 1);
}

TEST_F(HttpServerTest, TooManyHeaderFieldsGet431) {
  HttpServerOptions opts;
  opts.max_headers = 10;
  Start({}, opts);
  auto fields = [](int n) {  // SendRequest itself sends 3 (Host, Content-Type, Content-Length)
    std::string extra;
    for (int i = 0; i < n; ++i) extra += "X-F" + std::to_string(i) + ": v\r\n";
    return extra;
  };
  Client ok(server_->port());
  ok.SendRequest("GET", "/health", "", fields(7));
  EXPECT_EQ(ok.ReadResponse().rfind("HTTP/1.1 200", 0), 0u);
  Client many(server_->port());
  many.SendRequest("GET", "/health", "", fields(8));
  std::string r = ReadToEof(many);
  EXPECT_TRUE(many.eof());
  EXPECT_EQ(r.rfind("HTTP/1.1 431", 0), 0u) << r;
  EXPECT_NE(r.find("11 header fields"), std::string::npos) << r;
  EXPECT_EQ(Rejections(ConnectionRejection::kTooManyHeaders), 1);
}

}  // namespace
}  // namespace tachyon::server
