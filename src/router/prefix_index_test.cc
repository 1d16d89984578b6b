#include "router/prefix_index.h"

#include <algorithm>
#include <list>
#include <map>
#include <random>
#include <utility>
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

// The same contract written the plain way (a map and a list), to check the open-addressing
// table against: every operation, then every match, agree.
class ReferenceIndex {
 public:
  explicit ReferenceIndex(size_t max_blocks) : max_(max_blocks) {}
  void Insert(int replica, std::span<const kv::BlockHash> hashes) {
    for (const kv::BlockHash& h : hashes) {
      auto it = holders_.find(Key(h));
      if (it == holders_.end()) {
        if (holders_.size() >= max_) Forget(lru_.front());
        it = holders_.emplace(Key(h), 0).first;
      } else {
        lru_.remove(Key(h));
      }
      it->second |= uint64_t{1} << replica;
      lru_.push_back(Key(h));
    }
  }
  void Remove(int replica, const kv::BlockHash& h) {
    auto it = holders_.find(Key(h));
    if (it == holders_.end()) return;
    it->second &= ~(uint64_t{1} << replica);
    if (it->second == 0) Forget(Key(h));
  }
  void RemoveReplica(int replica) {
    std::vector<std::pair<uint64_t, uint64_t>> keys;
    for (auto& [k, bits] : holders_) keys.push_back(k);
    for (const auto& k : keys) {
      holders_[k] &= ~(uint64_t{1} << replica);
      if (holders_[k] == 0) Forget(k);
    }
  }
  std::vector<int> Match(std::span<const kv::BlockHash> hashes, int n) {
    std::vector<int> matched(static_cast<size_t>(n), 0);
    uint64_t alive = (uint64_t{1} << n) - 1;
    for (size_t i = 0; i < hashes.size() && alive != 0; ++i) {
      auto it = holders_.find(Key(hashes[i]));
      if (it == holders_.end()) break;
      lru_.remove(Key(hashes[i]));
      lru_.push_back(Key(hashes[i]));
      alive &= it->second;
      for (int r = 0; r < n; ++r) {
        if (alive & (uint64_t{1} << r)) matched[r] = static_cast<int>(i + 1);
      }
    }
    return matched;
  }
  size_t size() const { return holders_.size(); }

 private:
  static std::pair<uint64_t, uint64_t> Key(const kv::BlockHash& h) { return {h.hi, h.lo}; }
  void Forget(std::pair<uint64_t, uint64_t> k) {
    holders_.erase(k);
    lru_.remove(k);
  }
  size_t max_;
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> holders_;
  std::list<std::pair<uint64_t, uint64_t>> lru_;  // front: least recently used
};

TEST(PrefixIndex, AgreesWithAPlainModelUnderRandomOperations) {
  constexpr int kReplicas = 5;
  // 120 blocks in the index at most, over chains of 8 blocks that share leading blocks: the
  // table grows from 16 buckets, evicts, reuses freed nodes and shifts buckets back on delete.
  PrefixIndex index(120);
  ReferenceIndex ref(120);
  std::mt19937 rng(7);
  std::vector<std::vector<kv::BlockHash>> chains;
  for (int c = 0; c < 60; ++c) {
    // Chains 2m and 2m + 1 begin with the same (2m % 4 or fewer) blocks, then differ.
    std::vector<kv::BlockHash> chain = TestChain(1000 * (c / 2), 8);
    const std::vector<kv::BlockHash> other = TestChain(1000 * (c / 2) + 500'000 + c, 8);
    std::copy(other.begin() + c % 4, other.end(), chain.begin() + c % 4);
    chains.push_back(std::move(chain));
  }
  for (int step = 0; step < 4000; ++step) {
    const auto& chain = chains[rng() % chains.size()];
    const int replica = static_cast<int>(rng() % kReplicas);
    const size_t len = 1 + rng() % chain.size();
    const std::span<const kv::BlockHash> prompt(chain.data(), len);
    switch (rng() % 10) {
      case 0:
      case 1:
      case 2:
      case 3:
        index.Insert(replica, prompt);
        ref.Insert(replica, prompt);
        break;
      case 4:
      case 5: {
        const kv::BlockHash& h = chain[rng() % chain.size()];
        index.Remove(replica, h);
        ref.Remove(replica, h);
        break;
      }
      case 6:
        if (rng() % 20 == 0) {
          index.RemoveReplica(replica);
          ref.RemoveReplica(replica);
        }
        break;
      default:
        ASSERT_EQ(index.MatchLeadingBlocks(prompt, kReplicas), ref.Match(prompt, kReplicas))
            << "step " << step;
    }
    ASSERT_EQ(index.size(), ref.size()) << "step " << step;
  }
  for (const auto& chain : chains) {
    EXPECT_EQ(index.MatchLeadingBlocks(chain, kReplicas), ref.Match(chain, kReplicas));
  }
}

TEST(PrefixIndex, MatchIntoASpanEqualsTheVectorForm) {
  PrefixIndex index(1000);
  const auto a = TestChain(0, 6);
  index.Insert(1, std::span(a).first(3));
  index.Insert(3, a);
  std::vector<int> into(4, -1);
  index.MatchLeadingBlocks(a, into);
  EXPECT_EQ(into, (std::vector<int>{0, 3, 0, 6}));
  EXPECT_EQ(index.MatchLeadingBlocks(a, 4), into);
  index.MatchLeadingBlocks({}, into);  // an empty prompt matches nothing anywhere
  EXPECT_EQ(into, (std::vector<int>{0, 0, 0, 0}));
}

TEST(PrefixIndex, ForgottenBlocksFreeTheirPlaceForNewOnes) {
  // Filling, emptying and refilling a small index many times over keeps its size exact.
  PrefixIndex index(64);
  for (int round = 0; round < 50; ++round) {
    const auto chain = TestChain(100 * round, 64);
    index.Insert(round % 3, chain);
    EXPECT_EQ(index.size(), 64u);
    EXPECT_EQ(index.MatchLeadingBlocks(chain, 3)[round % 3], 64);
    for (size_t i = 0; i < chain.size(); i += 2) index.Remove(round % 3, chain[i]);
    EXPECT_EQ(index.size(), 32u);
    index.RemoveReplica(round % 3);
    EXPECT_EQ(index.size(), 0u);
  }
}

TEST(PrefixIndex, MatchWithoutMarkingKeepsTheOrderAndInsertMarks) {
  PrefixIndex index(4);
  const auto a = TestChain(0, 2);
  const auto b = TestChain(100, 2);
  index.Insert(0, a);
  index.Insert(1, b);
  std::vector<int> m(2);
  index.MatchLeadingBlocks(a, m, /*mark_used=*/false);
  EXPECT_EQ(m, (std::vector<int>{2, 0}));
  index.Insert(0, TestChain(200, 2));  // a is still the least recently used: it goes
  EXPECT_EQ(index.MatchLeadingBlocks(a, 2), (std::vector<int>{0, 0}));
  EXPECT_EQ(index.MatchLeadingBlocks(b, 2), (std::vector<int>{0, 2}));
  // A placement (match unmarked, then insert) leaves the order a marked match would.
  PrefixIndex marked(40), unmarked(40);
  std::vector<std::vector<kv::BlockHash>> chains;
  for (int c = 0; c < 12; ++c) chains.push_back(TestChain(1000 * c, 5));
  for (int c = 0; c < 8; ++c) {
    marked.Insert(c % 3, chains[c]);
    unmarked.Insert(c % 3, chains[c]);
  }
  std::vector<int> m3(3);
  for (int c : {2, 5, 0, 9, 3, 11, 7}) {
    marked.MatchLeadingBlocks(chains[c], m3, true);
    marked.Insert(1, chains[c]);
    unmarked.MatchLeadingBlocks(chains[c], m3, false);
    unmarked.Insert(1, chains[c]);
  }
  for (const auto& chain : chains) {
    EXPECT_EQ(marked.MatchLeadingBlocks(chain, 3), unmarked.MatchLeadingBlocks(chain, 3));
  }
}

}  // namespace
}  // namespace tachyon::router
