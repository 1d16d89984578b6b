#include "model/kv_cache.h"

#include <cstring>
#include <limits>
#include <new>
#include <string>

namespace tachyon::model {

size_t KvCache::BytesPerBlock(int64_t n_layers, int64_t block_size, int64_t n_kv_heads,
                              int64_t head_dim, KvDtype dtype) {
  return 2 * static_cast<size_t>(n_layers * block_size * n_kv_heads) *
         kernels::KvRowBytes(dtype, head_dim);
}

Result<std::unique_ptr<KvCache>> KvCache::Create(int64_t n_layers, int64_t n_blocks,
                                                 int64_t block_size, int64_t n_kv_heads,
                                                 int64_t head_dim, KvDtype dtype) {
  if (n_layers <= 0 || n_blocks <= 0 || block_size <= 0 || n_kv_heads <= 0 || head_dim <= 0) {
    return InvalidArgument("KV cache: layers, blocks, block size, heads and head_dim must be > 0");
  }
  RETURN_IF_ERROR(kernels::CheckKvDtype(dtype, head_dim));
  const size_t row = kernels::KvRowBytes(dtype, head_dim);
  const double total = 2.0 * n_layers * n_blocks * block_size * n_kv_heads * row;
  if (total > static_cast<double>(std::numeric_limits<size_t>::max() / 2) ||
      n_blocks > std::numeric_limits<int32_t>::max()) {
    return ResourceExhausted("KV cache of " + std::to_string(n_blocks) + " blocks is too large");
  }
  std::unique_ptr<KvCache> cache(new KvCache());
  cache->n_layers_ = n_layers;
  cache->n_blocks_ = n_blocks;
  cache->block_size_ = block_size;
  cache->n_kv_heads_ = n_kv_heads;
  cache->head_dim_ = head_dim;
  cache->dtype_ = dtype;
  cache->row_bytes_ = row;
  cache->slot_bytes_ = static_cast<size_t>(n_kv_heads) * row;
  cache->layer_bytes_ = static_cast<size_t>(n_blocks * block_size) * cache->slot_bytes_;
  cache->data_ = kernels::AllocateAligned(static_cast<size_t>(total));
  if (!cache->data_) {
    return ResourceExhausted("KV cache: cannot allocate " +
                             std::to_string(static_cast<size_t>(total)) + " bytes for " +
                             std::to_string(n_blocks) + " blocks");
  }
  return cache;
}

void KvCache::Store(int64_t layer, int64_t slot, const float* k_row, const float* v_row) {
  const int64_t block = slot / block_size_, in_block = slot % block_size_;
  for (int64_t h = 0; h < n_kv_heads_; ++h) {
    const size_t off =
        static_cast<size_t>((block * n_kv_heads_ + h) * block_size_ + in_block) * row_bytes_;
    kernels::StoreKvRow(dtype_, k_row + h * head_dim_, k(layer) + off, head_dim_);
    kernels::StoreKvRow(dtype_, v_row + h * head_dim_, v(layer) + off, head_dim_);
  }
}

kernels::PagedKv KvCache::View(int64_t layer) const {
  kernels::PagedKv kv;
  kv.k = k(layer);
  kv.v = v(layer);
  kv.dtype = dtype_;
  kv.n_blocks = n_blocks_;
  kv.block_size = block_size_;
  kv.n_kv_heads = n_kv_heads_;
  kv.head_dim = head_dim_;
  return kv;
}

void KvCache::CopyBlock(int32_t src, int32_t dst) {
  const size_t block_bytes = static_cast<size_t>(block_size_) * slot_bytes_;
  for (int64_t l = 0; l < n_layers_; ++l) {
    for (uint8_t* base : {k(l), v(l)}) {
      std::memcpy(base + dst * block_bytes, base + src * block_bytes, block_bytes);
    }
  }
}

}  // namespace tachyon::model
