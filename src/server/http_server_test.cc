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

}  // namespace
}  // namespace tachyon::server
