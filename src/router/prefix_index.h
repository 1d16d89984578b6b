// PrefixIndex: which replica holds which KV block, keyed by the engine's own block hash chain
// (kv/block_hash.h: 16-token blocks, chained from RootHash(cache_salt)), so a block named by
// the router's own routing history and one named by a replica's KV event are the same key.
//
// Fed two ways (router/replica_pool.h): the replicas' stored / removed KV events, and what the
// router itself placed where (Insert after placing a request). Because a block's hash names its
// whole prefix, a replica's match for a prompt is the number of leading blocks it holds.
//
// Bounded: at most `max_blocks` distinct hashes; beyond that the least recently inserted or
// matched hash is forgotten for every replica (exact LRU). Replicas are ids in
// [0, kMaxReplicas).
//
// Layout, for the routing decision's sake (a 512-block prompt looked up and inserted among 1M
// blocks in tens of microseconds): blocks live in one array of 32-byte nodes (hash, holder
// bits, LRU links as array indices; a forgotten block's node is reused), found through an
// open-addressing table of 8-byte buckets (linear probing, load <= 1/2, deletion by backward
// shift, so no tombstones). A bucket carries the upper half of the hash's mixed bits, which
// is also its home position, so probing and deletion rarely touch a node. Matching and
// inserting a prompt prefetch the buckets and nodes of blocks a few positions ahead, so the
// cache misses of one prompt overlap instead of queueing. No allocation per call once the
// index is full. The hashes are content hashes from the engine (XXH3-128), so they spread
// evenly over the table.
//
// Thread-safety: none; the caller serialises (ReplicaPool holds it under its mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kv/block_hash.h"
#include "router/huge_page_allocator.h"

namespace tachyon::router {

inline constexpr int kMaxReplicas = 64;

class PrefixIndex {
 public:
  // `max_blocks` is clamped to [1, 2^31].
  explicit PrefixIndex(size_t max_blocks);

  // Records that `replica` holds each of `hashes` (a prompt's chain, first block first); each
  // becomes the most recently used.
  // REQUIRES: 0 <= replica < kMaxReplicas.
  void Insert(int replica, std::span<const kv::BlockHash> hashes);
  // `replica` no longer holds `hash` (an eviction). A block no replica holds is forgotten.
  void Remove(int replica, const kv::BlockHash& hash);
  // Forgets everything `replica` holds (it restarted or left). Walks the whole index.
  void RemoveReplica(int replica);

  // For each replica id in [0, num_replicas): how many leading blocks of `hashes` it holds.
  // Marks the matched hashes as recently used.
  std::vector<int> MatchLeadingBlocks(std::span<const kv::BlockHash> hashes, int num_replicas);
  // The same, written to matched[0, matched.size()) without allocating. With `mark_used`
  // false the matched hashes keep their place in the LRU order: for a caller that Inserts the
  // same hashes next (a placement), which marks them anyway and leaves the same order.
  // REQUIRES: matched.size() <= kMaxReplicas.
  void MatchLeadingBlocks(std::span<const kv::BlockHash> hashes, std::span<int> matched,
                          bool mark_used = true);

  // A hint for a caller about to look `hash` up: starts loading its bucket. Changes nothing.
  void Prefetch(const kv::BlockHash& hash) const;

  size_t size() const { return size_; }
  size_t max_blocks() const { return max_blocks_; }

 private:
  static constexpr uint32_t kNil = 0xffffffffu;
  struct Node {
    kv::BlockHash hash;
    uint64_t holders = 0;  // bit r: replica r holds the block; 0: the node is free
    uint32_t prev = kNil;  // LRU neighbours (towards the least / most recently used); the
    uint32_t next = kNil;  // free list links through `next`
  };
  static_assert(sizeof(Node) == 32);

  // The upper 32 bits of the hash's mixed bits: bucket tag and home position.
  static uint32_t Tag(const kv::BlockHash& h);
  size_t Home(uint32_t tag) const { return tag >> (32 - table_bits_); }
  // Prefetches the node of `h` when its home bucket (prefetched a few blocks ago) names it.
  void PrefetchNode(const kv::BlockHash& h) const;
  // The prefetch pipeline over a prompt: the first buckets before its loop, then at block i
  // the bucket and the node of blocks further on.
  void StartPrefetch(std::span<const kv::BlockHash> hashes) const;
  void PrefetchAhead(std::span<const kv::BlockHash> hashes, size_t i) const;
  // The node holding `h`, or kNil.
  uint32_t Find(const kv::BlockHash& h) const;
  // Removes the bucket of node `node` (which must be in the table) by backward shift.
  void EraseBucket(uint32_t node);
  void InsertBucket(uint32_t tag, uint32_t node);
  void Grow();
  // Unlinks `node` from the LRU list / appends it as the most recently used.
  void Unlink(uint32_t node);
  void PushBack(uint32_t node);
  void Touch(uint32_t node);
  // Takes `node` out of the table and the LRU list and puts it on the free list.
  void Forget(uint32_t node);
  // A node for a new hash: a free one, a new one, or (when full) the least recently used one.
  uint32_t TakeNode();

  size_t max_blocks_;
  size_t size_ = 0;
  std::vector<Node, HugePageAllocator<Node>> nodes_;
  std::vector<uint64_t, HugePageAllocator<uint64_t>>
      buckets_;           // 0: empty; else tag << 32 | (node + 1)
  int table_bits_ = 0;    // buckets_.size() == 1 << table_bits_
  uint32_t head_ = kNil;  // least recently used
  uint32_t tail_ = kNil;  // most recently used
  uint32_t free_ = kNil;
};

}  // namespace tachyon::router
