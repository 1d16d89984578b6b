// Content hashes of full KV blocks, chained so that a block's hash names its whole prefix.
//
// hash(block i) = XXH3-128(hash(block i-1), the block's token ids); the chain starts at
// RootHash(extra_key), so requests with different extra keys (cache salt, LoRA id) never share
// blocks. 128 bits make an accidental collision (which would silently reuse wrong KV)
// negligible. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace tachyon::kv {

struct BlockHash {
  uint64_t lo = 0;
  uint64_t hi = 0;
  bool operator==(const BlockHash&) const = default;
};

struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const { return static_cast<size_t>(h.lo ^ (h.hi * 31)); }
};

// The chain start for a namespace; "" is the default namespace.
BlockHash RootHash(std::string_view extra_key);

// Hash of one full block whose predecessor hashes to `parent`.
BlockHash HashBlock(const BlockHash& parent, std::span<const int32_t> block_tokens);

// Appends to *hashes the hashes of the full blocks of `tokens` beyond the hashes.size() already
// there (tokens only ever grow, so earlier hashes stay valid), stopping after `max_blocks`.
void ExtendBlockHashes(std::span<const int32_t> tokens, int block_size, const BlockHash& root,
                       size_t max_blocks, std::vector<BlockHash>* hashes);

}  // namespace tachyon::kv
