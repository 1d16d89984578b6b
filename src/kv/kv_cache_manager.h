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
// Running out of blocks is an expected result: Allocate() returns false and changes nothing;
// the scheduler then preempts someone. Requests are named by the caller's int64 ids.
// Thread-safety: none; owned by the engine thread.
#pragma once

#include <climits>
#include <cstdint>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"
#include "kv/block_pool.h"

namespace tachyon::kv {

struct KvCacheConfig {
  int num_blocks = 0;
  int block_size = 16;  // tokens per block
  bool enable_prefix_caching = true;
};

// Blocks that already hold a computed prefix of a request's tokens.
struct PrefixHit {
  std::vector<int32_t> blocks;
  int64_t num_tokens = 0;  // blocks.size() * block_size
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

  // Counts a prefix lookup for the hit-rate metric.
  void RecordPrefixQuery(int64_t queried_tokens, int64_t hit_tokens);

  // Ensures request `id`'s table covers `num_tokens` positions. A request with no table yet
  // starts from `hit` (its blocks are referenced, not copied). Returns false and changes
  // nothing when the pool cannot supply the blocks.
  bool Allocate(int64_t id, int64_t num_tokens, const PrefixHit& hit = {});
  // Whether that Allocate() would succeed now (changes nothing).
  bool CanAllocate(int64_t id, int64_t num_tokens, const PrefixHit& hit = {}) const;

  // Marks the KV of positions [0, num_computed) as computed: registers the newly full blocks
  // in the prefix cache. `tokens` are the request's tokens (at least num_computed of them).
  void CommitComputed(int64_t id, std::span<const int32_t> tokens, int64_t num_computed,
                      std::string_view cache_salt);

  // Shrinks request `id`'s table to the blocks covering positions [0, num_tokens), releasing
  // the rest (speculative decoding: blocks that held only rejected drafts). No-op if the table
  // is not longer, or the request has none.
  // REQUIRES: no released block was committed (num_tokens >= the committed positions).
  void FreeBlocksPast(int64_t id, int64_t num_tokens);

  // Releases the request's blocks (cached ones stay findable until evicted). No-op if none.
  void Free(int64_t id);

  bool HasRequest(int64_t id) const { return seqs_.count(id) > 0; }
  // REQUIRES: HasRequest(id).
  const std::vector<int32_t>& BlockTable(int64_t id) const;

  // Free blocks available right now (including evictable cached blocks).
  int NumFreeBlocks() const { return pool_.num_free(); }
  KvCacheStats Stats() const;
  const BlockPool& pool() const { return pool_; }

 private:
  struct Seq {
    std::vector<int32_t> blocks;
    std::vector<BlockHash> hashes;  // of the full blocks hashed so far (may run past blocks)
    size_t num_committed = 0;       // leading blocks already offered to the cache
    size_t num_announced = 0;       // hashes[num_committed, num_announced) may be in in_flight_
  };
  // Removes id's in-flight announcements of blocks >= from (and lowers num_announced).
  void DropInFlight(int64_t id, Seq* s, size_t from);

  KvCacheConfig config_;
  BlockPool pool_;
  std::unordered_map<int64_t, Seq> seqs_;
  std::unordered_map<BlockHash, int64_t, BlockHashHasher> in_flight_;  // hash -> computing seq
  int64_t prefix_query_tokens_ = 0;
  int64_t prefix_hit_tokens_ = 0;
};

}  // namespace tachyon::kv
