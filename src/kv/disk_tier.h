// DiskTier: a bounded BlockStore (kv/block_store.h) in a directory (--kv-offload-dir DIR,
// --kv-offload-disk BYTES) that survives a restart: blocks are appended as records to a ring of
// segment files, reused in place oldest first.
//
// Format (docs/kv_tiers.md), little-endian. A segment "<identity hi, 16 hex>-<n, 8 hex>.kvs" is
// records back to back, each a 72-byte header
//   magic "TKVB" | u32 version (2) | u64[2] model identity (lo, hi) | u64[2] key (lo, hi) |
//   u64 sequence | u64 payload bytes | u64 XXH3-64 of the payload | u64 XXH3-64 of the 64 bytes
//   before it
// then the payload (the block's chunks back to back); 72 zero bytes follow the last record of a
// segment (the end mark, overwritten by the next record). Sequences rise with every record
// written, across segments and restarts.
// Writes: a record goes to the active segment while it stays within segment_bytes() (a segment
// holds at least one record); then the next segment is a new file while the files fit the
// capacity, else the oldest segment, whose blocks are dropped (evictions) and which is
// overwritten from its start. A block offered again while held in the older half of the tier is
// written again, so a block in use outlives its segment. There is no fsync: a crash may lose
// or tear recent records, which the checksums catch.
// Open() rebuilds the index by reading the record headers of every segment of this identity
// (its name and its records' identity), up to the end mark: a bad or truncated record ends the
// segment's scan (logged; the rest of that segment is never used); a segment of another identity
// is ignored and left alone; a segment of this identity with no valid first record, leftover
// temporary files and the block files of format 1 ("*.kvb" of this identity) are removed; the
// oldest segments beyond the capacity are removed. Load checks the record's header and the
// payload's checksum again: a mismatch drops the block (DataLoss; the engine recomputes).
// Writes happen on the tier's own thread ("kv-disk-write", at idle priority: SCHED_IDLE, so
// they take only the CPU time the engine leaves) and on the thread of a Flush, which writes
// queued blocks itself until none is left (one record at a time: writes are serialized):
// Store / StoreOwned queue a copy (bounded: a block that does not fit the queue's budget, at
// most min(capacity, 256 MiB), is declined and counted, so a writer that falls behind a busy
// engine costs it nothing) and return; a queued block is already found by Lookup and loaded
// from memory. A written (or declined) block's buffer goes back to the BufferPool
// (kv/buffer_pool.h) that Store copies into: the host tier's when it spills here (ShareBuffers),
// else the tier's own (at most 64 MiB).
// LoadSecondsPerBlock: an exponential average of measured loads; before the first, a probe at
// Open (write, then read back, a 1 MiB file) times the block size last stored.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
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
  static constexpr uint32_t kVersion = 2;
  static constexpr int64_t kDefaultCapacityBytes = int64_t{8} << 30;  // --kv-offload-disk default
  static constexpr size_t kRecordHeaderBytes = 72;

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
  // bytes: the segment files' sizes plus the queued blocks.
  BlockStoreStats Stats() const override;

  // Blocks found valid by Open's scan; files ignored (another identity) and removed (bad, old
  // format, over the capacity).
  int64_t scanned_blocks() const { return scanned_; }
  int64_t ignored_files() const { return ignored_; }
  int64_t removed_files() const { return removed_; }
  // A segment's target size: min(capacity / 16, 256 MiB).
  int64_t segment_bytes() const { return segment_bytes_; }
  // Segment files in use now.
  size_t segments() const;

 private:
  struct Segment;
  struct Meta {
    std::shared_ptr<Segment> seg;
    int64_t offset = 0;  // of the record's header
    uint64_t seq = 0;
    uint64_t payload_bytes = 0;
  };
  struct Pending {
    BlockHash key;
    std::vector<uint8_t> bytes;
    bool claimed = false;  // being written (by the writer thread or a Flush)
  };

  DiskTier(std::filesystem::path dir, int64_t capacity, const BlockHash& identity);
  Status Scan();
  enum class SegmentScan { kOurs, kOtherIdentity, kBad };
  // Reads the records of one segment of this model's name, up to its end mark, into `records`
  // (seg unset) and `keys`, and sets its end, size and sequences: kOurs when it has one valid
  // record or more (a bad or truncated record after them is logged and ends the scan),
  // kOtherIdentity when its first record is another model's, kBad when it has no valid record.
  SegmentScan ScanSegment(Segment& seg, std::vector<Meta>* records, std::vector<BlockHash>* keys);
  void Probe();
  void WriterLoop();
  // Writes the oldest queued block nobody writes yet (unlocked meanwhile); false if none.
  // REQUIRES: lock holds mu_.
  bool WriteOne(std::unique_lock<std::mutex>& lock);
  // Writes one record; true when it is on its segment (and indexed). REQUIRES: write_mu_ held,
  // mu_ not held.
  bool Append(const BlockHash& key, const std::vector<uint8_t>& bytes);
  // The segment the next record of `record` bytes goes to (the back of segments_ on return):
  // the active one while the record fits its target size, else a new file while the files fit
  // the capacity, else the oldest, reclaimed. Null when no file can be created.
  // REQUIRES: mu_ held.
  std::shared_ptr<Segment> SegmentFor(int64_t record);
  // Drops a segment's blocks from the index and invalidates loads reading it. REQUIRES: mu_ held.
  void Reclaim(Segment& seg);
  std::filesystem::path SegmentPath(uint32_t number) const;
  // Whether an offered `key` should be written (not held, or held in the older half and not
  // queued). REQUIRES: mu_ held.
  bool WantsLocked(const BlockHash& key) const;

  const std::filesystem::path dir_;
  const int64_t capacity_;
  const BlockHash identity_;
  const int64_t queue_budget_;
  const int64_t segment_bytes_;
  double probe_seconds_per_byte_ = 0;
  int64_t scanned_ = 0, ignored_ = 0, removed_ = 0;

  std::mutex write_mu_;  // one record written at a time (the writer thread, Flush callers)
  mutable std::mutex mu_;
  std::condition_variable cv_;  // the writer waits for work, Flush for an empty queue
  std::deque<std::shared_ptr<Segment>> segments_;  // GUARDED_BY(mu_) oldest first; back: active
  std::unordered_map<BlockHash, Meta, BlockHashHasher> index_;  // GUARDED_BY(mu_)
  std::list<Pending> queue_;  // GUARDED_BY(mu_) not yet written, oldest first
  int64_t unclaimed_ = 0;     // GUARDED_BY(mu_) entries of queue_ nobody writes yet
  std::unordered_map<BlockHash, const std::vector<uint8_t>*, BlockHashHasher>
      queued_;                           // GUARDED_BY(mu_) key -> its bytes in queue_
  int64_t queued_bytes_ = 0;             // GUARDED_BY(mu_)
  int64_t file_bytes_ = 0;               // GUARDED_BY(mu_) the segment files' sizes
  uint64_t next_seq_ = 1;                // GUARDED_BY(mu_)
  uint32_t next_number_ = 0;             // GUARDED_BY(mu_) a new segment file's number
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
