// DiskTier: a bounded BlockStore (kv/block_store.h) of one file per block in a directory
// (--kv-offload-dir DIR, --kv-offload-disk BYTES), which survives a restart.
//
// File format (docs/kv_tiers.md), little-endian: a 64-byte header
//   magic "TKVB" | u32 version (1) | u64[2] model identity (lo, hi) | u64[2] key (lo, hi) |
//   u64 payload bytes | u64 XXH3-64 of the payload | u64 XXH3-64 of the 56 bytes before it
// then the payload: the block's chunks back to back. The file is named
// "<identity hi, 16 hex>-<key, 32 hex (BlockHashHex)>.kvb" and written as a temporary file
// renamed into place, so a crash never leaves a half-written block under a block's name.
// The identity names the model and KV format (ModelKvIdentity: weights, KV dtype, block size,
// layout); Open() rebuilds the index by reading every *.kvb header in the directory: files of
// this identity are indexed (oldest modification first in the LRU), files of another identity
// are ignored and left alone, files with a bad or truncated header and leftover temporary
// files are removed. Load checks the header and the payload's checksum again: a mismatch
// removes the file and fails with DataLoss (the engine then recomputes).
// Writes happen on the tier's own thread ("kv-disk-write", at idle priority: SCHED_IDLE, so
// they take only the CPU time the engine leaves) and on the thread of a Flush, which writes
// queued blocks itself until none is left: Store / StoreOwned queue a copy (bounded: a block
// that does not fit the queue's budget, at most min(capacity, 256 MiB), is declined and
// counted, so a writer that falls behind a busy engine costs it nothing) and return; a queued
// block is already found by Lookup and loaded from memory. A written (or declined) block's
// buffer goes back to the BufferPool (kv/buffer_pool.h) that Store copies into: the host tier's
// when it spills here (ShareBuffers), else the tier's own (at most 64 MiB). When the
// directory's blocks exceed the capacity the least recently used files are deleted.
// LoadSecondsPerBlock: an exponential average of measured loads; before the first, a probe at
// Open (write, then read back, a 1 MiB file) times the block size last stored.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kv/block_store.h"
#include "kv/buffer_pool.h"

namespace tachyon::kv {

class DiskTier : public BlockStore {
 public:
  static constexpr uint32_t kVersion = 1;
  static constexpr int64_t kDefaultCapacityBytes = int64_t{8} << 30;  // --kv-offload-disk default

  // Creates `dir` if missing and indexes it. REQUIRES: capacity_bytes > 0. Errors:
  // InvalidArgument / Unavailable (the directory cannot be created, read or written).
  static Result<std::unique_ptr<DiskTier>> Open(const std::filesystem::path& dir,
                                                int64_t capacity_bytes, const BlockHash& identity);
  ~DiskTier() override;  // finishes queued writes, joins the writer

  std::string_view name() const override { return "disk"; }
  size_t Lookup(std::span<const BlockHash> keys) override;
  Status Load(const BlockHash& key, BlockChunks dst) override;
  void Store(const BlockHash& key, BlockChunks src) override;
  void StoreOwned(const BlockHash& key, std::vector<uint8_t> bytes) override;
  void ShareBuffers(std::shared_ptr<BufferPool> pool) override;
  void Flush() override;  // waits until every queued block is written
  double LoadSecondsPerBlock() const override;
  BlockStoreStats Stats() const override;

  // Blocks found valid by Open's scan; files ignored (another identity) and removed (bad).
  int64_t scanned_blocks() const { return scanned_; }
  int64_t ignored_files() const { return ignored_; }
  int64_t removed_files() const { return removed_; }

 private:
  DiskTier(std::filesystem::path dir, int64_t capacity, const BlockHash& identity);
  Status Scan();
  void Probe();
  void WriterLoop();
  // Writes the oldest queued block nobody writes yet (unlocked meanwhile); false if none.
  // REQUIRES: lock holds mu_.
  bool WriteOne(std::unique_lock<std::mutex>& lock);
  std::filesystem::path PathOf(const BlockHash& key) const;
  // Drops `key` from the index (and its file). REQUIRES: mu_ held.
  void ForgetLocked(const BlockHash& key, bool remove_file);
  void Touch(const BlockHash& key);  // REQUIRES: mu_ held

  struct Meta {
    int64_t bytes = 0;  // file size
    std::list<BlockHash>::iterator lru;
  };
  struct Pending {
    BlockHash key;
    std::vector<uint8_t> bytes;
    bool claimed = false;  // being written (by the writer thread or a Flush)
  };

  const std::filesystem::path dir_;
  const int64_t capacity_;
  const BlockHash identity_;
  const int64_t queue_budget_;
  double probe_seconds_per_byte_ = 0;
  int64_t scanned_ = 0, ignored_ = 0, removed_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;  // the writer waits for work, Flush for an empty queue
  std::list<BlockHash> lru_;    // GUARDED_BY(mu_) front: most recently used (on disk)
  std::unordered_map<BlockHash, Meta, BlockHashHasher> index_;  // GUARDED_BY(mu_)
  std::list<Pending> queue_;  // GUARDED_BY(mu_) not yet written, oldest first
  int64_t unclaimed_ = 0;     // GUARDED_BY(mu_) entries of queue_ nobody writes yet
  std::unordered_map<BlockHash, const std::vector<uint8_t>*, BlockHashHasher>
      queued_;                           // GUARDED_BY(mu_) key -> its bytes in queue_
  int64_t queued_bytes_ = 0;             // GUARDED_BY(mu_)
  bool writing_ = false;                 // GUARDED_BY(mu_) the writer holds a popped block
  int64_t bytes_ = 0;                    // GUARDED_BY(mu_) indexed files
  size_t last_block_bytes_ = 0;          // GUARDED_BY(mu_)
  double load_ema_ = 0;                  // GUARDED_BY(mu_)
  bool stop_ = false;                    // GUARDED_BY(mu_)
  std::shared_ptr<BufferPool> buffers_;  // GUARDED_BY(mu_) written blocks' buffers go back here
  BlockStoreStats stats_;                // GUARDED_BY(mu_)
  std::thread writer_;
};

// The disk tier's identity of a model's KV: XXH3-128 over the model's files (a file's bytes;
// a folder's regular files, by name, with their bytes) and `kv_format` (e.g. KV dtype, block
// size and layout as text). Errors: Unavailable when a file cannot be read.
Result<BlockHash> ModelKvIdentity(const std::filesystem::path& model_path,
                                  std::string_view kv_format);

}  // namespace tachyon::kv
