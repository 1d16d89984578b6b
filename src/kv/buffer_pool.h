// BufferPool: a bounded free list of byte buffers, so the KV offload tiers reuse the pages of
// blocks they let go (the disk tier after writing a block, the host tier dropping one) for the
// next block the pool evicts, instead of faulting in fresh zeroed pages on the engine thread
// for every block.
//
// Buffers are std::vector<uint8_t> (BlockStore::StoreOwned's type); what counts is their
// capacity. A buffer from Take has stale bytes; fill it with CopyChunksInto (no zero-fill).
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "kv/block_store.h"

namespace tachyon::kv {

class BufferPool {
 public:
  // Holds at most max_bytes of capacity. max_bytes 0: keeps nothing (every Take is new).
  explicit BufferPool(int64_t max_bytes) : max_bytes_(max_bytes) {}
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A free buffer (the one given back last), or an empty one when none is free.
  std::vector<uint8_t> Take();
  // Keeps `b` for a later Take when its capacity fits the bound, else frees it.
  void Give(std::vector<uint8_t> b);
  // The capacity held now.
  int64_t bytes() const;

 private:
  const int64_t max_bytes_;
  mutable std::mutex mu_;
  std::vector<std::vector<uint8_t>> free_;  // GUARDED_BY(mu_)
  int64_t bytes_ = 0;                       // GUARDED_BY(mu_)
};

}  // namespace tachyon::kv
