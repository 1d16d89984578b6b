// External KV blocks: block bytes that live outside the engine's pool (a host-memory tier, a
// disk tier, blocks received from another replica), found again by the prefix cache's keys.
//
// Keys. A store holds one pool block (page) under the key the prefix cache files it under:
// the chained hash of its whole prefix (block_hash.h: the chain starts at RootHash(cache_salt),
// so a salt is part of every key) and, with layer groups, GroupBlockHash(chain, group)
// (kv_groups.h; group 0's key is the chain hash itself). A store therefore never serves a block
// to another prefix, salt or group. A store never interprets the bytes.
//
// Bytes. A block is BlockBytes::num_chunks() chunks of chunk_bytes() each, in the KV cache's own
// dtype and layout (model::KvCache::BlockChunk: chunk 2*slot is array `slot`'s K rows of the
// block, 2*slot+1 its V rows). Loading a block's chunks into a pool block of an engine with the
// same model, KV dtype, block size and layout restores it bit for bit. BlockChunks spans point
// into the pool and are valid only during the call; Store copies what it keeps before it returns.
//
// How the engine uses its stores (engine/kv_offload.h, EngineConfig::kv_stores, fastest first):
//  - admission: when a waiting request's prefix-cache hit ends at block k, the engine asks the
//    stores (Lookup) for blocks k, k+1, ...; for each run a store holds it takes free pool
//    blocks, announces them in flight (a request with that prefix waits for them instead of
//    computing them), calls Load into them on its loader thread and, on the engine thread
//    again, registers them in the prefix cache; the request then starts from the longer hit. A
//    block whose Load fails is released uncached, and it and the blocks after it are computed.
//    A run is loaded only when the cost rule says loading is cheaper (LoadSecondsPerBlock
//    against the engine's measured prefill time per token).
//  - eviction: when the pool is about to reuse a cached block, the engine offers it (Store) to
//    the first store that takes offers (accepts_evictions()).
// Thread-safety: every method of a BlockStore may be called from any thread (the engine thread
// looks up and stores, its loader thread loads); implementations lock internally and may do
// their I/O on their own threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "kv/block_hash.h"
#include "util/status.h"

namespace tachyon::kv {

// One pool block's bytes, chunk by chunk (BlockBytes::Chunk(block, c) for c in order).
using BlockChunks = std::span<const std::span<uint8_t>>;
// Their total size, and their bytes back to back (what a store keeps of an offered block).
size_t TotalBytes(BlockChunks chunks);
std::vector<uint8_t> ConcatChunks(BlockChunks chunks);
// Makes *dst hold the chunks back to back, reusing its capacity (one pass, no zero-fill).
void CopyChunksInto(BlockChunks chunks, std::vector<uint8_t>* dst);

class BufferPool;  // kv/buffer_pool.h

// The pool's KV storage as raw blocks: implemented by the model executor that owns the KV
// (model::KvCache; the engine's fake executor in tests). Chunk() of different blocks may be
// read / written from any thread while the model runs on other blocks.
class BlockBytes {
 public:
  virtual ~BlockBytes() = default;
  virtual int64_t num_chunks() const = 0;
  virtual size_t chunk_bytes() const = 0;
  size_t block_bytes() const { return static_cast<size_t>(num_chunks()) * chunk_bytes(); }
  // Layers of one block: layer l's chunks are [l * k, (l + 1) * k) with k = num_chunks() /
  // num_layers() (a model's KV: its K and V chunks, k = 2).
  virtual int64_t num_layers() const { return num_chunks() / 2; }
  // With layer groups (kv/kv_groups.h) a block is one group's page: num_layers() is a page's
  // layers, and model layer L (the numbering of ModelExecutor's layer hook) lies in group
  // PlaceOf(L).group at slot PlaceOf(L).slot. Default: one group of every layer.
  struct LayerPlace {
    int group = 0;
    int64_t slot = 0;
  };
  virtual int64_t num_model_layers() const { return num_layers(); }
  virtual LayerPlace PlaceOf(int64_t model_layer) const { return {0, model_layer}; }
  // REQUIRES: block in [0, pool blocks), chunk in [0, num_chunks()).
  virtual std::span<uint8_t> Chunk(int32_t block, int64_t chunk) = 0;
  // The chunk spans of one block, in order.
  std::vector<std::span<uint8_t>> Chunks(int32_t block);
};

// What a store says about itself (metrics: tachyon_kv_tier_* on serve).
struct BlockStoreStats {
  int64_t blocks = 0;          // held now
  int64_t bytes = 0;           // held now
  int64_t capacity_bytes = 0;  // its bound
  int64_t hits = 0;            // blocks loaded from it
  int64_t misses = 0;          // Lookups that stopped at a key it did not hold
  int64_t stores = 0;          // blocks it accepted
  int64_t evictions = 0;       // blocks it dropped (or spilled to the next tier) for room
  int64_t declined = 0;        // offered blocks it did not take (too large; writes too far behind)
  int64_t load_failures = 0;   // Load errors (checksum, I/O, gone)
  double load_seconds = 0;     // total time in Load
};

class BlockStore {
 public:
  virtual ~BlockStore() = default;

  // "host", "disk", ... (metrics label).
  virtual std::string_view name() const = 0;

  // How many leading keys of `keys` this store holds now (0 .. keys.size()); it stops at the
  // first key it lacks. Holding now does not promise a later Load succeeds.
  virtual size_t Lookup(std::span<const BlockHash> keys) = 0;

  // Copies the block stored under `key` into `dst` (its chunks, in order). Errors: NotFound
  // (not held, e.g. evicted since Lookup), InvalidArgument (dst is not the stored block's
  // shape), DataLoss (checksum or short read). After an error `dst` holds unspecified bytes.
  virtual Status Load(const BlockHash& key, BlockChunks dst) = 0;

  // Whether the engine offers it the blocks its pool evicts.
  virtual bool accepts_evictions() const { return true; }

  // Offers a copy of the block under `key` (an eviction from the pool, or a spill from a faster
  // tier). The store keeps a copy or declines (full of more recent blocks, or already holds
  // it); either way nothing of `src` is referenced after the call.
  virtual void Store(const BlockHash& key, BlockChunks src) = 0;
  // The same with the bytes moved in (num_chunks * chunk_bytes, chunks back to back).
  virtual void StoreOwned(const BlockHash& key, std::vector<uint8_t> bytes);

  // Where to give the buffers StoreOwned moved in back once they are no longer needed (the
  // disk tier: once written, or declined), and where Store takes the buffers for its copies
  // (the host tier shares its pool with the disk tier it spills to). Default: ignored.
  virtual void ShareBuffers(std::shared_ptr<BufferPool> pool) { (void)pool; }

  // Pushes what it holds to where it persists (the host tier spills to the disk tier; the disk
  // tier finishes its queued writes). Called at shutdown; blocks the caller.
  virtual void Flush() {}

  // Estimated seconds to Load one block now (measured on this machine; the cost rule).
  virtual double LoadSecondsPerBlock() const = 0;

  virtual BlockStoreStats Stats() const = 0;
};

}  // namespace tachyon::kv
