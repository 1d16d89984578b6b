#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "kv/block_hash.h"
#include "kv/block_pool.h"
#include "kv/kv_cache_manager.h"

namespace tachyon::kv {
namespace {

std::vector<int32_t> Range(int n, int start = 0) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST(BlockHashTest, ChainDependsOnParentTokensAndSalt) {
  std::vector<int32_t> a = {1, 2, 3, 4};
  std::vector<int32_t> b = {1, 2, 3, 5};
  BlockHash root = RootHash("");
  EXPECT_EQ(HashBlock(root, a), HashBlock(root, a));
  EXPECT_NE(HashBlock(root, a), HashBlock(root, b));
  EXPECT_NE(HashBlock(root, a), HashBlock(RootHash("salt"), a));
  EXPECT_NE(HashBlock(HashBlock(root, a), a), HashBlock(HashBlock(root, b), a));
}

TEST(BlockHashTest, ExtendOnlyHashesFullBlocks) {
  std::vector<BlockHash> h;
  std::vector<int32_t> t = Range(10);
  ExtendBlockHashes(t, 4, RootHash(""), 100, &h);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[1],
            HashBlock(HashBlock(RootHash(""), std::span(t).first(4)), std::span(t).subspan(4, 4)));
  ExtendBlockHashes(t, 4, RootHash(""), 1, &h);  // already beyond max: unchanged
  EXPECT_EQ(h.size(), 2u);
}

TEST(BlockPoolTest, AllocateUnrefAndLruEviction) {
  BlockPool pool(4);
  std::vector<int32_t> a;
  ASSERT_TRUE(pool.Allocate(3, &a));
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_EQ(pool.num_used(), 3);
  std::vector<int32_t> none;
  EXPECT_FALSE(pool.Allocate(2, &none));  // all-or-nothing
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(pool.num_free(), 1);

  BlockHash h1 = HashBlock(RootHash(""), std::vector<int32_t>{1});
  BlockHash h2 = HashBlock(RootHash(""), std::vector<int32_t>{2});
  EXPECT_TRUE(pool.Cache(a[0], h1));
  EXPECT_FALSE(pool.Cache(a[1], h1));  // hash already held by a[0]
  EXPECT_TRUE(pool.Cache(a[1], h2));
  EXPECT_EQ(pool.num_cached(), 2);
  pool.Unref(a);  // a[0] then a[1] then a[2] join the MRU end
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_EQ(pool.Lookup(h1), a[0]);

  // The never-used block (LRU) goes first, then a[0]: its hash is evicted.
  std::vector<int32_t> b;
  ASSERT_TRUE(pool.Allocate(2, &b));
  EXPECT_EQ(b[1], a[0]);
  EXPECT_FALSE(pool.Lookup(h1).has_value());
  EXPECT_EQ(pool.Lookup(h2), a[1]);

  // A hit on a free cached block takes it off the free list; only Allocate counts a hand-out.
  EXPECT_EQ(pool.allocations(a[0]), 2u);
  EXPECT_EQ(pool.allocations(a[1]), 1u);
  pool.Ref(std::vector<int32_t>{a[1]});
  EXPECT_EQ(pool.ref_count(a[1]), 1);
  EXPECT_EQ(pool.allocations(a[1]), 1u);
  EXPECT_EQ(pool.num_free(), 1);
  pool.Unref(std::vector<int32_t>{a[1]});
  pool.Unref(b);
  EXPECT_EQ(pool.num_free(), 4);
  pool.EvictAllFree();
  EXPECT_EQ(pool.num_cached(), 0);
}

TEST(KvCacheManagerTest, AllocateGrowsTableAndFreeReturnsBlocks) {
  KvCacheManager m({.num_blocks = 8, .block_size = 4});
  ASSERT_TRUE(m.Allocate(1, 5));
  EXPECT_EQ(m.BlockTable(1).size(), 2u);
  ASSERT_TRUE(m.Allocate(1, 8));  // still fits in 2
  EXPECT_EQ(m.BlockTable(1).size(), 2u);
  ASSERT_TRUE(m.Allocate(1, 9));
  EXPECT_EQ(m.BlockTable(1).size(), 3u);
  EXPECT_FALSE(m.Allocate(2, 4 * 6));  // needs 6, only 5 free
  EXPECT_FALSE(m.HasRequest(2));
  EXPECT_EQ(m.NumFreeBlocks(), 5);
  m.Free(1);
  EXPECT_EQ(m.NumFreeBlocks(), 8);
  EXPECT_EQ(m.Stats().used_blocks, 0);
}

TEST(KvCacheManagerTest, FreeBlocksPastReleasesOnlyTheUncommittedTail) {
  // Speculative decoding: blocks allocated for drafts that were rejected go back.
  KvCacheManager m({.num_blocks = 8, .block_size = 4});
  const std::vector<int32_t> toks = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  ASSERT_TRUE(m.Allocate(1, 16));    // 4 blocks: 6 known tokens + 10 drafts
  m.CommitComputed(1, toks, 5, "");  // 1 full computed block
  const std::vector<int32_t> head(m.BlockTable(1).begin(), m.BlockTable(1).begin() + 2);
  m.FreeBlocksPast(1, 7);  // keep positions [0, 7): 2 blocks
  EXPECT_EQ(m.BlockTable(1), head);
  EXPECT_EQ(m.Stats().used_blocks, 2);
  EXPECT_EQ(m.Stats().cached_blocks, 1);
  m.FreeBlocksPast(1, 8);   // not longer: nothing
  m.FreeBlocksPast(99, 0);  // no table: nothing
  EXPECT_EQ(m.Stats().used_blocks, 2);
  // The released blocks are allocatable again: 6 free of 8.
  EXPECT_EQ(m.NumFreeBlocks(), 6);
  ASSERT_TRUE(m.Allocate(2, 24));
  m.Free(1);
  m.Free(2);
  EXPECT_EQ(m.Stats().used_blocks, 0);
}

TEST(KvCacheManagerTest, PrefixHitReusesBlocksButNeverTheLastToken) {
  KvCacheManager m({.num_blocks = 16, .block_size = 4});
  std::vector<int32_t> prompt = Range(12);
  EXPECT_EQ(m.FindCachedPrefix(prompt, "").num_tokens, 0);
  ASSERT_TRUE(m.Allocate(1, 12));
  m.CommitComputed(1, prompt, 12, "");
  EXPECT_EQ(m.Stats().cached_blocks, 3);

  // Same 12 tokens: at most 8 may be reused (the last token must be computed).
  PrefixHit hit = m.FindCachedPrefix(prompt, "");
  EXPECT_EQ(hit.num_tokens, 8);
  std::vector<int32_t> longer = Range(14);
  hit = m.FindCachedPrefix(longer, "");
  ASSERT_EQ(hit.num_tokens, 12);
  EXPECT_EQ(hit.blocks, m.BlockTable(1));
  EXPECT_EQ(m.FindCachedPrefix(longer, "other-salt").num_tokens, 0);
  std::vector<int32_t> diverged = longer;
  diverged[5] = 99;  // second block differs: only the first matches
  EXPECT_EQ(m.FindCachedPrefix(diverged, "").num_tokens, 4);

  ASSERT_TRUE(m.Allocate(2, 14, hit));
  EXPECT_EQ(m.BlockTable(2).size(), 4u);
  EXPECT_EQ(m.pool().ref_count(hit.blocks[0]), 2);
  EXPECT_EQ(m.Stats().used_blocks, 4);

  // After both finish the blocks stay cached (free but findable) until evicted.
  m.Free(1);
  m.Free(2);
  EXPECT_EQ(m.Stats().used_blocks, 0);
  EXPECT_EQ(m.FindCachedPrefix(longer, "").num_tokens, 12);
  // Allocating the whole pool evicts them.
  ASSERT_TRUE(m.Allocate(3, 16 * 4));
  EXPECT_EQ(m.FindCachedPrefix(longer, "").num_tokens, 0);
  m.Free(3);
  EXPECT_EQ(m.NumFreeBlocks(), 16);
}

TEST(KvCacheManagerTest, HitOnFreeCachedBlocksCountsAgainstCapacity) {
  KvCacheManager m({.num_blocks = 4, .block_size = 2});
  std::vector<int32_t> t = Range(7);
  ASSERT_TRUE(m.Allocate(1, 6));
  m.CommitComputed(1, t, 6, "");
  m.Free(1);
  PrefixHit hit = m.FindCachedPrefix(t, "");
  ASSERT_EQ(hit.num_tokens, 6);
  // 3 hit blocks (free, cached) + 2 new blocks for 9 tokens > 4 blocks: must fail cleanly.
  EXPECT_FALSE(m.Allocate(2, 9, hit));
  EXPECT_EQ(m.NumFreeBlocks(), 4);
  EXPECT_EQ(m.Stats().cached_blocks, 3);
  ASSERT_TRUE(m.Allocate(2, 7, hit));
  EXPECT_EQ(m.NumFreeBlocks(), 0);
  m.Free(2);
}

TEST(KvCacheManagerTest, CachingOffNeverHits) {
  KvCacheManager m({.num_blocks = 8, .block_size = 4, .enable_prefix_caching = false});
  std::vector<int32_t> t = Range(9);
  ASSERT_TRUE(m.Allocate(1, 9));
  m.CommitComputed(1, t, 9, "");
  EXPECT_EQ(m.Stats().cached_blocks, 0);
  EXPECT_EQ(m.FindCachedPrefix(t, "").num_tokens, 0);
  m.Free(1);
}

TEST(KvCacheManagerTest, SharedPrefixForksWithRefcounts) {
  KvCacheManager m({.num_blocks = 8, .block_size = 4, .enable_prefix_caching = false});
  ASSERT_TRUE(m.Allocate(1, 10));           // 3 blocks
  PrefixHit shared = m.SharedPrefix(1, 9);  // two full blocks
  ASSERT_EQ(shared.blocks.size(), 2u);
  ASSERT_TRUE(m.Allocate(2, 10, shared));
  EXPECT_EQ(m.BlockTable(2)[0], m.BlockTable(1)[0]);
  EXPECT_EQ(m.BlockTable(2)[1], m.BlockTable(1)[1]);
  EXPECT_NE(m.BlockTable(2)[2], m.BlockTable(1)[2]);
  EXPECT_EQ(m.Stats().used_blocks, 4);
  m.Free(1);
  EXPECT_EQ(m.pool().ref_count(m.BlockTable(2)[0]), 1);
  m.Free(2);
  EXPECT_EQ(m.NumFreeBlocks(), 8);
}

TEST(KvCacheManagerTest, InFlightBlocksAreFoundUntilCommittedOrFreed) {
  KvCacheManager m({.num_blocks = 16, .block_size = 4});
  const std::vector<int32_t> a = Range(14);  // 3 full blocks
  ASSERT_TRUE(m.Allocate(1, 8));             // first chunk only
  m.MarkInFlight(1, a, "");
  EXPECT_TRUE(m.HasInFlight());
  std::vector<int32_t> b = Range(20);  // same first 14 tokens
  PrefixHit hit = m.FindCachedPrefix(b, "");
  EXPECT_EQ(hit.num_tokens, 0);
  EXPECT_EQ(hit.in_flight_tokens, 12);
  EXPECT_EQ(m.FindCachedPrefix(b, "salt").in_flight_tokens, 0);  // other namespace
  std::vector<int32_t> diverged = b;
  diverged[9] = 99;  // third block differs
  EXPECT_EQ(m.FindCachedPrefix(diverged, "").in_flight_tokens, 8);

  // The first chunk is computed: 2 blocks cached, the third still in flight.
  m.CommitComputed(1, a, 8, "");
  hit = m.FindCachedPrefix(b, "");
  EXPECT_EQ(hit.num_tokens, 8);
  EXPECT_EQ(hit.in_flight_tokens, 4);
  ASSERT_TRUE(m.Allocate(1, 14));
  m.CommitComputed(1, a, 14, "");
  hit = m.FindCachedPrefix(b, "");
  EXPECT_EQ(hit.num_tokens, 12);
  EXPECT_EQ(hit.in_flight_tokens, 0);
  EXPECT_FALSE(m.HasInFlight());

  // Freed before computing: nothing stays in flight.
  const std::vector<int32_t> c = Range(9, 100);
  ASSERT_TRUE(m.Allocate(2, 4));
  m.MarkInFlight(2, c, "");
  EXPECT_EQ(m.FindCachedPrefix(Range(12, 100), "").in_flight_tokens, 8);
  m.Free(2);
  EXPECT_FALSE(m.HasInFlight());
  EXPECT_EQ(m.FindCachedPrefix(Range(12, 100), "").in_flight_tokens, 0);

  // A block announced by one request stays its; a second announcer does not take it over,
  // and its own later blocks are still announced.
  ASSERT_TRUE(m.Allocate(3, 4));
  m.MarkInFlight(3, c, "");
  ASSERT_TRUE(m.Allocate(4, 4));
  std::vector<int32_t> d = Range(13, 100);
  m.MarkInFlight(4, d, "");
  m.Free(3);
  EXPECT_EQ(m.FindCachedPrefix(Range(16, 100), "").in_flight_tokens, 0);  // block 0 was 3's
  m.Free(4);
  EXPECT_FALSE(m.HasInFlight());
  m.Free(1);
  EXPECT_EQ(m.NumFreeBlocks(), 16);
}

TEST(KvCacheManagerTest, AttachInFlightTakesOnlyBlocksTheStepCompletes) {
  KvCacheManager m({.num_blocks = 16, .block_size = 4});
  const std::vector<int32_t> a = Range(14);  // 3 full blocks
  ASSERT_TRUE(m.Allocate(1, 14));
  m.MarkInFlight(1, a, "");
  const std::vector<int32_t> b = Range(20);  // same first 14 tokens
  int64_t covered = 8;                       // request 1's KV after the step being built
  auto after_step = [&](int64_t owner) { return owner == 1 ? covered : 0; };
  PrefixHit hit = m.AttachInFlight(m.FindCachedPrefix(b, ""), b, "", after_step);
  const std::vector<int32_t>& table = m.BlockTable(1);
  EXPECT_EQ(hit.num_tokens, 8);
  EXPECT_EQ(hit.blocks, std::vector<int32_t>(table.begin(), table.begin() + 2));
  EXPECT_EQ(hit.in_flight_tokens, 4);  // block 2 completes later: still to wait for
  covered = 14;
  hit = m.AttachInFlight(m.FindCachedPrefix(b, ""), b, "", after_step);
  EXPECT_EQ(hit.num_tokens, 12);
  EXPECT_EQ(hit.in_flight_tokens, 0);
  // Shared by reference; committed once by request 1 after the step.
  ASSERT_TRUE(m.Allocate(2, 20, hit));
  EXPECT_EQ(m.pool().ref_count(table[0]), 2);
  m.CommitComputed(1, a, 14, "");
  m.CommitComputed(2, b, 20, "");
  EXPECT_FALSE(m.HasInFlight());
  EXPECT_EQ(m.FindCachedPrefix(Range(24), "").num_tokens, 20);
  // Another salt, or an owner not in the step, attaches nothing.
  ASSERT_TRUE(m.Allocate(3, 4));
  const std::vector<int32_t> c = Range(9, 100);
  m.MarkInFlight(3, c, "s");
  EXPECT_EQ(m.AttachInFlight(m.FindCachedPrefix(Range(12, 100), ""), Range(12, 100), "", after_step)
                .num_tokens,
            0);
  hit = m.AttachInFlight(m.FindCachedPrefix(Range(12, 100), "s"), Range(12, 100), "s", after_step);
  EXPECT_EQ(hit.num_tokens, 0);
  EXPECT_EQ(hit.in_flight_tokens, 8);
  // Blocks a store loads are never attached.
  std::vector<int32_t> ids;
  const BlockHash key = HashBlock(RootHash(""), std::vector<int32_t>{7, 7, 7, 7});
  ASSERT_TRUE(m.AllocateExternal(std::span<const BlockHash>(&key, 1), &ids));
  const std::vector<int32_t> loaded = {7, 7, 7, 7, 1};
  hit = m.AttachInFlight(m.FindCachedPrefix(loaded, ""), loaded, "",
                         [](int64_t) { return int64_t{1} << 40; });
  EXPECT_EQ(hit.num_tokens, 0);
  EXPECT_EQ(hit.in_flight_tokens, 4);
  m.ReleaseExternal(ids, std::span<const BlockHash>(&key, 1));
  for (int64_t id : {1, 2, 3}) m.Free(id);
  EXPECT_EQ(m.pool().num_used(), 0);
}

TEST(KvCacheManagerTest, CanAllocateMatchesAllocate) {
  KvCacheManager m({.num_blocks = 4, .block_size = 2});
  EXPECT_TRUE(m.CanAllocate(1, 8));
  EXPECT_FALSE(m.CanAllocate(1, 9));
  ASSERT_TRUE(m.Allocate(1, 5));  // 3 blocks
  EXPECT_TRUE(m.CanAllocate(1, 8));
  EXPECT_FALSE(m.CanAllocate(2, 3));
  EXPECT_EQ(m.NumFreeBlocks(), 1);
  m.Free(1);
}

TEST(KvCacheManagerTest, HitRateCounters) {
  KvCacheManager m({.num_blocks = 8, .block_size = 4});
  m.RecordPrefixQuery(10, 0);
  m.RecordPrefixQuery(10, 5);
  EXPECT_DOUBLE_EQ(m.Stats().PrefixHitRate(), 0.25);
}

}  // namespace
}  // namespace tachyon::kv
