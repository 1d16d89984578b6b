// KvCacheManager: per-request block tables over one BlockPool, with prefix caching.
//
// A request's table covers positions [0, n) in blocks of block_size tokens. Full blocks whose
// KV has been computed are registered in the prefix cache under their chained hash
// (block_hash.h) by CommitComputed(); a later request with the same tokens (and cache salt)
// takes them from FindCachedPrefix() and only computes the rest. A hit never covers the whole
// sequence: at least the last token is computed, so there are logits to sample from.
//
// In flight: a request that has been given blocks for tokens it has not computed yet announces
// them (MarkInFlight); a later FindCachedPrefix with the same leading tokens (and salt) reports
// how many tokens after its cached hit are being computed by someone else right now
// (PrefixHit::in_flight_tokens), so the caller can wait for them instead of computing them a
// second time. Announcements end when the blocks are committed or their request is freed.
//
// Layer groups (kv_groups.h): with KvCacheConfig::group_windows of G > 1 entries (or one
// sliding-window entry) every request holds one table per group, all drawing from the one pool.
// BlockTable() and PrefixHit::blocks are then group-major: G sections of equal length L (the
// blocks covering positions [0, L * block_size)), section g = group g's table. A sliding group's
// entries wholly outside its window are -1: CommitComputed() releases them once every query
// still to come has moved past them. A prefix hit of k blocks needs the full groups' blocks
// [0, k) and each sliding group's blocks of the last window before position k * block_size;
// sliding blocks are cached under their group's key (GroupBlockHash) like the others, so a hit
// never names a block whose group dropped its KV. With one full-attention group (the default)
// tables, hits and hashes are exactly the plain paged cache's.
//
// Running out of blocks is an expected result: Allocate() returns false and changes nothing;
// the scheduler then preempts someone. Requests are named by the caller's int64 ids.
// Thread-safety: none; owned by the engine thread.
#pragma once

#include <climits>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"
#include "kv/block_pool.h"
#include "kv/kv_groups.h"

namespace tachyon::kv {

struct KvCacheConfig {
  int num_blocks = 0;
  int block_size = 16;  // tokens per block
  bool enable_prefix_caching = true;
  // One entry per layer group: 0 full attention, > 0 a sliding window in positions
  // (kv_groups.h). Empty: one full-attention group.
  std::vector<int64_t> group_windows = {};
  // Not owned; gets the prefix cache's stored / removed block hashes (block_pool.h), on the
  // engine thread. Null: no events. With layer groups only group 0's (the chain hashes; a
  // full-attention group when the model has one, kv_groups.h), and external blocks' keys as
  // CommitExternal's flags say.
  KvEventSink* event_sink = nullptr;
};

// Blocks that already hold a computed prefix of a request's tokens: group-major, num_groups
// sections of num_tokens / block_size entries (-1: a sliding group's block outside the window).
// With layer groups, a block past the hit counts as in flight when any group's key of it is
// announced (a request announces group 0's keys; external loads announce each group's), and
// blocks whose group 0 page is cached do not end the in-flight run.
struct PrefixHit {
  std::vector<int32_t> blocks;
  int64_t num_tokens = 0;  // blocks.size() / num_groups * block_size
  // Tokens right after num_tokens (whole blocks) whose KV another request is computing now
  // (announced by MarkInFlight, not committed yet). Not part of `blocks`.
  int64_t in_flight_tokens = 0;
};

struct KvCacheStats {
  int num_blocks = 0;
  int used_blocks = 0;              // referenced by some request
  int free_blocks = 0;              // not referenced (includes cached_free)
  int cached_blocks = 0;            // hold a cached prefix (used or free)
  int64_t prefix_query_tokens = 0;  // tokens looked up in the prefix cache
  int64_t prefix_hit_tokens = 0;    // of which found cached
  double PrefixHitRate() const {
    return prefix_query_tokens ? double(prefix_hit_tokens) / double(prefix_query_tokens) : 0.0;
  }
  double Usage() const { return num_blocks ? double(used_blocks) / num_blocks : 0.0; }
};

// Blocks that fit in `budget_bytes` when one block takes `bytes_per_block` (from the model);
// 0 if either is not positive.
inline int NumBlocksForBudget(int64_t budget_bytes, int64_t bytes_per_block) {
  if (budget_bytes <= 0 || bytes_per_block <= 0) return 0;
  const int64_t n = budget_bytes / bytes_per_block;
  return n > INT32_MAX ? INT32_MAX : static_cast<int>(n);
}

class KvCacheManager {
 public:
  explicit KvCacheManager(const KvCacheConfig& config);

  int block_size() const { return config_.block_size; }
  int num_blocks() const { return pool_.num_blocks(); }
  bool prefix_caching() const { return config_.enable_prefix_caching; }
  int64_t BlocksFor(int64_t num_tokens) const {
    return (num_tokens + config_.block_size - 1) / config_.block_size;
  }
  int num_groups() const { return static_cast<int>(windows_.size()); }
  // Group g's window (0: full attention). REQUIRES: 0 <= g < num_groups().
  int64_t group_window(int g) const { return windows_[g]; }
  // The most blocks one request of num_tokens positions holds at once (over all groups) when a
  // step computes at most max_chunk tokens (PeakBlocksPerSequence).
  int64_t PeakBlocks(int64_t num_tokens, int64_t max_chunk) const {
    return PeakBlocksPerSequence(windows_, config_.block_size, num_tokens, max_chunk);
  }
  // The longest request the whole pool holds alone (MaxTokensInBlocks; INT64_MAX: unbounded).
  int64_t MaxTokens(int64_t max_chunk) const {
    return MaxTokensInBlocks(windows_, config_.block_size, num_blocks(), max_chunk);
  }

  // Longest cached prefix of `tokens` (full blocks, leaving at least the last token out), and
  // how many blocks after it are in flight (PrefixHit::in_flight_tokens).
  // Does not take references; pass the result to Allocate() before any other call.
  // Empty when prefix caching is off.
  PrefixHit FindCachedPrefix(std::span<const int32_t> tokens, std::string_view cache_salt) const;

  // The first full blocks of request `src`'s table covering at most `max_tokens` tokens, to be
  // shared by another request with the same leading tokens (n > 1 forks the prompt).
  // REQUIRES: src's KV for those tokens is computed.
  PrefixHit SharedPrefix(int64_t src, int64_t max_tokens) const;

  // Announces that request `id` is going to compute the KV of `tokens` (all it knows: its
  // prompt, or prompt + generated tokens when it resumes after a preemption): its full blocks
  // not committed yet become findable as in flight until CommitComputed commits them or the
  // request is freed. A block another request already announced stays that request's.
  // No-op when prefix caching is off. REQUIRES: HasRequest(id).
  void MarkInFlight(int64_t id, std::span<const int32_t> tokens, std::string_view cache_salt);

  // Whether any announced block is still in flight.
  bool HasInFlight() const { return !in_flight_.empty(); }

  // Same-step attachment: extends `hit`, a FindCachedPrefix(tokens, cache_salt) result, over the
  // in-flight blocks right after it that the requests announcing them complete in the step
  // being built: `covered(owner)` is how many leading positions of request `owner` have KV once
  // that step ran (0 when it is not in the step). The extended hit names those blocks from the
  // owners' tables (their KV is written during the step: the caller must run the attaching
  // request in that same step, with its owners, on an executor that stores every new token's KV
  // before any sequence of the step reads it, engine/model_executor.h), and in_flight_tokens
  // becomes the run of in-flight blocks after it (still to wait for). Blocks loaded by a store
  // (AllocateExternal) are never attached. Returns `hit` unchanged with layer groups, or when
  // nothing after it is in flight.
  PrefixHit AttachInFlight(PrefixHit hit, std::span<const int32_t> tokens,
                           std::string_view cache_salt,
                           const std::function<int64_t(int64_t owner)>& covered) const;

  // Counts a prefix lookup for the hit-rate metric.
  void RecordPrefixQuery(int64_t queried_tokens, int64_t hit_tokens);

  // Ensures request `id`'s table covers `num_tokens` positions. A request with no table yet
  // starts from `hit` (its blocks are referenced, not copied). Returns false and changes
  // nothing when the pool cannot supply the blocks.
  bool Allocate(int64_t id, int64_t num_tokens, const PrefixHit& hit = {});
  // Whether that Allocate() would succeed now (changes nothing).
  bool CanAllocate(int64_t id, int64_t num_tokens, const PrefixHit& hit = {}) const;

  // Marks the KV of positions [0, num_computed) as computed: registers the newly full blocks
  // in the prefix cache, then releases the sliding groups' blocks that no query at position
  // >= num_computed can read (also with prefix caching off). `tokens` are the request's tokens
  // (at least num_computed of them). REQUIRES: num_computed never decreases for a request.
  void CommitComputed(int64_t id, std::span<const int32_t> tokens, int64_t num_computed,
                      std::string_view cache_salt);

  // Shrinks request `id`'s table to the blocks covering positions [0, num_tokens), releasing
  // the rest (speculative decoding: blocks that held only rejected drafts). No-op if the table
  // is not longer, or the request has none.
  // REQUIRES: no released block was committed (num_tokens >= the committed positions).
  void FreeBlocksPast(int64_t id, int64_t num_tokens);

  // Releases the request's blocks (cached ones stay findable until evicted). No-op if none.
  void Free(int64_t id);

  // An extra reference on blocks in use (KV export reading them from another thread): a pinned
  // block is neither reused nor evicted until Unpin, even after its request freed it. They
  // count as used. REQUIRES: Pin: each block in use (ref > 0); Unpin: pinned before.
  void Pin(std::span<const int32_t> ids) { pool_.Ref(ids); }
  void Unpin(std::span<const int32_t> ids) { pool_.Unref(ids); }

  // External blocks (kv/block_store.h: KV loaded from an offload tier or received from another
  // replica). AllocateExternal takes keys.size() free blocks (ref 1, in no request's table) into
  // *ids, to be filled with the KV of the blocks cached under `keys` (pool keys: chain hashes,
  // group keys for groups > 0), and announces each key in flight, so FindCachedPrefix reports
  // it (PrefixHit::in_flight_tokens) and a request with that prefix waits instead of computing
  // it. Returns false and changes nothing when too few blocks are free. Their bytes may be
  // written from any thread until CommitExternal (they hold their keys' KV now: registered in
  // the prefix cache, then released as free cached blocks at the MRU end) or ReleaseExternal
  // (released uncached). Each allocated block gets exactly one of the two.
  // `keep`: blocks (the request's cached hit) the allocation must not take; they come out of it
  // as the most recently used free blocks.
  // REQUIRES: prefix caching on; no key cached or in flight already.
  bool AllocateExternal(std::span<const BlockHash> keys, std::vector<int32_t>* ids,
                        std::span<const int32_t> keep = {});
  // `published[i]` false: keys[i] is cached without an event (a layer group's key past group
  // 0's, as CommitComputed does); empty: every key is published.
  void CommitExternal(std::span<const int32_t> ids, std::span<const BlockHash> keys,
                      std::span<const uint8_t> published = {});
  void ReleaseExternal(std::span<const int32_t> ids, std::span<const BlockHash> keys);

  // Gets the blocks the pool is about to reuse (BlockPool::set_eviction_hook). Null: none.
  void set_eviction_hook(BlockEvictionHook* hook) { pool_.set_eviction_hook(hook); }

  bool HasRequest(int64_t id) const { return seqs_.count(id) > 0; }
  // The group-major table (see above; one group: the plain table). REQUIRES: HasRequest(id).
  const std::vector<int32_t>& BlockTable(int64_t id) const;

  // Free blocks available right now (including evictable cached blocks).
  int NumFreeBlocks() const { return pool_.num_free(); }
  KvCacheStats Stats() const;
  const BlockPool& pool() const { return pool_; }

 private:
  struct Seq {
    std::vector<int32_t> blocks;               // group 0's table
    std::vector<std::vector<int32_t>> groups;  // groups 1..G-1, each as long as `blocks`
    std::vector<BlockHash> hashes;  // of the full blocks hashed so far (may run past blocks)
    size_t num_committed = 0;       // leading blocks already offered to the cache
    size_t num_announced = 0;       // hashes[num_committed, num_announced) may be in in_flight_
    std::vector<int64_t> first_live;           // [G] per group: entries below are released
    mutable std::vector<int32_t> flat;         // group-major table when G > 1 (BlockTable)
    mutable bool flat_stale = true;
    std::vector<int32_t>& table(int g) { return g == 0 ? blocks : groups[g - 1]; }
    const std::vector<int32_t>& table(int g) const { return g == 0 ? blocks : groups[g - 1]; }
  };
  bool sliding() const { return has_sliding_; }
  // Of the first k blocks of a table, the first one group g's queries at k * block_size read.
  int64_t LiveFrom(int g, int64_t k) const {
    return FirstLiveBlock(windows_[g], k * config_.block_size, config_.block_size);
  }
  void ReleaseOutsideWindow(Seq* s, int64_t next_pos);
  // Removes id's in-flight announcements of blocks >= from (and lowers num_announced).
  void DropInFlight(int64_t id, Seq* s, size_t from);

  KvCacheConfig config_;
  std::vector<int64_t> windows_;  // [G] group windows (config's, or {0})
  bool has_sliding_ = false;
  BlockPool pool_;
  std::unordered_map<int64_t, Seq> seqs_;
  static constexpr int64_t kExternalOwner = INT64_MIN;  // in_flight_ owner of external blocks
  std::unordered_map<BlockHash, int64_t, BlockHashHasher> in_flight_;  // hash -> computing seq
  int64_t prefix_query_tokens_ = 0;
  int64_t prefix_hit_tokens_ = 0;
};

}  // namespace tachyon::kv
