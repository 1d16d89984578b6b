// Prefix-cache events: which block hashes (block_hash.h) a replica's cache holds, as a stream.
//
// KvEventSink is the hook BlockPool calls on the engine thread: BlockStored when a computed
// block is registered under its hash, BlockRemoved when that hash leaves the cache (the block
// is reused for other tokens, or EvictAllFree). Implementations must be cheap and never wait
// on a consumer.
//
// KvEventLog is the sink `tachyon serve` installs: it keeps the set of hashes cached now (for a
// snapshot) and the last `capacity` events, numbered 1, 2, ... in the order they happened, for
// subscribers that poll (server/kv_events.h). A subscriber that falls more than `capacity`
// events behind gets nothing from ReadAfter and starts again from a snapshot, so the engine
// thread never waits for a slow reader and memory stays bounded (the set holds at most the
// pool's block count). The engine thread holds the log's mutex only to record one event; a
// reader holds it while copying (a snapshot copies the set: O(cached blocks)).
//
// Thread-safety: KvEventLog's methods may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "kv/block_hash.h"

namespace tachyon::kv {

class KvEventSink {
 public:
  virtual ~KvEventSink() = default;
  virtual void BlockStored(const BlockHash& hash) = 0;
  virtual void BlockRemoved(const BlockHash& hash) = 0;
};

struct KvEvent {
  enum class Kind : uint8_t { kStored, kRemoved };
  uint64_t seq = 0;     // 1, 2, ... without gaps
  int64_t time_us = 0;  // wall clock (microseconds since the Unix epoch) when it happened
  Kind kind = Kind::kStored;
  BlockHash hash;
};

// The wire form of a hash: 32 lower-case hex digits, `hi` then `lo`.
std::string BlockHashHex(const BlockHash& hash);
// Errors: nullopt unless `hex` is exactly 32 hex digits.
std::optional<BlockHash> ParseBlockHashHex(std::string_view hex);

class KvEventLog : public KvEventSink {
 public:
  // REQUIRES: capacity >= 1.
  explicit KvEventLog(size_t capacity = 65536);

  void BlockStored(const BlockHash& hash) override;
  void BlockRemoved(const BlockHash& hash) override;

  struct Snapshot {
    uint64_t seq = 0;               // the last event it reflects (0: none yet)
    std::vector<BlockHash> blocks;  // every hash cached after that event, in no order
  };
  Snapshot TakeSnapshot() const;

  // The events after `after_seq`, oldest first, at most `max_events`; empty when there are
  // none. nullopt when some of them are no longer kept (the reader must take a snapshot).
  std::optional<std::vector<KvEvent>> ReadAfter(uint64_t after_seq, size_t max_events) const;

  uint64_t last_seq() const;
  size_t cached_blocks() const;

 private:
  void Record(KvEvent::Kind kind, const BlockHash& hash);

  const size_t capacity_;
  mutable std::mutex mu_;
  std::unordered_set<BlockHash, BlockHashHasher> cached_;  // GUARDED_BY(mu_)
  std::deque<KvEvent> events_;                             // GUARDED_BY(mu_): seqs consecutive
  uint64_t seq_ = 0;                                       // GUARDED_BY(mu_)
};

}  // namespace tachyon::kv
