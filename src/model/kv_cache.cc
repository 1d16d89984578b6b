#include "model/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>
#include <numeric>
#include <string>

namespace tachyon::model {

KvLayout KvLayout::Single(int64_t n_layers) {
  KvLayout l;
  l.layers_per_block = n_layers;
  l.group_window = {0};
  l.layer_group.assign(static_cast<size_t>(std::max<int64_t>(n_layers, 0)), 0);
  l.layer_slot.resize(l.layer_group.size());
  std::iota(l.layer_slot.begin(), l.layer_slot.end(), 0);
  return l;
}

KvLayout KvLayout::Hybrid(std::span<const int64_t> layer_window) {
  const int64_t n = static_cast<int64_t>(layer_window.size());
  if (n == 0 || std::all_of(layer_window.begin(), layer_window.end(),
                            [&](int64_t w) { return w == layer_window[0]; })) {
    KvLayout l = Single(n);
    if (n > 0) l.group_window = {std::max<int64_t>(layer_window[0], 0)};
    return l;
  }
  // Layers of each distinct window in order, each kind cut into groups of g layers.
  std::vector<int64_t> windows;
  for (int64_t w : layer_window) {
    if (std::find(windows.begin(), windows.end(), w) == windows.end()) windows.push_back(w);
  }
  std::sort(windows.begin(), windows.end());  // full attention (0) first
  int64_t g = 0;
  for (int64_t w : windows)
    g = std::gcd(g, std::count(layer_window.begin(), layer_window.end(), w));
  KvLayout l;
  l.layers_per_block = g;
  l.layer_group.assign(static_cast<size_t>(n), 0);
  l.layer_slot.assign(static_cast<size_t>(n), 0);
  for (int64_t w : windows) {
    int64_t in_group = g;  // start a new group at the first layer of each kind
    for (int64_t il = 0; il < n; ++il) {
      if (layer_window[il] != w) continue;
      if (in_group == g) {
        l.group_window.push_back(std::max<int64_t>(w, 0));
        in_group = 0;
      }
      l.layer_group[il] = static_cast<int32_t>(l.group_window.size() - 1);
      l.layer_slot[il] = static_cast<int32_t>(in_group++);
    }
  }
  return l;
}

size_t KvCache::BytesPerBlock(int64_t n_layers, int64_t block_size, int64_t n_kv_heads,
                              int64_t head_dim, KvDtype dtype) {
  return 2 * static_cast<size_t>(n_layers * block_size * n_kv_heads) *
         kernels::KvRowBytes(dtype, head_dim);
}

size_t KvCache::BytesPerBlock(const KvLayout& layout, int64_t block_size, int64_t n_kv_heads,
                              int64_t head_dim, KvDtype dtype) {
  return BytesPerBlock(layout.layers_per_block, block_size, n_kv_heads, head_dim, dtype);
}

Result<std::unique_ptr<KvCache>> KvCache::Create(int64_t n_layers, int64_t n_blocks,
                                                 int64_t block_size, int64_t n_kv_heads,
                                                 int64_t head_dim, KvDtype dtype) {
  if (n_layers <= 0) {
    return InvalidArgument("KV cache: layers, blocks, block size, heads and head_dim must be > 0");
  }
  return Create(KvLayout::Single(n_layers), n_blocks, block_size, n_kv_heads, head_dim, dtype);
}

Result<std::unique_ptr<KvCache>> KvCache::Create(const KvLayout& layout, int64_t n_blocks,
                                                 int64_t block_size, int64_t n_kv_heads,
                                                 int64_t head_dim, KvDtype dtype) {
  const int64_t n_layers = layout.n_layers();
  if (n_layers <= 0 || n_blocks <= 0 || block_size <= 0 || n_kv_heads <= 0 || head_dim <= 0) {
    return InvalidArgument("KV cache: layers, blocks, block size, heads and head_dim must be > 0");
  }
  const int64_t g = layout.layers_per_block;
  bool consistent = g > 0 && g <= n_layers && layout.n_groups() > 0 &&
                    static_cast<int64_t>(layout.layer_slot.size()) == n_layers;
  for (int64_t il = 0; consistent && il < n_layers; ++il) {
    consistent = layout.layer_group[il] >= 0 && layout.layer_group[il] < layout.n_groups() &&
                 layout.layer_slot[il] >= 0 && layout.layer_slot[il] < g;
  }
  for (int64_t w : layout.group_window) consistent = consistent && w >= 0;
  if (!consistent) return InvalidArgument("KV cache: inconsistent layer-group layout");
  RETURN_IF_ERROR(kernels::CheckKvDtype(dtype, head_dim));
  const size_t row = kernels::KvRowBytes(dtype, head_dim);
  const double total = 2.0 * g * n_blocks * block_size * n_kv_heads * row;
  if (total > static_cast<double>(std::numeric_limits<size_t>::max() / 2) ||
      n_blocks > std::numeric_limits<int32_t>::max()) {
    return ResourceExhausted("KV cache of " + std::to_string(n_blocks) + " blocks is too large");
  }
  std::unique_ptr<KvCache> cache(new KvCache());
  cache->layout_ = layout;
  cache->n_arrays_ = g;
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
  uint8_t* kb = k(layer);
  uint8_t* vb = v(layer);
  for (int64_t h = 0; h < n_kv_heads_; ++h) {
    const size_t off =
        static_cast<size_t>((block * n_kv_heads_ + h) * block_size_ + in_block) * row_bytes_;
    kernels::StoreKvRow(dtype_, k_row + h * head_dim_, kb + off, head_dim_);
    kernels::StoreKvRow(dtype_, v_row + h * head_dim_, vb + off, head_dim_);
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

void KvCache::CopySlots(int64_t layer, int32_t src, int32_t dst, int64_t n) {
  const size_t bytes = static_cast<size_t>(n) * row_bytes_;
  for (uint8_t* base : {k(layer), v(layer)}) {
    for (int64_t h = 0; h < n_kv_heads_; ++h) {
      const size_t from = static_cast<size_t>((src * n_kv_heads_ + h) * block_size_) * row_bytes_;
      const size_t to = static_cast<size_t>((dst * n_kv_heads_ + h) * block_size_) * row_bytes_;
      std::memcpy(base + to, base + from, bytes);
    }
  }
}

void KvCache::CopyBlock(int32_t src, int32_t dst) {
  for (int64_t c = 0; c < num_chunks(); ++c) {
    std::memcpy(BlockChunk(dst, c).data(), BlockChunk(src, c).data(), chunk_bytes());
  }
}

}  // namespace tachyon::model
