#include "router/prefix_index.h"

#include <vector>

#include <gtest/gtest.h>

#include "router/testing/router_testing.h"

namespace tachyon::router {
namespace {

TEST(PrefixIndex, MatchesLeadingBlocksPerReplica) {
  PrefixIndex index(1000);
  const auto a = TestChain(0, 4);
  index.Insert(0, std::span(a).first(2));
  index.Insert(2, a);
  EXPECT_EQ(index.MatchLeadingBlocks(a, 3), (std::vector<int>{2, 0, 4}));
  // A prompt sharing only the first block.
  const auto tail = TestChain(1000, 2);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 16; ++i) tokens.push_back(i);
  for (int i = 0; i < 32; ++i) tokens.push_back(5000 + i);
  std::vector<kv::BlockHash> shared;
  kv::ExtendBlockHashes(tokens, 16, kv::RootHash(""), tokens.size(), &shared);
  EXPECT_EQ(index.MatchLeadingBlocks(shared, 3), (std::vector<int>{1, 0, 1}));
  EXPECT_EQ(index.MatchLeadingBlocks(tail, 3), (std::vector<int>{0, 0, 0}));
  // Another cache salt is another namespace.
  EXPECT_EQ(index.MatchLeadingBlocks(TestChain(0, 4, "tenant-b"), 3), (std::vector<int>{0, 0, 0}));
}

TEST(PrefixIndex, RemoveAndRemoveReplica) {
  PrefixIndex index(1000);
  const auto a = TestChain(0, 3);
  index.Insert(0, a);
  index.Insert(1, a);
  index.Remove(0, a[1]);  // replica 0 evicted its second block: its match stops at one
  EXPECT_EQ(index.MatchLeadingBlocks(a, 2), (std::vector<int>{1, 3}));
  index.RemoveReplica(1);
  EXPECT_EQ(index.MatchLeadingBlocks(a, 2), (std::vector<int>{1, 0}));
  EXPECT_EQ(index.size(), 2u);  // replica 0 still holds a[0] and a[2]
  index.Remove(0, a[0]);
  index.Remove(0, a[2]);
  EXPECT_EQ(index.size(), 0u);
}

TEST(PrefixIndex, BoundedLeastRecentlyUsed) {
  PrefixIndex index(4);
  const auto a = TestChain(0, 2);
  const auto b = TestChain(100, 2);
  index.Insert(0, a);
  index.Insert(1, b);
  EXPECT_EQ(index.size(), 4u);
  index.MatchLeadingBlocks(a, 2);  // a is now the most recently used
  const auto c = TestChain(200, 2);
  index.Insert(0, c);  // forgets b's two blocks
  EXPECT_EQ(index.size(), 4u);
  EXPECT_EQ(index.MatchLeadingBlocks(b, 2), (std::vector<int>{0, 0}));
  EXPECT_EQ(index.MatchLeadingBlocks(a, 2), (std::vector<int>{2, 0}));
  EXPECT_EQ(index.MatchLeadingBlocks(c, 2), (std::vector<int>{2, 0}));
}

TEST(PrefixIndex, SixtyFourReplicas) {
  PrefixIndex index(100);
  const auto a = TestChain(0, 1);
  index.Insert(63, a);
  std::vector<int> m = index.MatchLeadingBlocks(a, kMaxReplicas);
  EXPECT_EQ(m[63], 1);
  EXPECT_EQ(m[0], 0);
}

}  // namespace
}  // namespace tachyon::router
