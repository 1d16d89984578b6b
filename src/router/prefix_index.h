// PrefixIndex: which replica holds which KV block, keyed by the engine's own block hash chain
// (kv/block_hash.h: 16-token blocks, chained from RootHash(cache_salt)), so a block named by
// the router's own routing history and one named by a replica's KV event are the same key.
//
// Today it is fed by what the router routed where (an approximation of each replica's prefix
// cache: Insert after placing a request); the replica-side stored/evicted events plug into
// Insert/Remove with the same hashes. Because a block's hash names its whole prefix, a
// replica's match for a prompt is the number of leading blocks it holds.
//
// Bounded: at most `max_blocks` distinct hashes; beyond that the least recently inserted or
// matched hash is forgotten for every replica. Replicas are ids in [0, kMaxReplicas).
// Thread-safety: none; the caller serialises (ReplicaPool holds it under its mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"

namespace tachyon::router {

inline constexpr int kMaxReplicas = 64;

class PrefixIndex {
 public:
  explicit PrefixIndex(size_t max_blocks);

  // Records that `replica` holds each of `hashes` (a prompt's chain, first block first).
  // REQUIRES: 0 <= replica < kMaxReplicas.
  void Insert(int replica, std::span<const kv::BlockHash> hashes);
  // `replica` no longer holds `hash` (an eviction).
  void Remove(int replica, const kv::BlockHash& hash);
  // Forgets everything `replica` holds (it restarted or left).
  void RemoveReplica(int replica);

  // For each replica id in [0, num_replicas): how many leading blocks of `hashes` it holds.
  // Marks the matched hashes as recently used.
  std::vector<int> MatchLeadingBlocks(std::span<const kv::BlockHash> hashes, int num_replicas);

  size_t size() const { return entries_.size(); }
  size_t max_blocks() const { return max_blocks_; }

 private:
  struct Entry {
    uint64_t holders = 0;  // bit r: replica r holds the block
    std::list<kv::BlockHash>::iterator lru;
  };
  void Touch(Entry& e);
  void Erase(std::unordered_map<kv::BlockHash, Entry, kv::BlockHashHasher>::iterator it);

  size_t max_blocks_;
  std::unordered_map<kv::BlockHash, Entry, kv::BlockHashHasher> entries_;
  std::list<kv::BlockHash> lru_;  // front: least recently used
};

}  // namespace tachyon::router
