// KvCache: the paged key/value storage of every layer, f32.
//
// Layout per layer, for K and for V: [n_blocks, block_size, n_kv_heads, head_dim]; the engine
// (kv/) hands out block ids in [0, n_blocks) and builds each sequence's block table; the model
// writes and reads positions through those tables (model/batch.h).
// Memory is allocated once at creation (uninitialised; only written slots are ever read).
// Thread-safety: none; owned by the engine thread, which passes it to Model::Forward.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/attention.h"
#include "util/status.h"

namespace tachyon::model {

class KvCache {
 public:
  // Bytes one block takes over all layers (K and V).
  static size_t BytesPerBlock(int64_t n_layers, int64_t block_size, int64_t n_kv_heads,
                              int64_t head_dim);
  // Errors: InvalidArgument for non-positive sizes, ResourceExhausted if memory is short.
  static Result<std::unique_ptr<KvCache>> Create(int64_t n_layers, int64_t n_blocks,
                                                 int64_t block_size, int64_t n_kv_heads,
                                                 int64_t head_dim);

  int64_t n_layers() const { return n_layers_; }
  int64_t n_blocks() const { return n_blocks_; }
  int64_t block_size() const { return block_size_; }
  int64_t n_kv_heads() const { return n_kv_heads_; }
  int64_t head_dim() const { return head_dim_; }
  size_t bytes() const { return 2 * layer_floats_ * n_layers_ * sizeof(float); }

  float* k(int64_t layer) { return data_.get() + (2 * layer) * layer_floats_; }
  float* v(int64_t layer) { return data_.get() + (2 * layer + 1) * layer_floats_; }
  kernels::PagedKv View(int64_t layer) const;

  // Copies block `src` over block `dst` in every layer (copy-on-write of a shared block).
  // REQUIRES: both in [0, n_blocks).
  void CopyBlock(int32_t src, int32_t dst);

 private:
  KvCache() = default;
  int64_t n_layers_ = 0, n_blocks_ = 0, block_size_ = 0, n_kv_heads_ = 0, head_dim_ = 0;
  size_t layer_floats_ = 0;  // floats of one layer's K (or V)
  std::unique_ptr<float[]> data_;  // [n_layers][K, V][n_blocks][block_size][n_kv_heads][head_dim]
};

}  // namespace tachyon::model
