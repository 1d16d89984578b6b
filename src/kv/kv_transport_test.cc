#include "kv/kv_transport.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "kv/testing/wire_shape.h"

namespace tachyon::kv {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

KvDeadline In(std::chrono::steady_clock::duration d) {
  return std::chrono::steady_clock::now() + d;
}

struct Pair {
  std::unique_ptr<KvTransport> transport = NewTcpTransport();
  std::unique_ptr<KvListener> listener;
  std::unique_ptr<KvConnection> client, server;
};

Pair Connected() {
  Pair p;
  auto l = p.transport->Listen("127.0.0.1:0");
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  p.listener = std::move(*l);
  auto c = p.transport->Connect(p.listener->address(), In(seconds(10)));
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  p.client = std::move(*c);
  auto s = p.listener->Accept(In(seconds(10)));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  p.server = std::move(*s);
  return p;
}

KvWireShape BigShape() {
  return testing::PlainF16WireShape(/*n_layers=*/4, /*block_size=*/16, /*n_kv_heads=*/4,
                                    /*head_dim=*/64);
}

TEST(KvTransport, GatherSendDecodesOnTheOtherSideAndAcks) {
  Pair p = Connected();
  ASSERT_TRUE(p.server);
  const KvWireShape shape = BigShape();
  constexpr int kBlocks = 40;
  // The chunks live in one "pool" buffer and are sent from it without a copy.
  std::vector<uint8_t> pool(kBlocks * shape.block_bytes());
  for (size_t i = 0; i < pool.size(); ++i) pool[i] = static_cast<uint8_t>(i * 2654435761u >> 13);

  std::thread sender([&] {
    std::vector<KvWireFrame> frames;
    frames.push_back(*EncodeHeader({shape, "r1", kBlocks}));
    for (int b = 0; b < kBlocks; ++b) {
      std::vector<std::span<const uint8_t>> chunks;
      for (uint32_t c = 0; c < shape.num_chunks; ++c) {
        chunks.emplace_back(pool.data() + (b * shape.num_chunks + c) * shape.chunk_bytes,
                            shape.chunk_bytes);
      }
      std::vector<KvWireFrame> layers = *EncodeBlockLayers(shape, b, 0, {uint64_t(b), 0}, chunks);
      for (KvWireFrame& f : layers) frames.push_back(std::move(f));
    }
    frames.push_back(EncodeEnd({kBlocks, KvWireEndStatus::kComplete}));
    EXPECT_TRUE(p.client->Send(frames, In(seconds(30))).ok());
    std::vector<uint8_t> ack(kKvWireAckFrameBytes);
    ASSERT_TRUE(p.client->ReceiveExactly(ack, In(seconds(30))).ok());
    auto a = DecodeAck(ack);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->num_blocks, static_cast<uint32_t>(kBlocks));
  });

  KvWireDecoder d;
  std::vector<KvWireBlock> got;
  while (!d.done()) {
    auto n = p.server->Receive(d.NextBuffer(), In(seconds(30)));
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    ASSERT_GT(*n, 0u);
    ASSERT_TRUE(d.Commit(*n).ok()) << d.status().ToString();
    for (auto& b : d.TakeBlocks()) got.push_back(std::move(b));
  }
  ASSERT_TRUE(p.server->Send(std::vector{EncodeAck({d.blocks_decoded(), 0})}, In(seconds(5))).ok());
  sender.join();
  ASSERT_EQ(got.size(), static_cast<size_t>(kBlocks));
  for (int b = 0; b < kBlocks; ++b) {
    for (uint32_t c = 0; c < shape.num_chunks; ++c) {
      const uint8_t* want = pool.data() + (b * shape.num_chunks + c) * shape.chunk_bytes;
      ASSERT_TRUE(std::equal(got[b].chunk(c).begin(), got[b].chunk(c).end(), want)) << b;
    }
  }
}

TEST(KvTransport, SendToAPeerThatNeverReadsStallsUntilTheDeadline) {
  Pair p = Connected();
  std::vector<uint8_t> big(64 << 20, 1);
  KvWireFrame f;
  f.body.emplace_back(big);
  const Status s = p.client->Send(std::vector{f}, In(milliseconds(200)));
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
}

TEST(KvTransport, ReceiveDeadlineEndOfStreamAndReset) {
  Pair p = Connected();
  uint8_t buf[16];
  auto r = p.server->Receive(buf, In(milliseconds(50)));
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  p.client.reset();  // orderly close
  r = p.server->Receive(buf, In(seconds(5)));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 0u);
  EXPECT_EQ(p.server->ReceiveExactly(buf, In(seconds(5))).code(), StatusCode::kDataLoss);
  // Writing to a closed peer ends in Unavailable (the peer's reset), not a signal.
  std::vector<uint8_t> chunk(1 << 16, 2);
  KvWireFrame f;
  f.body.emplace_back(chunk);
  Status s;
  for (int i = 0; i < 100 && s.ok(); ++i) s = p.server->Send(std::vector{f}, In(seconds(5)));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
}

TEST(KvTransport, CloseWakesBlockedCalls) {
  Pair p = Connected();
  std::thread closer([&] {
    std::this_thread::sleep_for(milliseconds(50));
    p.server->Close();
    p.listener->Close();
  });
  uint8_t buf[4];
  auto r = p.server->Receive(buf, In(seconds(60)));
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled);
  closer.join();
  auto a = p.listener->Accept(In(seconds(60)));
  EXPECT_EQ(a.status().code(), StatusCode::kCancelled);
}

TEST(KvTransport, ConnectErrors) {
  auto t = NewTcpTransport();
  std::string address;
  {
    auto l = t->Listen("127.0.0.1:0");
    ASSERT_TRUE(l.ok());
    address = (*l)->address();
  }
  EXPECT_EQ(t->Connect(address, In(seconds(5))).status().code(), StatusCode::kUnavailable);
  for (const char* bad : {"nohostport", "host:", ":80", "a:99999", "[::1]80", "a:b:1", "x:-1"}) {
    EXPECT_EQ(t->Connect(bad, In(seconds(5))).status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(t->Listen(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  std::string host;
  uint16_t port = 0;
  ASSERT_TRUE(SplitHostPort("[::1]:8080", &host, &port).ok());
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 8080);
}

TEST(KvTransport, StallBoundGrowsWithTheSize) {
  StallBound b{1.0, 1e6};
  const KvDeadline now{};
  EXPECT_EQ(b.For(0, now) - now, std::chrono::seconds(1));
  EXPECT_EQ(std::chrono::duration_cast<milliseconds>(b.For(3'000'000, now) - now),
            milliseconds(4000));
}

}  // namespace
}  // namespace tachyon::kv
