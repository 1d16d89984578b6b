#include "server/kv_events.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "server/testing/fake_backend.h"
#include "server/testing/test_channel.h"

namespace tachyon::server {
namespace {

KvEventsOptions FastPolls() {
  KvEventsOptions o;
  o.poll_interval = std::chrono::milliseconds(1);
  return o;
}

TEST(KvEventPublisher, SleepsWithoutSubscribersAndWakesForOne) {
  FakeBackend backend;
  auto log = std::make_shared<kv::KvEventLog>();
  KvEventPublisher publisher(log, &backend, FastPolls());
  // Polling every 1 ms, 50 ms would be ~50 passes; with no subscriber it makes at most its first.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const uint64_t idle = publisher.polls();
  EXPECT_LE(idle, 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(publisher.polls(), idle);

  auto channel = std::make_shared<TestChannel>();
  publisher.Subscribe(channel);
  log->BlockStored({1, 2});
  // The subscription wakes the thread (nothing else would).
  for (int i = 0; i < 5000 && publisher.polls() == idle; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_GT(publisher.polls(), idle);
  publisher.Stop();  // joins the thread: the channel is read after its last write
  EXPECT_NE(channel->stream.find("\"snapshot\""), std::string::npos);
  EXPECT_TRUE(channel->done());
}

TEST(KvEventPublisher, SleepsAgainWhenItsLastSubscriberLeaves) {
  FakeBackend backend;
  auto log = std::make_shared<kv::KvEventLog>();
  KvEventPublisher publisher(log, &backend, FastPolls());
  auto channel = std::make_shared<TestChannel>();
  publisher.Subscribe(channel);
  channel->Disconnect();
  for (int i = 0; i < 5000 && publisher.subscribers() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(publisher.subscribers(), 0u);
  const uint64_t after = publisher.polls();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(publisher.polls(), after);
}

}  // namespace
}  // namespace tachyon::server
