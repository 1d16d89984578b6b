#include "server/pd_receiver.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "kv/kv_transport.h"
#include "kv/testing/wire_shape.h"
#include "server/pd_sender.h"

namespace tachyon::server {
namespace {

kv::KvWireShape Shape() {
  return kv::testing::PlainF16WireShape(/*n_layers=*/3, /*block_size=*/4, /*n_kv_heads=*/2,
                                        /*head_dim=*/8, {7, 8});
}

std::vector<uint8_t> BlockBytes(const kv::KvWireShape& s, int seed) {
  std::vector<uint8_t> v(s.block_bytes());
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>(seed * 37 + i * 11);
  return v;
}

// Loads `key` from the inbox into a block of `bytes` bytes (every chunk back to back).
Result<std::vector<uint8_t>> LoadBlock(KvInbox& inbox, const kv::KvWireShape& s,
                                       const kv::BlockHash& key) {
  std::vector<uint8_t> out(s.block_bytes());
  std::vector<std::span<uint8_t>> chunks;
  for (uint32_t c = 0; c < s.num_chunks; ++c) {
    chunks.push_back({out.data() + c * s.chunk_bytes, s.chunk_bytes});
  }
  RETURN_IF_ERROR(inbox.Load(key, chunks));
  return out;
}

TEST(KvInbox, LoadedBlocksLeaveTheirBuffersForTheNextReceive) {
  const kv::KvWireShape s = Shape();
  KvInbox inbox(int64_t{1} << 20, std::chrono::seconds(60));
  std::vector<uint8_t> a = inbox.TakeBuffer(s.block_bytes());  // none spare: a fresh one
  ASSERT_EQ(a.size(), s.block_bytes());
  const std::vector<uint8_t> want = BlockBytes(s, 1);
  std::copy(want.begin(), want.end(), a.begin());
  const uint8_t* memory = a.data();
  ASSERT_TRUE(inbox.Put({1, 1}, std::move(a), 0));
  auto loaded = LoadBlock(inbox, s, {1, 1});
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(*loaded, want);
  const std::vector<uint8_t> again = inbox.TakeBuffer(s.block_bytes());
  EXPECT_EQ(again.data(), memory);  // the loaded block's buffer, reused
  EXPECT_EQ(again.size(), s.block_bytes());
  EXPECT_NE(inbox.TakeBuffer(s.block_bytes()).data(), memory);  // one spare, taken
}

TEST(KvInbox, SpareBuffersGiveWayToBlocks) {
  // Room for two blocks: a spare buffer left by a load must not push out a held block.
  const kv::KvWireShape s = Shape();
  KvInbox inbox(static_cast<int64_t>(2 * s.block_bytes()), std::chrono::seconds(60));
  ASSERT_TRUE(inbox.Put({1, 0}, BlockBytes(s, 1), 0));
  ASSERT_TRUE(inbox.Put({2, 0}, BlockBytes(s, 2), 0));
  ASSERT_TRUE(LoadBlock(inbox, s, {1, 0}).ok());  // leaves a spare buffer
  EXPECT_EQ(inbox.spare_bytes(), static_cast<int64_t>(s.block_bytes()));
  ASSERT_TRUE(inbox.Put({3, 0}, BlockBytes(s, 3), 0));
  const kv::BlockHash held[] = {{2, 0}, {3, 0}};
  EXPECT_EQ(inbox.Lookup(held), 2u);
  EXPECT_EQ(inbox.Stats().evictions, 0);
  EXPECT_EQ(inbox.spare_bytes(), 0);  // held blocks and spares stay within the capacity
}

TEST(PdTransfer, BlocksArriveWholeOverLoopback) {
  const kv::KvWireShape s = Shape();
  auto inbox = std::make_shared<KvInbox>(int64_t{1} << 24, std::chrono::seconds(60));
  PdReceiver receiver(kv::NewTcpTransport(), s, inbox);
  ASSERT_TRUE(receiver.Start("127.0.0.1:0").ok());
  PdSender sender(kv::NewTcpTransport(), s);
  constexpr uint32_t kBlocks = 40;
  std::vector<std::vector<uint8_t>> pool;
  for (uint32_t b = 0; b < kBlocks; ++b) pool.push_back(BlockBytes(s, static_cast<int>(b)));
  // The second round reuses the loaded blocks' buffers and comes with the chunks' wire
  // checksums (as the engine hands what it just stored); the third with one that is wrong.
  for (int round = 0; round < 3; ++round) {
    std::promise<PdTransferResult> done;
    auto sink = sender.Start({receiver.address(), "t" + std::to_string(round)}, kBlocks,
                             [&](const PdTransferResult& r) { done.set_value(r); });
    for (uint32_t l = 0; l < s.layers_per_block; ++l) {  // layer-major, as a forward pass
      for (uint32_t b = 0; b < kBlocks; ++b) {
        uint8_t* k = pool[b].data() + 2 * l * s.chunk_bytes;
        const std::span<uint8_t> chunks[] = {{k, s.chunk_bytes},
                                             {k + s.chunk_bytes, s.chunk_bytes}};
        uint64_t digests[] = {kv::KvWireChunkDigest(chunks[0]), kv::KvWireChunkDigest(chunks[1])};
        if (round == 2 && b == 7 && l == 0) digests[1] ^= 1;
        sink->OnLayer(b, 0, kv::BlockHash{b, uint64_t(round)}, l, chunks,
                      round == 0 ? std::span<const uint64_t>() : std::span<const uint64_t>(digests));
      }
    }
    sink->OnEnd(OkStatus());
    const PdTransferResult r = done.get_future().get();
    if (round == 2) {
      EXPECT_FALSE(r.status.ok());  // the receiver refused the frame: a checksum mismatch
      EXPECT_FALSE(LoadBlock(*inbox, s, {7, 2}).ok());
      break;
    }
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(r.blocks_acked, kBlocks);
    for (uint32_t b = 0; b < kBlocks; ++b) {
      auto got = LoadBlock(*inbox, s, {b, uint64_t(round)});
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(*got, pool[b]) << "block " << b;
    }
  }
  receiver.Stop();
}

// Sends `blocks` blocks of `round` to the receiver layer-major (as a prefill step: every
// block's first layer, then every block's second, ...), so all of them are in flight at once.
PdTransferResult SendBlocks(PdSender& sender, const PdReceiver& receiver, const kv::KvWireShape& s,
                            uint32_t blocks, int round) {
  std::vector<std::vector<uint8_t>> pool;
  for (uint32_t b = 0; b < blocks; ++b) pool.push_back(BlockBytes(s, static_cast<int>(b)));
  std::promise<PdTransferResult> done;
  auto sink = sender.Start({receiver.address(), "t" + std::to_string(round)}, blocks,
                           [&](const PdTransferResult& r) { done.set_value(r); });
  for (uint32_t l = 0; l < s.layers_per_block; ++l) {
    for (uint32_t b = 0; b < blocks; ++b) {
      uint8_t* k = pool[b].data() + 2 * l * s.chunk_bytes;
      const std::span<uint8_t> chunks[] = {{k, s.chunk_bytes}, {k + s.chunk_bytes, s.chunk_bytes}};
      sink->OnLayer(b, 0, kv::BlockHash{b, uint64_t(round)}, l, chunks, {});
    }
  }
  sink->OnEnd(OkStatus());
  return done.get_future().get();
}

TEST(PdTransfer, BlocksInFlightStayWithinTheInbox) {
  // Room for 10 blocks: a transfer with 40 blocks in flight at once is refused when the 11th
  // starts (and again on a retry: nothing stays counted), one with 8 arrives whole.
  const kv::KvWireShape s = Shape();
  auto inbox = std::make_shared<KvInbox>(static_cast<int64_t>(10 * s.block_bytes()),
                                         std::chrono::seconds(60));
  PdReceiver receiver(kv::NewTcpTransport(), s, inbox);
  ASSERT_TRUE(receiver.Start("127.0.0.1:0").ok());
  PdSender sender(kv::NewTcpTransport(), s);
  for (int round = 0; round < 2; ++round) {
    EXPECT_FALSE(SendBlocks(sender, receiver, s, 40, round).status.ok());
    EXPECT_EQ(inbox->Stats().blocks, 0);
    EXPECT_EQ(inbox->receiving_bytes(), 0);
  }
  const PdTransferResult whole = SendBlocks(sender, receiver, s, 8, 2);
  ASSERT_TRUE(whole.status.ok()) << whole.status.ToString();
  EXPECT_EQ(whole.blocks_acked, 8u);
  EXPECT_EQ(inbox->Stats().blocks, 8);
  EXPECT_EQ(inbox->receiving_bytes(), 0);
  for (uint32_t b = 0; b < 8; ++b) {
    auto got = LoadBlock(*inbox, s, {b, 2});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, BlockBytes(s, static_cast<int>(b)));
  }
  receiver.Stop();
}

TEST(FinalOutputGate, HoldsTheFinalOutputUntilOpenAndCountsTheWait) {
  std::atomic<int64_t> held{0};
  FinalOutputGate gate(&held);
  int delivered = 0;
  gate.Deliver([&] { ++delivered; });
  EXPECT_EQ(delivered, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  gate.Open();
  EXPECT_EQ(delivered, 1);
  const int64_t waited = held.load();
  EXPECT_GE(waited, 3000);             // at least the sleep, in microseconds
  gate.Deliver([&] { ++delivered; });  // open: runs at once and waits for nothing
  EXPECT_EQ(delivered, 2);
  EXPECT_EQ(held.load(), waited);
}

TEST(FinalOutputGate, AnOutputAfterOpenAddsNoWait) {
  std::atomic<int64_t> held{0};
  FinalOutputGate gate(&held);
  gate.Open();
  int delivered = 0;
  gate.Deliver([&] { ++delivered; });
  EXPECT_EQ(delivered, 1);
  EXPECT_EQ(held.load(), 0);
}

}  // namespace
}  // namespace tachyon::server
