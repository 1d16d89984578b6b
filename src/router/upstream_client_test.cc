#include "router/upstream_client.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <future>
#include <mutex>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "server/http_server.h"

namespace tachyon::router {
namespace {

struct Result {
  int status = 0;
  std::string body;
  UpstreamOutcome outcome = UpstreamOutcome::kCancelled;
  std::string message;
};

Result Fetch(UpstreamClient& client, const Endpoint& to, UpstreamRequest req,
             UpstreamTimeouts t = {}) {
  auto done = std::make_shared<std::promise<Result>>();
  auto r = std::make_shared<Result>();
  UpstreamHandlers h;
  h.on_head = [r](int s, const server::Headers&) { r->status = s; };
  h.on_data = [r](std::string_view d) {
    r->body.append(d);
    return true;
  };
  h.on_done = [r, done](UpstreamOutcome o, const std::string& m) {
    r->outcome = o;
    r->message = m;
    done->set_value(*r);
  };
  client.Start(to, std::move(req), t, std::move(h));
  return done->get_future().get();
}

Endpoint Local(int port) {
  return *ParseReplicaUrl("http://127.0.0.1:" + std::to_string(port));
}

TEST(ReplicaUrl, ParsesAndRejects) {
  auto e = ParseReplicaUrl("http://10.0.0.7:8080/");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->host, "10.0.0.7");
  EXPECT_EQ(e->port, 8080);
  EXPECT_EQ(e->url, "http://10.0.0.7:8080");
  EXPECT_TRUE(ParseReplicaUrl("http://replica-0.tachyon:80").ok());
  for (const char* bad : {"https://h:1", "h:1", "http://h", "http://h:0", "http://h:70000",
                          "http://h:1/v1", "http://:1", "http://h:x", "http://a b:1"}) {
    EXPECT_FALSE(ParseReplicaUrl(bad).ok()) << bad;
  }
}

TEST(UpstreamClient, PlainAndStreamedAnswers) {
  server::HttpServerOptions o;
  o.port = 0;
  server::HttpServer srv(o, [](server::HttpRequest r, std::shared_ptr<server::ResponseChannel> c) {
    if (r.path == "/stream") {
      c->StartStream({});
      for (int i = 0; i < 50; ++i) c->Write("data: " + std::to_string(i) + "\n\n");
      c->EndStream();
      return;
    }
    c->Respond({201, "text/plain", r.method + " " + r.path + " " + r.body, {}});
  });
  ASSERT_TRUE(srv.Start().ok());
  UpstreamClient client(1);
  UpstreamRequest req;
  req.method = "POST";
  req.target = "/echo";
  req.body = "hello";
  UpstreamTimeouts none;  // 0: no limit
  none.connect = none.read = std::chrono::milliseconds(0);
  Result a = Fetch(client, Local(srv.port()), req, none);
  EXPECT_EQ(a.outcome, UpstreamOutcome::kComplete) << a.message;
  EXPECT_EQ(a.status, 201);
  EXPECT_EQ(a.body, "POST /echo hello");

  req.target = "/stream";
  Result s = Fetch(client, Local(srv.port()), req);
  EXPECT_EQ(s.outcome, UpstreamOutcome::kComplete) << s.message;
  std::string expected;
  for (int i = 0; i < 50; ++i) expected += "data: " + std::to_string(i) + "\n\n";
  EXPECT_EQ(s.body, expected);
  srv.Stop();
}

// A listening socket that accepts connections (the kernel does) but never answers.
int SilentListener(int* port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  listen(fd, 16);
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

TEST(UpstreamClient, RefusedAndTimedOut) {
  int port = 0;
  int fd = SilentListener(&port);
  UpstreamClient client(1);
  UpstreamTimeouts t;
  t.read = std::chrono::milliseconds(200);
  Result slow = Fetch(client, Local(port), {}, t);
  EXPECT_EQ(slow.outcome, UpstreamOutcome::kTimeout) << slow.message;
  close(fd);  // nothing listens on `port` any more
  Result refused = Fetch(client, Local(port), {}, t);
  EXPECT_EQ(refused.outcome, UpstreamOutcome::kConnect) << refused.message;
}

TEST(UpstreamClient, AStreamSilentPastTheIdleTimeoutIsATimeout) {
  // /stall: the head and one event, then silence until the test releases it (or 10 s pass).
  // The handler parks the stream's channel; the test drops it before the server stops (a
  // channel must not outlive its server's io_context).
  struct Parked {
    std::mutex mu;
    std::condition_variable cv;
    std::shared_ptr<server::ResponseChannel> channel;
  };
  auto parked = std::make_shared<Parked>();
  server::HttpServerOptions o;
  o.port = 0;
  server::HttpServer srv(o,
                         [parked](server::HttpRequest, std::shared_ptr<server::ResponseChannel> c) {
                           c->StartStream({});
                           c->Write("data: 1\n\n");
                           std::lock_guard lock(parked->mu);
                           parked->channel = std::move(c);
                           parked->cv.notify_all();
                         });
  ASSERT_TRUE(srv.Start().ok());
  std::promise<void> release;
  std::thread ender([parked, done = release.get_future()]() mutable {
    done.wait_for(std::chrono::seconds(10));
    std::unique_lock lock(parked->mu);
    parked->cv.wait_for(lock, std::chrono::seconds(10), [&] { return parked->channel != nullptr; });
    if (parked->channel) parked->channel->EndStream();  // without the idle limit: ends complete
  });
  UpstreamClient client(1);
  UpstreamRequest req;
  req.target = "/stall";
  UpstreamTimeouts t;
  t.read = std::chrono::milliseconds(0);  // no limit on the head
  t.idle = std::chrono::milliseconds(200);
  Result r = Fetch(client, Local(srv.port()), req, t);
  release.set_value();
  ender.join();
  EXPECT_EQ(r.outcome, UpstreamOutcome::kTimeout) << r.message;
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "data: 1\n\n");
  {
    std::lock_guard lock(parked->mu);
    parked->channel.reset();
  }
  srv.Stop();
}

}  // namespace
}  // namespace tachyon::router
