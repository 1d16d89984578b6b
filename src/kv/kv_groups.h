// Layer groups of a hybrid KV cache (the fact pattern of vLLM's hybrid allocator).
//
// A model's layers may be split into groups of equal size, each group with its own block table
// per request, all groups drawing block ids from one BlockPool (a block id then names one page
// that holds one group's layers; model/kv_cache.h). A group is described by its window:
//   0      full attention: the group keeps the blocks of every position of the sequence;
//   W > 0  sliding window: the token at position p attends to positions (p - W, p], so once
//          every query still to come is at position >= q, the blocks that end at or before
//          q - W + 1 are never read again and go back to the pool (FirstLiveBlock).
// One full-attention group (the empty window list means the same) is the plain paged cache.
// Pure functions; thread-safe.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "kv/block_hash.h"

namespace tachyon::kv {

// The first block index a query at position `next_pos` (or later) can still read, in a group
// with `window` (0: full attention, always block 0).
inline int64_t FirstLiveBlock(int64_t window, int64_t next_pos, int64_t block_size) {
  if (window <= 0) return 0;
  return std::max<int64_t>(0, next_pos - window + 1) / block_size;
}

// The most blocks one sequence of num_tokens positions holds at once over all groups, when a
// step computes at most max_chunk (>= 1) new tokens: a full group holds one block per
// block_size positions; a sliding group at most the blocks that the window before a chunk and
// the chunk itself (window - 1 + max_chunk positions) can touch. Empty windows: one full group.
int64_t PeakBlocksPerSequence(std::span<const int64_t> group_windows, int64_t block_size,
                              int64_t num_tokens, int64_t max_chunk);

// The longest sequence whose PeakBlocksPerSequence fits in num_blocks; INT64_MAX when every
// group slides and their peaks fit (the pool then never bounds the length); 0 when nothing fits.
int64_t MaxTokensInBlocks(std::span<const int64_t> group_windows, int64_t block_size,
                          int64_t num_blocks, int64_t max_chunk);

// The prefix-cache key of group `group`'s block whose chained key (block_hash.h) is `h`.
// Group 0 uses `h` itself, so a single-group cache keys its blocks exactly as the chain says
// (the hashes the router computes); the other groups' keys are derived from (h, group), so a
// group's cached block is only ever found for that group.
BlockHash GroupBlockHash(const BlockHash& h, int group);

}  // namespace tachyon::kv
