// HostTier: a bounded, LRU host-memory BlockStore (kv/block_store.h), the first tier blocks
// evicted from the engine's pool go to (--kv-offload-memory BYTES).
//
// Each block is one contiguous copy of its chunks, in a buffer from the tier's BufferPool
// (kv/buffer_pool.h): the pages of blocks that left, dropped here or given back by the disk tier
// once written (ShareBuffers), so in the steady state an offered block costs one memcpy on the
// caller's thread and no page faults. The free buffers are part of the capacity: the blocks held
// take at most capacity - R bytes, the free buffers at most R = min(capacity / 16, 64 MiB).
// When a new block does not fit, the least
// recently used ones (stored or loaded longest ago) leave: moved to `next` (the disk tier) when
// there is one, else dropped; a block larger than the whole capacity is declined. Load keeps the
// block (the pool may evict it again later: Store of a held key only refreshes it). Flush moves
// every block to `next`, oldest first, in batches of 64 MiB with next->Flush() between them.
// LoadSecondsPerBlock: the mean of the loads measured so far (an exponential average); before
// the first load, a memcpy probe taken at construction times the block size last stored.
// Thread-safety: every method may be called from any thread (one mutex; `next` is called with
// it released).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kv/block_store.h"
#include "kv/buffer_pool.h"

namespace tachyon::kv {

class HostTier : public BlockStore {
 public:
  // REQUIRES: capacity_bytes > 0. `next` may be null.
  HostTier(int64_t capacity_bytes, std::shared_ptr<BlockStore> next);

  std::string_view name() const override { return "host"; }
  size_t Lookup(std::span<const BlockHash> keys) override;
  Status Load(const BlockHash& key, BlockChunks dst) override;
  void Store(const BlockHash& key, BlockChunks src) override;
  void StoreOwned(const BlockHash& key, std::vector<uint8_t> bytes) override;
  void Flush() override;
  double LoadSecondsPerBlock() const override;
  BlockStoreStats Stats() const override;

 private:
  struct Entry {
    BlockHash key;
    std::vector<uint8_t> bytes;
  };
  using List = std::list<Entry>;  // front: most recently used
  // Makes room for `bytes` more; returns the entries that left (to spill). REQUIRES: mu_ held.
  std::vector<Entry> MakeRoom(size_t bytes);
  void Spill(std::vector<Entry> out);
  void Insert(const BlockHash& key, std::vector<uint8_t> bytes);

  const int64_t capacity_;
  const int64_t free_max_;  // R: the free buffers' share of the capacity
  const std::shared_ptr<BlockStore> next_;
  const std::shared_ptr<BufferPool> buffers_;
  double probe_seconds_per_byte_ = 0;
  mutable std::mutex mu_;
  List lru_;                                                              // GUARDED_BY(mu_)
  std::unordered_map<BlockHash, List::iterator, BlockHashHasher> index_;  // GUARDED_BY(mu_)
  int64_t bytes_ = 0;                                                     // GUARDED_BY(mu_)
  size_t last_block_bytes_ = 0;                                           // GUARDED_BY(mu_)
  double load_ema_ = 0;                                                   // GUARDED_BY(mu_)
  BlockStoreStats stats_;                                                 // GUARDED_BY(mu_)
};

}  // namespace tachyon::kv
