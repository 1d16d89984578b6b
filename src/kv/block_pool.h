// BlockPool: the KV block ids of one model, their reference counts and the prefix cache index.
//
// Every block is either in use (ref_count > 0) or free (ref_count == 0). Free blocks sit in
// one LRU list that doubles as the eviction list: a free block may still hold the KV of a
// cached prefix (it has a hash and can be found by Lookup) until Allocate takes it from the
// LRU end and evicts its hash. So "free" counts evictable cached blocks too.
//
// With an event sink (kv_events.h), every hash that Cache registers as published reaches
// BlockStored, and BlockRemoved when it is dropped (Allocate reusing a cached block,
// EvictAllFree); hashes cached unpublished (the keys of a hybrid cache's layer groups past the
// first, which no router looks up) reach neither.
//
// With an eviction hook, Allocate calls OnEvict(id, hash) for each cached block it is about to
// reuse, while the block still holds that hash's KV (the offload tiers copy it out there).
// EvictAllFree (the KV is stale) does not call it.
//
// Thread-safety: none; owned by the engine thread (through KvCacheManager).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"
#include "kv/kv_events.h"

namespace tachyon::kv {

class BlockEvictionHook {
 public:
  virtual ~BlockEvictionHook() = default;
  // Block `id`, cached under `hash`, is about to be reused; its bytes are intact until the
  // caller of Allocate writes it. Engine thread; must not call back into the pool.
  virtual void OnEvict(int32_t id, const BlockHash& hash) = 0;
};

class BlockPool {
 public:
  explicit BlockPool(int num_blocks);
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  int num_free() const { return num_free_; }  // ref_count == 0, cached or not
  int num_used() const { return num_blocks() - num_free_; }
  int num_cached() const { return static_cast<int>(cached_.size()); }  // have a hash
  int ref_count(int32_t id) const { return blocks_[id].ref; }
  // How many times Allocate handed block `id` out. A block's KV is written only while it is
  // allocated, into positions not yet full, so a full block's bytes stay as they are while this
  // count does (KV export keeps checksums of full blocks under it).
  uint32_t allocations(int32_t id) const { return blocks_[id].allocations; }

  // Receives the cache's stored / removed hashes from now on; null: none. Not owned; must
  // outlive the pool.
  void set_event_sink(KvEventSink* sink) { sink_ = sink; }
  // Null: none. Not owned; must outlive the pool (or be reset first).
  void set_eviction_hook(BlockEvictionHook* hook) { evict_hook_ = hook; }

  // Calls f(id, hash) for every cached block, used or free, in no order.
  template <typename F>
  void ForEachCached(F&& f) const {
    for (const auto& [hash, id] : cached_) f(id, hash);
  }

  // Takes n free blocks (ref_count becomes 1) from the LRU end, evicting their hashes.
  // Returns false and changes nothing when fewer than n blocks are free.
  bool Allocate(int n, std::vector<int32_t>* out);

  // Adds one reference to each block; a free block leaves the free list (a cache hit).
  void Ref(std::span<const int32_t> ids);

  // Drops one reference from each block, in order; a block reaching 0 joins the MRU end of the
  // free list, so of the blocks in `ids` the first is evicted first.
  // REQUIRES: each ref_count > 0.
  void Unref(std::span<const int32_t> ids);

  // The block holding the prefix with this hash, if cached.
  std::optional<int32_t> Lookup(const BlockHash& hash) const;

  // Registers computed block `id` under `hash` (reported to the event sink when `publish`).
  // Returns false (and leaves `id` uncached) when another block already holds that hash or `id`
  // already has one.
  bool Cache(int32_t id, const BlockHash& hash, bool publish = true);

  // Evicts every free cached block's hash (e.g. after weights change). Used blocks keep theirs.
  void EvictAllFree();

 private:
  struct Block {
    int ref = 0;
    uint32_t allocations = 0;
    bool has_hash = false;
    bool published = false;  // its hash reached the event sink
    BlockHash hash;
    int32_t prev = -1;  // free-list links; valid while ref == 0
    int32_t next = -1;
  };
  void PushFreeBack(int32_t id);
  void RemoveFree(int32_t id);
  void DropHash(int32_t id);

  std::vector<Block> blocks_;
  int32_t free_head_ = -1;  // LRU end: evicted first
  int32_t free_tail_ = -1;  // MRU end
  int num_free_ = 0;
  KvEventSink* sink_ = nullptr;
  BlockEvictionHook* evict_hook_ = nullptr;
  std::unordered_map<BlockHash, int32_t, BlockHashHasher> cached_;
};

}  // namespace tachyon::kv
