#include "kv/block_hash.h"

#include <xxhash.h>

#include <algorithm>

namespace tachyon::kv {
namespace {
BlockHash FromXxh(XXH128_hash_t h) {
  return BlockHash{h.low64, h.high64};
}
}  // namespace

BlockHash RootHash(std::string_view extra_key) {
  // A fixed tag keeps the root of the empty key distinct from any block hash input.
  static constexpr char kTag[] = "tachyon-kv-root";
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  XXH3_128bits_update(st, kTag, sizeof(kTag));
  XXH3_128bits_update(st, extra_key.data(), extra_key.size());
  BlockHash h = FromXxh(XXH3_128bits_digest(st));
  XXH3_freeState(st);
  return h;
}

BlockHash HashBlock(const BlockHash& parent, std::span<const int32_t> block_tokens) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  const uint64_t p[2] = {parent.lo, parent.hi};
  XXH3_128bits_update(st, p, sizeof(p));
  XXH3_128bits_update(st, block_tokens.data(), block_tokens.size_bytes());
  BlockHash h = FromXxh(XXH3_128bits_digest(st));
  XXH3_freeState(st);
  return h;
}

void ExtendBlockHashes(std::span<const int32_t> tokens, int block_size, const BlockHash& root,
                       size_t max_blocks, std::vector<BlockHash>* hashes) {
  const size_t full = std::min(tokens.size() / static_cast<size_t>(block_size), max_blocks);
  for (size_t i = hashes->size(); i < full; ++i) {
    const BlockHash& parent = i == 0 ? root : (*hashes)[i - 1];
    hashes->push_back(HashBlock(parent, tokens.subspan(i * block_size, block_size)));
  }
}

}  // namespace tachyon::kv
