#include "kv/block_store.h"

#include "util/stream_copy.h"

namespace tachyon::kv {

size_t TotalBytes(BlockChunks chunks) {
  size_t n = 0;
  for (const auto& c : chunks) n += c.size();
  return n;
}

std::vector<uint8_t> ConcatChunks(BlockChunks chunks) {
  std::vector<uint8_t> bytes;
  CopyChunksInto(chunks, &bytes);
  return bytes;
}

void CopyChunksInto(BlockChunks chunks, std::vector<uint8_t>* dst) {
  const size_t total = TotalBytes(chunks);
  if (dst->size() < total) {  // a fresh buffer: grown as the chunks go in, no zero-fill
    dst->clear();
    dst->reserve(total);
    for (const auto& c : chunks) dst->insert(dst->end(), c.begin(), c.end());
    return;
  }
  dst->resize(total);  // a recycled one: overwritten in place, past the caches
  size_t off = 0;
  for (const auto& c : chunks) {
    StreamCopy(dst->data() + off, c.data(), c.size());
    off += c.size();
  }
}

std::vector<std::span<uint8_t>> BlockBytes::Chunks(int32_t block) {
  std::vector<std::span<uint8_t>> out;
  out.reserve(static_cast<size_t>(num_chunks()));
  for (int64_t c = 0; c < num_chunks(); ++c) out.push_back(Chunk(block, c));
  return out;
}

void BlockStore::StoreOwned(const BlockHash& key, std::vector<uint8_t> bytes) {
  std::span<uint8_t> whole(bytes);
  const std::span<uint8_t> one[] = {whole};
  Store(key, one);
}

}  // namespace tachyon::kv
