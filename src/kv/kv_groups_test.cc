// Layer groups of the KV cache manager (kv_groups.h): per-group tables from one pool, sliding
// groups releasing blocks outside their window, prefix hits that need the full groups' blocks
// for the whole prefix and the sliding groups' only for the last window.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "kv/kv_groups.h"

namespace tachyon::kv {
namespace {

std::vector<int32_t> Iota(int n, int start = 0) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

// Section g of a group-major table of `groups` sections.
std::vector<int32_t> Section(const std::vector<int32_t>& t, int groups, int g) {
  const size_t len = t.size() / groups;
  return std::vector<int32_t>(t.begin() + g * len, t.begin() + (g + 1) * len);
}

KvCacheManager Make(int blocks, std::vector<int64_t> windows, bool caching = true) {
  KvCacheConfig c;
  c.num_blocks = blocks;
  c.block_size = 4;
  c.enable_prefix_caching = caching;
  c.group_windows = std::move(windows);
  return KvCacheManager(c);
}

TEST(KvGroupsTest, PeakBlocksAndCapacity) {
  const std::vector<int64_t> none;
  const std::vector<int64_t> gemma = {0, 8, 8};  // one full group, two sliding (window 8)
  EXPECT_EQ(PeakBlocksPerSequence(none, 4, 17, 1), 5);
  EXPECT_EQ(PeakBlocksPerSequence(gemma, 4, 4, 1), 3);  // short: every group holds it all
  // Decode (chunk 1) at any length: the window's 7 earlier positions + 1 touch <= 3 blocks.
  EXPECT_EQ(PeakBlocksPerSequence(gemma, 4, 1000, 1), 250 + 2 * 3);
  // A chunk of 8 after the window: 7 + 8 positions touch <= 5 blocks.
  EXPECT_EQ(PeakBlocksPerSequence(gemma, 4, 1000, 8), 250 + 2 * 5);
  EXPECT_EQ(MaxTokensInBlocks(none, 4, 10, 1), 40);
  EXPECT_EQ(MaxTokensInBlocks(gemma, 4, 10, 1), 16);  // 4 + 2 * min(4, 3)
  EXPECT_EQ(MaxTokensInBlocks(gemma, 4, 2, 1), 0);    // not even one block per group
  const std::vector<int64_t> all_sliding = {8};
  EXPECT_EQ(MaxTokensInBlocks(all_sliding, 4, 3, 1), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(MaxTokensInBlocks(all_sliding, 4, 3, 8), 12);  // a chunk of 8 needs 5 blocks
}

TEST(KvGroupsTest, GroupHashesAreDistinctAndGroupZeroIsThePlainKey) {
  const BlockHash h = HashBlock(RootHash(""), std::vector<int32_t>{1, 2, 3, 4});
  EXPECT_EQ(GroupBlockHash(h, 0), h);
  EXPECT_NE(GroupBlockHash(h, 1), h);
  EXPECT_NE(GroupBlockHash(h, 1), GroupBlockHash(h, 2));
}

TEST(KvGroupsTest, EachGroupGetsItsOwnBlocksAndSlidingOnesAreReleased) {
  KvCacheManager kv = Make(64, {0, 8, 8});
  ASSERT_EQ(kv.num_groups(), 3);
  const std::vector<int32_t> t = Iota(20);
  ASSERT_TRUE(kv.Allocate(1, 20));
  EXPECT_EQ(kv.Stats().used_blocks, 15);  // 5 blocks in each of 3 groups
  std::vector<int32_t> table = kv.BlockTable(1);
  ASSERT_EQ(table.size(), 15u);
  std::vector<int32_t> sorted = table;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "shared ids";
  // 20 computed: the next query (position 20) reads (12, 20]: blocks 3 and 4 only.
  kv.CommitComputed(1, t, 20, "");
  table = kv.BlockTable(1);
  EXPECT_EQ(kv.Stats().used_blocks, 5 + 2 * 2);
  for (int g = 1; g < 3; ++g) {
    const std::vector<int32_t> s = Section(table, 3, g);
    EXPECT_EQ(std::vector<int32_t>(s.begin(), s.begin() + 3), std::vector<int32_t>(3, -1));
    EXPECT_GE(s[3], 0);
    EXPECT_GE(s[4], 0);
  }
  EXPECT_EQ(Section(table, 3, 0).size(), 5u);
  for (int32_t b : Section(table, 3, 0)) EXPECT_GE(b, 0);
  // Growing appends a block to every group.
  ASSERT_TRUE(kv.Allocate(1, 21));
  EXPECT_EQ(kv.BlockTable(1).size(), 18u);
  EXPECT_EQ(kv.Stats().used_blocks, 6 + 2 * 3);
  kv.Free(1);
  EXPECT_EQ(kv.Stats().used_blocks, 0);
  EXPECT_EQ(kv.NumFreeBlocks(), 64);
}

TEST(KvGroupsTest, ReleaseHappensWithPrefixCachingOff) {
  KvCacheManager kv = Make(64, {0, 4}, /*caching=*/false);
  const std::vector<int32_t> t = Iota(16);
  ASSERT_TRUE(kv.Allocate(1, 16));
  kv.CommitComputed(1, t, 16, "");
  EXPECT_EQ(kv.Stats().used_blocks, 4 + 1);  // position 16 reads (12, 16]: block 3
  EXPECT_EQ(kv.Stats().cached_blocks, 0);
  kv.Free(1);
  EXPECT_EQ(kv.Stats().used_blocks, 0);
}

TEST(KvGroupsTest, PrefixHitNeedsOnlyTheLastWindowOfSlidingBlocks) {
  KvCacheManager kv = Make(64, {0, 4});
  const std::vector<int32_t> a = Iota(16, 100);
  ASSERT_TRUE(kv.Allocate(1, 16));
  kv.CommitComputed(1, a, 16, "");
  const std::vector<int32_t> held = kv.BlockTable(1);  // [f0 f1 f2 f3 | -1 -1 -1 s3]
  ASSERT_EQ(Section(held, 2, 1)[2], -1);

  std::vector<int32_t> b = a;
  b.push_back(7);  // the 16 tokens and one more: a hit of 4 blocks
  PrefixHit hit = kv.FindCachedPrefix(b, "");
  EXPECT_EQ(hit.num_tokens, 16);
  EXPECT_EQ(hit.blocks, held);  // full group: all four; sliding: only block 3
  EXPECT_EQ(kv.FindCachedPrefix(b, "other salt").num_tokens, 0);

  // Diverging inside block 3: 3 blocks, whose window (position 12 reads (8, 12]) is block 2;
  // that sliding block was released but is still cached (free), so it is found.
  std::vector<int32_t> c(a.begin(), a.begin() + 13);
  c.back() = 1;
  c.push_back(2);
  hit = kv.FindCachedPrefix(c, "");
  EXPECT_EQ(hit.num_tokens, 12);
  ASSERT_EQ(hit.blocks.size(), 6u);
  EXPECT_EQ(Section(hit.blocks, 2, 0), std::vector<int32_t>(held.begin(), held.begin() + 3));
  EXPECT_EQ(hit.blocks[3], -1);
  EXPECT_EQ(hit.blocks[4], -1);
  EXPECT_GE(hit.blocks[5], 0);
  EXPECT_EQ(kv.pool().ref_count(hit.blocks[5]), 0);  // a free cached block

  // Taking that hit references the free sliding block again; the pool stays consistent.
  const int free_before = kv.NumFreeBlocks();
  ASSERT_TRUE(kv.Allocate(2, 14, hit));
  EXPECT_EQ(kv.NumFreeBlocks(), free_before - 1 - 2);  // the revived block + block 3 twice
  EXPECT_EQ(Section(kv.BlockTable(2), 2, 1)[1], -1);
  kv.Free(1);
  kv.Free(2);
  EXPECT_EQ(kv.Stats().used_blocks, 0);
}

TEST(KvGroupsTest, EvictedSlidingBlocksShortenTheHit) {
  KvCacheManager kv = Make(10, {0, 4});
  const std::vector<int32_t> a = Iota(16, 100);
  ASSERT_TRUE(kv.Allocate(1, 16));
  kv.CommitComputed(1, a, 16, "");
  kv.Free(1);  // 8 blocks free and cached; the released sliding 0..2 are evicted first
  EXPECT_EQ(kv.Stats().cached_blocks, 8);
  std::vector<int32_t> b = a;
  b.push_back(7);
  std::vector<int32_t> c(a.begin(), a.begin() + 13);  // diverges inside block 3
  c.back() = 1;
  EXPECT_EQ(kv.FindCachedPrefix(b, "").num_tokens, 16);
  EXPECT_EQ(kv.FindCachedPrefix(c, "").num_tokens, 12);
  // 4 blocks: the 2 never used, then sliding blocks 0 and 1. Neither hit needs them.
  ASSERT_TRUE(kv.Allocate(9, 8));
  EXPECT_EQ(kv.FindCachedPrefix(b, "").num_tokens, 16);  // sliding block 3 only
  EXPECT_EQ(kv.FindCachedPrefix(c, "").num_tokens, 12);  // sliding block 2 only
  // 2 more: sliding block 2 and full block 3. b stops at 3 blocks, and 3 blocks need sliding
  // block 2, 2 blocks block 1, 1 block block 0: no hit at all.
  ASSERT_TRUE(kv.Allocate(10, 4));
  EXPECT_EQ(kv.FindCachedPrefix(b, "").num_tokens, 0);
  EXPECT_EQ(kv.FindCachedPrefix(c, "").num_tokens, 0);
  kv.Free(9);
  kv.Free(10);
  EXPECT_EQ(kv.Stats().used_blocks, 0);
}

TEST(KvGroupsTest, SharedPrefixSkipsReleasedWindows) {
  KvCacheManager kv = Make(64, {0, 4});
  const std::vector<int32_t> a = Iota(24, 5);
  ASSERT_TRUE(kv.Allocate(1, 24));
  kv.CommitComputed(1, a, 24, "");  // sliding keeps block 5 only (position 24 reads (20, 24])
  // Sharing 6 blocks needs sliding block 5: held.
  PrefixHit six = kv.SharedPrefix(1, 24);
  EXPECT_EQ(six.num_tokens, 24);
  EXPECT_EQ(six.blocks, kv.BlockTable(1));
  // Sharing 4 blocks would need sliding block 3, released: 4, 3, 2, 1 all need released blocks.
  EXPECT_EQ(kv.SharedPrefix(1, 16).num_tokens, 0);
  kv.Free(1);
}

TEST(KvGroupsTest, FreeBlocksPastShrinksEveryGroup) {
  KvCacheManager kv = Make(64, {0, 8, 8});
  const std::vector<int32_t> t = Iota(12);
  ASSERT_TRUE(kv.Allocate(1, 12));
  kv.CommitComputed(1, t, 12, "");  // keeps sliding blocks 1, 2 (position 12 reads (4, 12])
  ASSERT_TRUE(kv.Allocate(1, 24));  // drafts up to position 24
  EXPECT_EQ(kv.Stats().used_blocks, 6 + 2 * 5);
  kv.FreeBlocksPast(1, 13);  // one draft accepted: positions [0, 13) stay
  EXPECT_EQ(kv.BlockTable(1).size(), 12u);
  EXPECT_EQ(kv.Stats().used_blocks, 4 + 2 * 3);
  kv.Free(1);
  EXPECT_EQ(kv.Stats().used_blocks, 0);
}

TEST(KvGroupsTest, OneFullGroupIsThePlainCache) {
  KvCacheManager plain = Make(32, {});
  KvCacheManager one = Make(32, {0});
  const std::vector<int32_t> t = Iota(18);
  for (KvCacheManager* kv : {&plain, &one}) {
    ASSERT_TRUE(kv->Allocate(1, 18));
    kv->CommitComputed(1, t, 18, "s");
  }
  EXPECT_EQ(plain.BlockTable(1), one.BlockTable(1));
  std::vector<int32_t> more = t;
  more.push_back(3);
  EXPECT_EQ(plain.FindCachedPrefix(more, "s").blocks, one.FindCachedPrefix(more, "s").blocks);
  EXPECT_EQ(one.FindCachedPrefix(more, "s").num_tokens, 16);
}

}  // namespace
}  // namespace tachyon::kv
