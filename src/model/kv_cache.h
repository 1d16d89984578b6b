// KvCache: the paged key/value storage of every layer, in one KvDtype (f16 by default; bf16,
// q8_0, q4_0, q4_1 or f32 on request).
//
// Layout per layer, for K and for V: [n_blocks, n_kv_heads, block_size] rows of head_dim
// elements of `dtype` (see kernels/attention.h); the engine (kv/) hands out block ids in
// [0, n_blocks) and builds each sequence's block table; the model writes and reads positions
// through those tables (model/batch.h). K/V are rounded to the dtype once, when stored.
// Memory is allocated once at creation (uninitialised; only written slots are ever read).
//
// Layer groups (KvLayout; kv/kv_groups.h): the layers may be split into groups of equal size
// g, each group with its own block table per sequence. The storage then has g K/V arrays of
// [n_blocks, n_kv_heads, block_size] rows, not n_layers: the i-th layer of every group uses
// array i, so a block id names one page holding one group's g layers, and the engine gives
// each block to one group at a time. Gemma 3 (sliding and global layers) thus lets its sliding
// groups hold only their window's blocks. The single layout (one group of every layer) is the
// plain cache, byte for byte.
// Thread-safety: none; owned by the engine thread, which passes it to Model::Forward.
// Store() of different slots may run concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/attention.h"
#include "kernels/pack.h"
#include "util/status.h"

namespace tachyon::model {

using kernels::KvDtype;
inline constexpr KvDtype kDefaultKvDtype = KvDtype::kF16;

// How a model's layers share KV blocks.
struct KvLayout {
  int64_t layers_per_block = 0;       // layers stored in one block (the group size g)
  std::vector<int64_t> group_window;  // [n_groups] 0: full attention; > 0: sliding window
  std::vector<int32_t> layer_group;   // [n_layers] the group of each layer
  std::vector<int32_t> layer_slot;    // [n_layers] its array in [0, layers_per_block)

  int64_t n_layers() const { return static_cast<int64_t>(layer_group.size()); }
  int64_t n_groups() const { return static_cast<int64_t>(group_window.size()); }
  // One full-attention group of every layer: the plain paged cache.
  static KvLayout Single(int64_t n_layers);
  // Layers with window 0 (full attention) or W > 0 (sliding) in `layer_window`: the full ones
  // and the sliding ones each cut in order into groups of g = gcd(#full, #sliding) layers (one
  // kind only: one group). Same windows everywhere give one group.
  static KvLayout Hybrid(std::span<const int64_t> layer_window);
};

class KvCache {
 public:
  // Bytes one block takes over all layers (K and V). REQUIRES: CheckKvDtype ok.
  static size_t BytesPerBlock(int64_t n_layers, int64_t block_size, int64_t n_kv_heads,
                              int64_t head_dim, KvDtype dtype = kDefaultKvDtype);
  // Bytes one block (page) of `layout` takes: layout.layers_per_block layers.
  static size_t BytesPerBlock(const KvLayout& layout, int64_t block_size, int64_t n_kv_heads,
                              int64_t head_dim, KvDtype dtype = kDefaultKvDtype);
  // Errors: InvalidArgument for non-positive sizes or a dtype that cannot hold head_dim
  // (q8_0 needs a multiple of 32), ResourceExhausted if memory is short.
  static Result<std::unique_ptr<KvCache>> Create(int64_t n_layers, int64_t n_blocks,
                                                 int64_t block_size, int64_t n_kv_heads,
                                                 int64_t head_dim, KvDtype dtype = kDefaultKvDtype);
  // The same with layer groups. Errors also: InvalidArgument for an inconsistent layout.
  static Result<std::unique_ptr<KvCache>> Create(const KvLayout& layout, int64_t n_blocks,
                                                 int64_t block_size, int64_t n_kv_heads,
                                                 int64_t head_dim, KvDtype dtype = kDefaultKvDtype);

  const KvLayout& layout() const { return layout_; }
  int64_t n_groups() const { return layout_.n_groups(); }
  int64_t n_layers() const { return n_layers_; }
  int64_t n_blocks() const { return n_blocks_; }
  int64_t block_size() const { return block_size_; }
  int64_t n_kv_heads() const { return n_kv_heads_; }
  int64_t head_dim() const { return head_dim_; }
  KvDtype dtype() const { return dtype_; }
  size_t bytes() const { return 2 * layer_bytes_ * n_arrays_; }

  // Rounds one position's K and V ([n_kv_heads, head_dim] floats each) to the dtype and
  // stores them at `slot` (= block * block_size + position in block) of `layer`.
  // REQUIRES: layer < n_layers, slot < n_blocks * block_size.
  void Store(int64_t layer, int64_t slot, const float* k, const float* v);
  kernels::PagedKv View(int64_t layer) const;

  // Copies block `src` over block `dst` in every layer of its page (copy-on-write).
  // REQUIRES: both in [0, n_blocks).
  void CopyBlock(int32_t src, int32_t dst);
  // Copies the first n positions of block `src` over those of block `dst` in `layer` (K and V).
  // REQUIRES: layer < n_layers; both in [0, n_blocks); n <= block_size.
  void CopySlots(int64_t layer, int32_t src, int32_t dst, int64_t n);

  // A block (page) as raw bytes, for whatever moves KV out of or into the pool (KV transfer
  // between replicas, offload tiers): 2 * layout().layers_per_block chunks of chunk_bytes()
  // each, in the cache's dtype, exactly as attention reads them. Chunk c = 2 * slot + (0 for
  // K, 1 for V) holds array `slot`'s rows of that block: layer L's K is chunk
  // 2 * layout().layer_slot[L] (within the block's group). Writing a chunk's bytes back into
  // a block of a cache with the same layout, block_size, n_kv_heads, head_dim and dtype
  // restores it bit for bit. REQUIRES: block in [0, n_blocks), chunk in [0, num_chunks()).
  int64_t num_chunks() const { return 2 * n_arrays_; }
  size_t chunk_bytes() const { return static_cast<size_t>(block_size_) * slot_bytes_; }
  std::span<uint8_t> BlockChunk(int32_t block, int64_t chunk) const {
    return {array(chunk) + static_cast<size_t>(block) * chunk_bytes(), chunk_bytes()};
  }

 private:
  KvCache() = default;
  uint8_t* k(int64_t layer) const { return array(2 * layout_.layer_slot[layer]); }
  uint8_t* v(int64_t layer) const { return array(2 * layout_.layer_slot[layer] + 1); }
  uint8_t* array(int64_t i) const { return data_.get() + i * layer_bytes_; }

  KvLayout layout_;
  int64_t n_arrays_ = 0;  // layout_.layers_per_block
  int64_t n_layers_ = 0, n_blocks_ = 0, block_size_ = 0, n_kv_heads_ = 0, head_dim_ = 0;
  KvDtype dtype_ = kDefaultKvDtype;
  size_t row_bytes_ = 0;    // one head's row of one position
  size_t slot_bytes_ = 0;   // one position's K (or V) of one layer: n_kv_heads rows
  size_t layer_bytes_ = 0;  // one array's K (or V)
  // [layers_per_block][K, V][n_blocks][n_kv_heads][block_size] rows; 2 MiB aligned, on transparent
  // huge pages where the kernel allows (attention reads scattered blocks: fewer TLB misses).
  kernels::AlignedBuffer data_;
};

}  // namespace tachyon::model
