// A KV wire shape for tests and benchmarks: the plain layout (every layer in one page), f16.
#pragma once

#include <cstdint>

#include "kv/kv_wire.h"

namespace tachyon::kv::testing {

inline KvWireShape PlainF16WireShape(uint32_t n_layers, uint32_t block_size, uint32_t n_kv_heads,
                                     uint32_t head_dim, BlockHash model_id = {}) {
  KvWireShape s;
  s.model_id = model_id;
  s.dtype = 1;  // f16
  s.block_size = block_size;
  s.n_layers = n_layers;
  s.layers_per_block = n_layers;
  s.n_kv_heads = n_kv_heads;
  s.head_dim = head_dim;
  s.num_chunks = 2 * n_layers;
  s.chunk_bytes = uint64_t{block_size} * n_kv_heads * head_dim * 2;
  return s;
}

}  // namespace tachyon::kv::testing
