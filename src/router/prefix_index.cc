#include "router/prefix_index.h"

#include <algorithm>

#include "util/logging.h"

namespace tachyon::router {
namespace {

constexpr size_t kMaxIndexBlocks = size_t{1} << 31;
constexpr int kMinTableBits = 4;
// How many blocks ahead of the one being looked up its bucket is prefetched, and its node
// (named by the bucket, which has arrived by then). Memory latency is hundreds of ns on a busy
// host, so the pipeline is deep; a prompt's lookups then overlap instead of queueing.
constexpr size_t kBucketAhead = 32;
constexpr size_t kNodeAhead = 16;

uint64_t AllReplicas(size_t n) {
  return n >= static_cast<size_t>(kMaxReplicas) ? ~uint64_t{0} : (uint64_t{1} << n) - 1;
}

}  // namespace

PrefixIndex::PrefixIndex(size_t max_blocks)
    : max_blocks_(std::clamp<size_t>(max_blocks, 1, kMaxIndexBlocks)),
      buckets_(size_t{1} << kMinTableBits, 0),
      table_bits_(kMinTableBits) {}

uint32_t PrefixIndex::Tag(const kv::BlockHash& h) {
  return static_cast<uint32_t>(((h.lo ^ h.hi) * 0x9e3779b97f4a7c15ULL) >> 32);
}

void PrefixIndex::Prefetch(const kv::BlockHash& h) const {
  __builtin_prefetch(&buckets_[Home(Tag(h))]);
}

void PrefixIndex::StartPrefetch(std::span<const kv::BlockHash> hashes) const {
  for (size_t j = 0; j < std::min(hashes.size(), kBucketAhead); ++j) Prefetch(hashes[j]);
}

void PrefixIndex::PrefetchAhead(std::span<const kv::BlockHash> hashes, size_t i) const {
  if (i + kBucketAhead < hashes.size()) Prefetch(hashes[i + kBucketAhead]);
  if (i + kNodeAhead < hashes.size()) PrefetchNode(hashes[i + kNodeAhead]);
}

void PrefixIndex::PrefetchNode(const kv::BlockHash& h) const {
  const uint32_t tag = Tag(h);
  const uint64_t b = buckets_[Home(tag)];
  if (b != 0 && static_cast<uint32_t>(b >> 32) == tag) {
    __builtin_prefetch(&nodes_[static_cast<uint32_t>(b) - 1]);
  }
}

uint32_t PrefixIndex::Find(const kv::BlockHash& h) const {
  const uint32_t tag = Tag(h);
  const size_t mask = buckets_.size() - 1;
  for (size_t pos = Home(tag);; pos = (pos + 1) & mask) {
    const uint64_t b = buckets_[pos];
    if (b == 0) return kNil;  // the table is never full, so a probe ends
    if (static_cast<uint32_t>(b >> 32) == tag) {
      const uint32_t node = static_cast<uint32_t>(b) - 1;
      if (nodes_[node].hash == h) return node;
    }
  }
}

void PrefixIndex::InsertBucket(uint32_t tag, uint32_t node) {
  const size_t mask = buckets_.size() - 1;
  size_t pos = Home(tag);
  while (buckets_[pos] != 0) pos = (pos + 1) & mask;
  buckets_[pos] = (uint64_t{tag} << 32) | (uint64_t{node} + 1);
}

void PrefixIndex::EraseBucket(uint32_t node) {
  const size_t mask = buckets_.size() - 1;
  const uint64_t low = uint64_t{node} + 1;
  size_t hole = Home(Tag(nodes_[node].hash));
  while ((buckets_[hole] & 0xffffffffULL) != low) hole = (hole + 1) & mask;
  // Backward shift: pull later buckets of the probe run into the hole when their home allows.
  for (size_t j = (hole + 1) & mask; buckets_[j] != 0; j = (j + 1) & mask) {
    const size_t home = Home(static_cast<uint32_t>(buckets_[j] >> 32));
    if (((j - home) & mask) >= ((j - hole) & mask)) {
      buckets_[hole] = buckets_[j];
      hole = j;
    }
  }
  buckets_[hole] = 0;
}

void PrefixIndex::Grow() {
  ++table_bits_;
  buckets_.assign(size_t{1} << table_bits_, 0);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].holders != 0) InsertBucket(Tag(nodes_[i].hash), static_cast<uint32_t>(i));
  }
}

void PrefixIndex::Unlink(uint32_t node) {
  const uint32_t prev = nodes_[node].prev;
  const uint32_t next = nodes_[node].next;
  (prev != kNil ? nodes_[prev].next : head_) = next;
  (next != kNil ? nodes_[next].prev : tail_) = prev;
}

void PrefixIndex::PushBack(uint32_t node) {
  nodes_[node].prev = tail_;
  nodes_[node].next = kNil;
  (tail_ != kNil ? nodes_[tail_].next : head_) = node;
  tail_ = node;
}

void PrefixIndex::Touch(uint32_t node) {
  if (node == tail_) return;
  Unlink(node);
  PushBack(node);
}

void PrefixIndex::Forget(uint32_t node) {
  EraseBucket(node);
  Unlink(node);
  nodes_[node].holders = 0;
  nodes_[node].next = free_;
  free_ = node;
  --size_;
}

uint32_t PrefixIndex::TakeNode() {
  if (size_ >= max_blocks_) {
    // The next victim's node is wanted by the next new block: start loading it now.
    const uint32_t next = nodes_[head_].next;
    if (next != kNil) __builtin_prefetch(&nodes_[next]);
    Forget(head_);
  }
  if ((size_ + 1) * 2 > buckets_.size()) Grow();
  if (free_ != kNil) {
    const uint32_t node = free_;
    free_ = nodes_[node].next;
    return node;
  }
  nodes_.emplace_back();
  return static_cast<uint32_t>(nodes_.size() - 1);
}

void PrefixIndex::Insert(int replica, std::span<const kv::BlockHash> hashes) {
  CHECK(replica >= 0 && replica < kMaxReplicas);
  const uint64_t bit = uint64_t{1} << replica;
  StartPrefetch(hashes);
  for (size_t i = 0; i < hashes.size(); ++i) {
    PrefetchAhead(hashes, i);
    const kv::BlockHash& h = hashes[i];
    const uint32_t found = Find(h);
    if (found != kNil) {
      nodes_[found].holders |= bit;
      Touch(found);
      continue;
    }
    const uint32_t node = TakeNode();
    nodes_[node].hash = h;
    nodes_[node].holders = bit;
    PushBack(node);
    InsertBucket(Tag(h), node);
    ++size_;
  }
}

void PrefixIndex::Remove(int replica, const kv::BlockHash& hash) {
  if (replica < 0 || replica >= kMaxReplicas) return;
  const uint32_t node = Find(hash);
  if (node == kNil) return;
  nodes_[node].holders &= ~(uint64_t{1} << replica);
  if (nodes_[node].holders == 0) Forget(node);
}

void PrefixIndex::RemoveReplica(int replica) {
  if (replica < 0 || replica >= kMaxReplicas) return;
  const uint64_t bit = uint64_t{1} << replica;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node& n = nodes_[i];
    if ((n.holders & bit) == 0) continue;
    n.holders &= ~bit;
    if (n.holders == 0) Forget(static_cast<uint32_t>(i));
  }
}

std::vector<int> PrefixIndex::MatchLeadingBlocks(std::span<const kv::BlockHash> hashes,
                                                 int num_replicas) {
  std::vector<int> matched(static_cast<size_t>(std::clamp(num_replicas, 0, kMaxReplicas)), 0);
  MatchLeadingBlocks(hashes, matched);
  return matched;
}

void PrefixIndex::MatchLeadingBlocks(std::span<const kv::BlockHash> hashes, std::span<int> matched,
                                     bool mark_used) {
  CHECK(matched.size() <= static_cast<size_t>(kMaxReplicas));
  // Replicas still matching every block so far; a replica's count is set when it drops out.
  uint64_t alive = AllReplicas(matched.size());
  size_t i = 0;
  StartPrefetch(hashes);
  for (; i < hashes.size() && alive != 0; ++i) {
    PrefetchAhead(hashes, i);
    const uint32_t node = Find(hashes[i]);
    if (node == kNil) break;
    if (mark_used) Touch(node);
    const uint64_t still = alive & nodes_[node].holders;
    for (uint64_t m = alive & ~still; m != 0; m &= m - 1) {
      matched[static_cast<size_t>(__builtin_ctzll(m))] = static_cast<int>(i);
    }
    alive = still;
  }
  for (uint64_t m = alive; m != 0; m &= m - 1) {
    matched[static_cast<size_t>(__builtin_ctzll(m))] = static_cast<int>(i);
  }
}

}  // namespace tachyon::router
