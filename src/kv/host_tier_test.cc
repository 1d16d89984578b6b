#include "kv/host_tier.h"

#include <gtest/gtest.h>

#include <map>

#include "kv/testing/tier_test_util.h"

namespace tachyon::kv {
namespace {
using testing::Key;
using testing::TestBlock;

// A store that records what reaches it (the host tier's spills).
class RecordingStore : public BlockStore {
 public:
  std::string_view name() const override { return "rec"; }
  size_t Lookup(std::span<const BlockHash> keys) override {
    size_t n = 0;
    while (n < keys.size() && held.count(keys[n].lo)) ++n;
    return n;
  }
  Status Load(const BlockHash&, BlockChunks) override { return NotFound("rec"); }
  void Store(const BlockHash& key, BlockChunks src) override {
    std::vector<uint8_t> b;
    for (auto c : src) b.insert(b.end(), c.begin(), c.end());
    held[key.lo] = b;
  }
  // Records where each owned buffer's bytes live and gives it back to the shared pool (as the
  // disk tier does once a block is written).
  void StoreOwned(const BlockHash& key, std::vector<uint8_t> bytes) override {
    at[key.lo] = bytes.data();
    BlockStore::StoreOwned(key, bytes);
    if (pool) pool->Give(std::move(bytes));
  }
  void ShareBuffers(std::shared_ptr<BufferPool> p) override { pool = std::move(p); }
  double LoadSecondsPerBlock() const override { return 0; }
  BlockStoreStats Stats() const override { return {}; }
  std::map<uint64_t, std::vector<uint8_t>> held;
  std::map<uint64_t, const uint8_t*> at;
  std::shared_ptr<BufferPool> pool;
};

TEST(HostTier, StoresAndLoadsBlocksBitForBit) {
  HostTier t(1 << 20, nullptr);
  TestBlock a(4, 100, 1), b(4, 100, 2);
  t.Store(Key(1), a.chunks());
  t.Store(Key(2), b.chunks());
  const BlockHash keys[] = {Key(1), Key(2), Key(3), Key(1)};
  EXPECT_EQ(t.Lookup(keys), 2u);  // stops at the first it lacks
  TestBlock out(4, 100, 9);
  ASSERT_TRUE(t.Load(Key(2), out.chunks()).ok());
  EXPECT_EQ(out.data, b.data);
  EXPECT_EQ(t.Load(Key(3), out.chunks()).code(), StatusCode::kNotFound);
  TestBlock wrong(2, 100, 0);
  EXPECT_EQ(t.Load(Key(1), wrong.chunks()).code(), StatusCode::kInvalidArgument);
  const BlockStoreStats s = t.Stats();
  EXPECT_EQ(s.blocks, 2);
  EXPECT_EQ(s.bytes, 800);
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.load_failures, 2);
  EXPECT_EQ(s.misses, 1);
  EXPECT_GT(t.LoadSecondsPerBlock(), 0);
}

TEST(HostTier, EvictsLeastRecentlyUsedIntoTheNextTier) {
  auto next = std::make_shared<RecordingStore>();
  HostTier t(1300, next);  // three blocks of 400 bytes (and 81 bytes for free buffers)
  for (int i = 0; i < 3; ++i) t.Store(Key(i), TestBlock(4, 100, i).chunks());
  TestBlock out(4, 100, 0);
  ASSERT_TRUE(t.Load(Key(0), out.chunks()).ok());  // 0 is now the most recent
  t.Store(Key(3), TestBlock(4, 100, 3).chunks());  // evicts 1
  const BlockHash k1[] = {Key(1)}, k0[] = {Key(0)};
  EXPECT_EQ(t.Lookup(k1), 0u);
  EXPECT_EQ(t.Lookup(k0), 1u);
  ASSERT_EQ(next->held.size(), 1u);
  TestBlock one(4, 100, 1);
  std::vector<uint8_t> flat;
  for (auto& d : one.data) flat.insert(flat.end(), d.begin(), d.end());
  EXPECT_EQ(next->held[Key(1).lo], flat);
  EXPECT_EQ(t.Stats().evictions, 1);
  // A block larger than the whole tier is declined; a held key is only refreshed.
  t.Store(Key(9), TestBlock(4, 1000, 9).chunks());
  const BlockHash k9[] = {Key(9)};
  EXPECT_EQ(t.Lookup(k9), 0u);
  EXPECT_EQ(t.Stats().declined, 1);
  t.Store(Key(3), TestBlock(4, 100, 3).chunks());
  EXPECT_EQ(t.Stats().stores, 4);
  t.Flush();  // everything to the next tier
  EXPECT_EQ(t.Stats().blocks, 0);
  EXPECT_EQ(next->held.size(), 4u);
}

TEST(HostTier, ReusesTheBuffersTheNextTierGivesBack) {
  auto next = std::make_shared<RecordingStore>();
  HostTier t(16 * 400, next);  // a sixteenth for free buffers: 15 blocks and one free buffer
  ASSERT_NE(next->pool, nullptr);
  for (int i = 0; i < 16; ++i) t.Store(Key(i), TestBlock(4, 100, i).chunks());
  ASSERT_EQ(next->held.size(), 1u);  // 0 spilled, its buffer given back
  EXPECT_EQ(next->pool->bytes(), 400);
  EXPECT_EQ(t.Stats().blocks, 15);
  t.Store(Key(16), TestBlock(4, 100, 16).chunks());  // into block 0's buffer; spills 1
  EXPECT_EQ(t.Stats().blocks, 15);
  TestBlock out(4, 100, 0);
  ASSERT_TRUE(t.Load(Key(16), out.chunks()).ok());
  EXPECT_EQ(out.data, TestBlock(4, 100, 16).data);
  t.Flush();
  EXPECT_EQ(next->at[Key(16).lo], next->at[Key(0).lo]);
  EXPECT_EQ(next->held.size(), 17u);
}

}  // namespace
}  // namespace tachyon::kv
