#include "kv/kv_events.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "kv/block_pool.h"
#include "kv/kv_cache_manager.h"

namespace tachyon::kv {
namespace {

BlockHash H(int32_t token) {
  return HashBlock(RootHash(""), std::vector<int32_t>{token});
}

TEST(KvEventsTest, HashHexRoundTripsAndRejectsMalformed) {
  const BlockHash h{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  EXPECT_EQ(BlockHashHex(h), "fedcba98765432100123456789abcdef");
  EXPECT_EQ(ParseBlockHashHex(BlockHashHex(h)), h);
  EXPECT_EQ(ParseBlockHashHex("FEDCBA98765432100123456789ABCDEF"), h);
  EXPECT_FALSE(ParseBlockHashHex("fedcba98765432100123456789abcde").has_value());    // 31
  EXPECT_FALSE(ParseBlockHashHex("fedcba98765432100123456789abcdef0").has_value());  // 33
  EXPECT_FALSE(ParseBlockHashHex("fedcba98765432100123456789abcdeg").has_value());
  EXPECT_FALSE(ParseBlockHashHex("").has_value());
}

TEST(KvEventsTest, LogNumbersEventsAndSnapshotsTheCachedSet) {
  KvEventLog log(8);
  EXPECT_EQ(log.last_seq(), 0u);
  EXPECT_TRUE(log.ReadAfter(0, 100)->empty());
  log.BlockStored(H(1));
  log.BlockStored(H(2));
  log.BlockRemoved(H(1));
  const auto events = *log.ReadAfter(0, 100);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].seq, 1u);
  EXPECT_EQ(events[2].seq, 3u);
  EXPECT_EQ(events[2].kind, KvEvent::Kind::kRemoved);
  EXPECT_EQ(events[2].hash, H(1));
  EXPECT_GT(events[0].time_us, 0);
  EXPECT_EQ(log.ReadAfter(1, 1)->at(0).seq, 2u);  // at most max_events, from after_seq + 1
  EXPECT_TRUE(log.ReadAfter(3, 100)->empty());
  const auto snap = log.TakeSnapshot();
  EXPECT_EQ(snap.seq, 3u);
  EXPECT_EQ(snap.blocks, std::vector<BlockHash>{H(2)});
}

TEST(KvEventsTest, AReaderBehindTheWindowMustResnapshot) {
  KvEventLog log(4);
  for (int i = 0; i < 10; ++i) log.BlockStored(H(i));
  // Seqs 7..10 are kept: after 6 is readable, after 5 is not.
  ASSERT_TRUE(log.ReadAfter(6, 100).has_value());
  EXPECT_EQ(log.ReadAfter(6, 100)->front().seq, 7u);
  EXPECT_FALSE(log.ReadAfter(5, 100).has_value());
  EXPECT_FALSE(log.ReadAfter(0, 100).has_value());
  EXPECT_EQ(log.TakeSnapshot().blocks.size(), 10u);
}

TEST(KvEventsTest, BlockPoolReportsStoredAndEvictedHashes) {
  KvEventLog log;
  BlockPool pool(2);
  pool.set_event_sink(&log);
  std::vector<int32_t> ids;
  ASSERT_TRUE(pool.Allocate(2, &ids));
  ASSERT_TRUE(pool.Cache(ids[0], H(1)));
  ASSERT_FALSE(pool.Cache(ids[1], H(1)));  // refused: no event
  ASSERT_TRUE(pool.Cache(ids[1], H(2)));
  pool.Unref(ids);  // ids[0] is evicted first
  std::vector<int32_t> again;
  ASSERT_TRUE(pool.Allocate(1, &again));  // reuses ids[0]: H(1) leaves the cache
  pool.Unref(again);
  pool.EvictAllFree();  // H(2) leaves
  const auto events = *log.ReadAfter(0, 100);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].kind, KvEvent::Kind::kStored);
  EXPECT_EQ(events[0].hash, H(1));
  EXPECT_EQ(events[1].hash, H(2));
  EXPECT_EQ(events[2].kind, KvEvent::Kind::kRemoved);
  EXPECT_EQ(events[2].hash, H(1));
  EXPECT_EQ(events[3].kind, KvEvent::Kind::kRemoved);
  EXPECT_EQ(events[3].hash, H(2));
  EXPECT_TRUE(log.TakeSnapshot().blocks.empty());
}

TEST(KvEventsTest, CacheManagerPublishesTheEngineChainOfFullBlocks) {
  KvEventLog log;
  KvCacheConfig c;
  c.num_blocks = 8;
  c.block_size = 4;
  c.event_sink = &log;
  KvCacheManager kv(c);
  std::vector<int32_t> tokens(10);
  std::iota(tokens.begin(), tokens.end(), 100);
  ASSERT_TRUE(kv.Allocate(1, 10));
  kv.CommitComputed(1, tokens, 10, "salt");
  std::vector<BlockHash> want;
  ExtendBlockHashes(tokens, 4, RootHash("salt"), 100, &want);  // two full blocks
  auto snap = log.TakeSnapshot();
  std::sort(
      snap.blocks.begin(), snap.blocks.end(), [&want](const BlockHash& a, const BlockHash& b) {
        return std::find(want.begin(), want.end(), a) < std::find(want.begin(), want.end(), b);
      });
  EXPECT_EQ(snap.blocks, want);
  EXPECT_EQ(snap.seq, 2u);
}

TEST(KvEventsTest, ALayerGroupCachePublishesGroupZerosChainOnly) {
  // Gemma-like: one full-attention group and two sliding ones (window 8). Each group caches
  // its own copy of every full block under its own key; only group 0's, the chain hashes a
  // router computes, are published, stored and then removed.
  KvEventLog log;
  KvCacheConfig c;
  c.num_blocks = 12;
  c.block_size = 4;
  c.group_windows = {0, 8, 8};
  c.event_sink = &log;
  KvCacheManager kv(c);
  std::vector<int32_t> tokens(10);
  std::iota(tokens.begin(), tokens.end(), 100);
  ASSERT_TRUE(kv.Allocate(1, 10));
  kv.CommitComputed(1, tokens, 10, "");
  std::vector<BlockHash> want;
  ExtendBlockHashes(tokens, 4, RootHash(""), 100, &want);  // two full blocks
  auto events = *log.ReadAfter(0, 100);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].hash, want[0]);
  EXPECT_EQ(events[1].hash, want[1]);
  EXPECT_EQ(kv.pool().num_cached(), 6);  // 2 blocks x 3 groups
}

TEST(KvEventsTest, AnUnpublishedHashReachesTheSinkNeitherStoredNorRemoved) {
  KvEventLog log;
  BlockPool pool(2);
  pool.set_event_sink(&log);
  std::vector<int32_t> ids;
  ASSERT_TRUE(pool.Allocate(2, &ids));
  ASSERT_TRUE(pool.Cache(ids[0], H(1), /*publish=*/false));
  ASSERT_TRUE(pool.Cache(ids[1], H(2)));
  EXPECT_EQ(pool.Lookup(H(1)), ids[0]);  // cached all the same
  pool.Unref(ids);
  pool.EvictAllFree();
  const auto events = *log.ReadAfter(0, 100);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, KvEvent::Kind::kStored);
  EXPECT_EQ(events[0].hash, H(2));
  EXPECT_EQ(events[1].kind, KvEvent::Kind::kRemoved);
  EXPECT_EQ(events[1].hash, H(2));
}

TEST(KvEventsTest, ExternalBlocksArePublishedAsFlagged) {
  // Blocks loaded from a KV tier or received from another replica: a layer group's page past
  // group 0's is committed unpublished, as CommitComputed caches it.
  KvEventLog log;
  KvCacheConfig c;
  c.num_blocks = 4;
  c.block_size = 4;
  c.group_windows = {0, 8};
  c.event_sink = &log;
  KvCacheManager kv(c);
  const std::vector<BlockHash> keys = {H(1), GroupBlockHash(H(1), 1), H(2)};
  std::vector<int32_t> ids;
  ASSERT_TRUE(kv.AllocateExternal(keys, &ids));
  const std::vector<uint8_t> published = {1, 0, 1};
  kv.CommitExternal(ids, keys, published);
  EXPECT_EQ(kv.pool().num_cached(), 3);
  const auto events = *log.ReadAfter(0, 100);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].hash, H(1));
  EXPECT_EQ(events[1].hash, H(2));
}

}  // namespace
}  // namespace tachyon::kv
