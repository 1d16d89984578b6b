// KvCache: the paged key/value storage of every layer, in one KvDtype (f16 by default; bf16,
// q8_0 or f32 on request).
//
// Layout per layer, for K and for V: [n_blocks, n_kv_heads, block_size] rows of head_dim
// elements of `dtype` (see kernels/attention.h); the engine (kv/) hands out block ids in
// [0, n_blocks) and builds each sequence's block table; the model writes and reads positions
// through those tables (model/batch.h). K/V are rounded to the dtype once, when stored.
// Memory is allocated once at creation (uninitialised; only written slots are ever read).
// Thread-safety: none; owned by the engine thread, which passes it to Model::Forward.
// Store() of different slots may run concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/attention.h"
#include "kernels/pack.h"
#include "util/status.h"

namespace tachyon::model {

using kernels::KvDtype;
inline constexpr KvDtype kDefaultKvDtype = KvDtype::kF16;

class KvCache {
 public:
  // Bytes one block takes over all layers (K and V). REQUIRES: CheckKvDtype ok.
  static size_t BytesPerBlock(int64_t n_layers, int64_t block_size, int64_t n_kv_heads,
                              int64_t head_dim, KvDtype dtype = kDefaultKvDtype);
  // Errors: InvalidArgument for non-positive sizes or a dtype that cannot hold head_dim
  // (q8_0 needs a multiple of 32), ResourceExhausted if memory is short.
  static Result<std::unique_ptr<KvCache>> Create(int64_t n_layers, int64_t n_blocks,
                                                 int64_t block_size, int64_t n_kv_heads,
                                                 int64_t head_dim, KvDtype dtype = kDefaultKvDtype);

  int64_t n_layers() const { return n_layers_; }
  int64_t n_blocks() const { return n_blocks_; }
  int64_t block_size() const { return block_size_; }
  int64_t n_kv_heads() const { return n_kv_heads_; }
  int64_t head_dim() const { return head_dim_; }
  KvDtype dtype() const { return dtype_; }
  size_t bytes() const { return 2 * layer_bytes_ * n_layers_; }

  // Rounds one position's K and V ([n_kv_heads, head_dim] floats each) to the dtype and
  // stores them at `slot` (= block * block_size + position in block) of `layer`.
  // REQUIRES: layer < n_layers, slot < n_blocks * block_size.
  void Store(int64_t layer, int64_t slot, const float* k, const float* v);
  kernels::PagedKv View(int64_t layer) const;

  // Copies block `src` over block `dst` in every layer (copy-on-write of a shared block).
  // REQUIRES: both in [0, n_blocks).
  void CopyBlock(int32_t src, int32_t dst);

 private:
  KvCache() = default;
  uint8_t* k(int64_t layer) const { return data_.get() + (2 * layer) * layer_bytes_; }
  uint8_t* v(int64_t layer) const { return data_.get() + (2 * layer + 1) * layer_bytes_; }

  int64_t n_layers_ = 0, n_blocks_ = 0, block_size_ = 0, n_kv_heads_ = 0, head_dim_ = 0;
  KvDtype dtype_ = kDefaultKvDtype;
  size_t row_bytes_ = 0;             // one head's row of one position
  size_t slot_bytes_ = 0;            // one position's K (or V) of one layer: n_kv_heads rows
  size_t layer_bytes_ = 0;           // one layer's K (or V)
  // [n_layers][K, V][n_blocks][n_kv_heads][block_size] rows; 2 MiB aligned, on transparent huge
  // pages where the kernel allows (attention reads scattered blocks: fewer TLB misses).
  kernels::AlignedBuffer data_;
};

}  // namespace tachyon::model
