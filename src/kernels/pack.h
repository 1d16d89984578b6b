// Repacked ("interleaved") weight layouts for MatMul.
//
// A weight matrix in its GGUF layout stores each output row's blocks one after another.
// Packed, the rows are grouped in tiles of kPackRows = 16 consecutive output rows, and each
// tile is one contiguous stream in which the 16 rows' blocks of the same input range lie side
// by side: one 64-byte load holds 4 code bytes of each of the 16 rows, so a single
// vpdpbusd against 4 broadcast activation bytes advances all 16 outputs, and the result
// needs no horizontal reduction. Scales are kept apart from the codes (all of a tile's codes,
// then all its scales) so every load is aligned. See docs/kernels.md for the byte layouts.
//
// Packing keeps the values bit for bit (only the arrangement changes: Q8_0 codes are stored
// with their sign bit flipped, Q5 fifth bits as a bit plane beside the nibbles), so packed and
// unpacked MatMul agree to float summation order. A partial last tile is padded with zero rows.
//
//   AlignedBuffer buf = AllocatePacked(w);
//   PackWeight(w, buf.get(), pool);
//   w.packed = buf.get();     // MatMul now uses the packed kernels; w.data stays valid for
//                             // DequantizeRow (embeddings) and MatMulReference.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "kernels/matmul.h"
#include "tensor/dtype.h"
#include "util/thread_pool.h"

namespace tachyon::kernels {

inline constexpr int64_t kPackRows = 16;
// Version of the packed byte layouts; bump it whenever any layout changes (on-disk caches of
// packed weights, model/pack_cache.h, written by another version are then ignored).
inline constexpr uint32_t kPackVersion = 3;

// Whether `type` has a packed layout (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q6_K, F16, BF16).
bool HasPackedLayout(GgmlType type);

// Bytes of one packed tile of kPackRows rows (a multiple of 64).
// REQUIRES: HasPackedLayout(type), cols a multiple of the block size.
size_t PackedTileBytes(GgmlType type, int64_t cols);
// Bytes of the packed form of a rows x cols matrix (whole tiles).
size_t PackedBytes(GgmlType type, int64_t rows, int64_t cols);

// Writes tiles [t0, t1) of w (tile t = rows 16 t .. 16 t + 15) to dst, which points at the
// start of the whole packed matrix (64-byte aligned). Tiles are independent, so threads may
// pack disjoint ranges concurrently. REQUIRES: HasPackedLayout(w.type), w.data set.
void PackTiles(const Weight& w, int64_t t0, int64_t t1, uint8_t* dst);
// Packs the whole matrix, splitting tiles over `pool` (may be null).
void PackWeight(const Weight& w, uint8_t* dst, ThreadPool* pool);

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<uint8_t[], FreeDeleter>;
// 64-byte aligned storage for `bytes` bytes (null if bytes == 0 or allocation fails).
AlignedBuffer AllocateAligned(size_t bytes);

}  // namespace tachyon::kernels
