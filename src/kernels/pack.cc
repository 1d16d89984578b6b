// Weight repacking into the 16-row interleaved layouts of kernels/pack.h.
//
// Tile layout (nb = cols / 32 blocks; rows r < 16 of the tile; blocks b < nb):
//   codes:  nb * kCodeBytes bytes; block b occupies [b * kCodeBytes, (b + 1) * kCodeBytes) as
//           steps of 64 bytes, step s holding 4 bytes of every row:  [s][r][4]
//             Q4_0: step s < 4 = row r's qs[4 s .. 4 s + 3]  (low nibbles: elements
//                   4 s .. 4 s + 3, high nibbles: elements 16 + 4 s .. 16 + 4 s + 3)
//             Q4_1: as Q4_0 (its codes are unsigned 0..15 too)
//             Q8_0: step s < 8 = row r's qs[4 s .. 4 s + 3] XOR 0x80 (unsigned q + 128)
//             Q5_0 / Q5_1: steps 0..3 as Q4_0 (the low 4 bits of the codes), then step 4 the
//                   fifth bits (qh, bit e = element e) as a bit plane: byte j of row r has
//                   bit s = element 4 s + j and bit 4 + s = element 16 + 4 s + j (s < 4), so
//                   step s's low / high nibbles take their fifth bits from bit s / 4 + s of
//                   the same byte position (kCodeBytes 320, 0.69 bytes per weight in all)
//   scales: nb * 16 fp16: [b][r] = row r's block-b scale d
//   mins (Q4_1 / Q5_1, after the scales): nb * 16 fp16: [b][r] = row r's block-b min m
//   padding to a multiple of 64 bytes.
//
// K-quants (nb = cols / 256 super-blocks; codes of all super-blocks, then their metadata):
//   Q4_K codes: 2048 bytes per super-block, step s = 8 c + t (c < 4, t < 8): [s][r][j] =
//               q[64 c + 4 t + j] | q[64 c + 32 + 4 t + j] << 4  (sub-blocks 2c | 2c + 1)
//        meta:  320 bytes: scale[8][16] u8 ([sub-block][row]), min[8][16] u8, d[16] fp16,
//               dmin[16] fp16
//   Q6_K codes: 3072 bytes per super-block, 3 steps per 16-element sub-block g:
//               [3g][r][j]     = lo4(q[16g + j])     | lo4(q[16g + 4 + j]) << 4
//               [3g + 1][r][j] = lo4(q[16g + 8 + j]) | lo4(q[16g + 12 + j]) << 4
//               [3g + 2][r][j] = hi2(q[16g + j]) | hi2(q[16g + 4 + j]) << 2 |
//                                hi2(q[16g + 8 + j]) << 4 | hi2(q[16g + 12 + j]) << 6
//        meta:  288 bytes: scale[16][16] i8 ([sub-block][row]), d[16] fp16
//   (q the unsigned codes: Q4_K 0..15, Q6_K 0..63, i.e. value + 32).
//
// F16 / BF16 (values unchanged, 2 bytes each; kp = ceil(cols / 32) * 16 input pairs):
//   pair p = inputs 2p, 2p + 1 occupies 64 bytes [64 p, 64 p + 64) as [r][2]:
//     element (2p + j) of row r at uint16 index 32 p + 2 r + j
//   inputs past cols are +0 (cols rounded up to 32), so a BF16 tile is exactly the AMX B
//   operand (kernels/bf16_panel.h) of the whole row range: 16 pairs = one 1 KiB B tile.
#include "kernels/pack.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "kernels/matmul_internal.h"
#include "tensor/quant_blocks.h"
#include "util/logging.h"

namespace tachyon::kernels {
namespace {

// The fifth bits of a Q5 block (qh, bit e = element e) as the bit-plane word of one row:
// byte j, bit s = element 4 s + j, bit 4 + s = element 16 + 4 s + j (s < 4).
uint32_t Q5BitPlane(uint32_t qh) {
  uint32_t out = 0;
  for (int j = 0; j < 4; ++j) {
    for (int s = 0; s < 4; ++s) {
      out |= ((qh >> (4 * s + j)) & 1u) << (8 * j + s);
      out |= ((qh >> (16 + 4 * s + j)) & 1u) << (8 * j + 4 + s);
    }
  }
  return out;
}

// kMins: the block also has a min m (Q4_1 / Q5_1), stored after the scales in the same order.
// kHigh: the block also has fifth bits (Q5_0 / Q5_1), one more step after the code steps.
template <typename Block, int kSteps, uint32_t kXor, bool kMins = false, bool kHigh = false>
void PackTile(const Weight& w, int64_t t, uint8_t* tile) {
  const int64_t nb = w.cols / 32;
  constexpr int kBlockBytes = (kSteps + (kHigh ? 1 : 0)) * 64;
  const size_t row_bytes = w.row_bytes ? w.row_bytes : RowBytes(w.type, w.cols);
  const auto* base = static_cast<const uint8_t*>(w.data);
  auto* scales = reinterpret_cast<uint16_t*>(tile + nb * kBlockBytes);
  uint16_t* mins = scales + nb * kPackRows;
  const size_t tile_bytes = PackedTileBytes(w.type, w.cols);
  const int64_t r_end = std::min<int64_t>(kPackRows, w.rows - t * kPackRows);
  if (r_end < kPackRows) std::memset(tile, 0, tile_bytes);  // zero rows pad the last tile
  const Block* rows[kPackRows];
  for (int64_t r = 0; r < r_end; ++r) {
    rows[r] =
        reinterpret_cast<const Block*>(base + static_cast<size_t>(t * kPackRows + r) * row_bytes);
  }
  // Block-major: the 16 rows' block b are read side by side and written as one contiguous
  // run of kBlockBytes bytes.
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* dst = tile + b * kBlockBytes;
    for (int64_t r = 0; r < r_end; ++r) {
      const Block& blk = rows[r][b];
      for (int s = 0; s < kSteps; ++s) {
        uint32_t v;
        std::memcpy(&v, reinterpret_cast<const uint8_t*>(blk.qs) + 4 * s, 4);
        v ^= kXor;
        std::memcpy(dst + 64 * s + 4 * r, &v, 4);
      }
      if constexpr (kHigh) {
        uint32_t qh;
        std::memcpy(&qh, blk.qh, 4);
        const uint32_t plane = Q5BitPlane(qh);
        std::memcpy(dst + 64 * kSteps + 4 * r, &plane, 4);
      }
      scales[b * kPackRows + r] = blk.d;
      if constexpr (kMins) mins[b * kPackRows + r] = blk.m;
    }
  }
  const size_t used = static_cast<size_t>(nb) * (kBlockBytes + (kMins ? 4 : 2) * kPackRows);
  if (used < tile_bytes) std::memset(tile + used, 0, tile_bytes - used);
}

// Codes and metadata bytes per 256-element super-block of a packed K-quant tile.
constexpr size_t kQ4KCode = 2048, kQ4KMeta = 320, kQ6KCode = 3072, kQ6KMeta = 288;

void PackTileQ4K(const Weight& w, int64_t t, uint8_t* tile, size_t tile_bytes) {
  const int64_t nb = w.cols / 256;
  const size_t row_bytes = w.row_bytes ? w.row_bytes : RowBytes(w.type, w.cols);
  const int64_t r_end = std::min<int64_t>(kPackRows, w.rows - t * kPackRows);
  if (r_end < kPackRows) std::memset(tile, 0, tile_bytes);  // zero rows pad the last tile
  for (int64_t r = 0; r < r_end; ++r) {
    const auto* blocks = reinterpret_cast<const BlockQ4_K*>(
        static_cast<const uint8_t*>(w.data) + static_cast<size_t>(t * kPackRows + r) * row_bytes);
    for (int64_t b = 0; b < nb; ++b) {
      const BlockQ4_K& blk = blocks[b];
      uint8_t* codes = tile + b * kQ4KCode + 4 * r;
      for (int c = 0; c < 4; ++c) {
        for (int tt = 0; tt < 8; ++tt) {
          // qs[32 c + l]: low nibble element 64 c + l, high nibble element 64 c + 32 + l.
          std::memcpy(codes + 64 * (8 * c + tt), blk.qs + 32 * c + 4 * tt, 4);
        }
      }
      uint8_t* meta = tile + nb * kQ4KCode + b * kQ4KMeta;
      for (int j = 0; j < 8; ++j) {
        UnpackScaleMinK4(blk.scales, j, &meta[16 * j + r], &meta[128 + 16 * j + r]);
      }
      std::memcpy(meta + 256 + 2 * r, &blk.d, 2);
      std::memcpy(meta + 288 + 2 * r, &blk.dmin, 2);
    }
  }
}

void PackTileQ6K(const Weight& w, int64_t t, uint8_t* tile, size_t tile_bytes) {
  const int64_t nb = w.cols / 256;
  const size_t row_bytes = w.row_bytes ? w.row_bytes : RowBytes(w.type, w.cols);
  const int64_t r_end = std::min<int64_t>(kPackRows, w.rows - t * kPackRows);
  if (r_end < kPackRows) std::memset(tile, 0, tile_bytes);  // zero rows pad the last tile
  for (int64_t r = 0; r < r_end; ++r) {
    const auto* blocks = reinterpret_cast<const BlockQ6_K*>(
        static_cast<const uint8_t*>(w.data) + static_cast<size_t>(t * kPackRows + r) * row_bytes);
    for (int64_t b = 0; b < nb; ++b) {
      const BlockQ6_K& blk = blocks[b];
      uint8_t* codes = tile + b * kQ6KCode + 4 * r;
      for (int g = 0; g < 16; ++g) {
        // Elements 16 g .. 16 g + 15 (see DequantQ6_K): half h, quarter s of the half; their
        // low 4 bits are one nibble of 16 consecutive ql bytes, their high 2 bits 2 bits of
        // 16 consecutive qh bytes.
        const int h = g / 8, s = (g % 8) / 2, l0 = 16 * (g % 2);
        const uint8_t* lq = blk.ql + 64 * h + 32 * (s & 1) + l0;
        const uint8_t* hq = blk.qh + 32 * h + l0;
        uint8_t lo[16], hi[16];
        for (int i = 0; i < 16; ++i) {
          lo[i] = s < 2 ? (lq[i] & 0xF) : (lq[i] >> 4);
          hi[i] = (hq[i] >> (2 * s)) & 3;
        }
        for (int j = 0; j < 4; ++j) {
          codes[64 * (3 * g) + j] = static_cast<uint8_t>(lo[j] | (lo[4 + j] << 4));
          codes[64 * (3 * g + 1) + j] = static_cast<uint8_t>(lo[8 + j] | (lo[12 + j] << 4));
          codes[64 * (3 * g + 2) + j] =
              static_cast<uint8_t>(hi[j] | (hi[4 + j] << 2) | (hi[8 + j] << 4) | (hi[12 + j] << 6));
        }
      }
      uint8_t* meta = tile + nb * kQ6KCode + b * kQ6KMeta;
      for (int g = 0; g < 16; ++g) meta[16 * g + r] = static_cast<uint8_t>(blk.scales[g]);
      std::memcpy(meta + 256 + 2 * r, &blk.d, 2);
    }
  }
  const size_t used = static_cast<size_t>(nb) * (kQ6KCode + kQ6KMeta);
  if (used < tile_bytes) std::memset(tile + used, 0, tile_bytes - used);
}

// F16 / BF16: each row's pairs of 2-byte values (one uint32) are spread at a stride of 64
// bytes; the tile (cols * 32 bytes) is written in bands of 16 pairs (1 KiB, L1) so every
// output line is completed while it is still cached.
void PackTileFloat(const Weight& w, int64_t t, uint8_t* tile, size_t tile_bytes) {
  const size_t row_bytes = w.row_bytes ? w.row_bytes : RowBytes(w.type, w.cols);
  const int64_t r_end = std::min<int64_t>(kPackRows, w.rows - t * kPackRows);
  const int64_t full_pairs = w.cols / 2;  // pairs with both inputs inside the row
  const int64_t pairs = static_cast<int64_t>(tile_bytes / 64);
  if (r_end < kPackRows || full_pairs < pairs) std::memset(tile, 0, tile_bytes);
  const uint8_t* rows[kPackRows];
  for (int64_t r = 0; r < r_end; ++r) {
    rows[r] =
        static_cast<const uint8_t*>(w.data) + static_cast<size_t>(t * kPackRows + r) * row_bytes;
  }
  constexpr int64_t kBand = 16;
  for (int64_t p0 = 0; p0 < full_pairs; p0 += kBand) {
    const int64_t p1 = std::min(full_pairs, p0 + kBand);
    for (int64_t r = 0; r < r_end; ++r) {
      for (int64_t p = p0; p < p1; ++p) std::memcpy(tile + 64 * p + 4 * r, rows[r] + 4 * p, 2 * 2);
    }
  }
  if (w.cols % 2 != 0) {  // odd cols: the last input pairs with a zero
    for (int64_t r = 0; r < r_end; ++r) {
      std::memcpy(tile + 64 * full_pairs + 4 * r, rows[r] + 4 * full_pairs, 2);
    }
  }
}

}  // namespace

bool HasPackedLayout(GgmlType type) {
  return type == GgmlType::kQ4_0 || type == GgmlType::kQ4_1 || type == GgmlType::kQ5_0 ||
         type == GgmlType::kQ5_1 || type == GgmlType::kQ8_0 || type == GgmlType::kQ4_K || type == GgmlType::kQ6_K || type == GgmlType::kF16 ||
         type == GgmlType::kBF16;
}

size_t PackedTileBytes(GgmlType type, int64_t cols) {
  size_t n = 0;
  switch (type) {
    case GgmlType::kQ4_K:
      n = static_cast<size_t>(cols / 256) * (kQ4KCode + kQ4KMeta);
      break;
    case GgmlType::kQ6_K:
      n = static_cast<size_t>(cols / 256) * (kQ6KCode + kQ6KMeta);
      break;
    case GgmlType::kF16:
    case GgmlType::kBF16:
      n = static_cast<size_t>((cols + 31) / 32) * 1024;
      break;
    case GgmlType::kQ4_1:  // Q4_0's codes, then scales and mins
      n = static_cast<size_t>(cols / 32) * (256 + 4 * kPackRows);
      break;
    case GgmlType::kQ5_0:  // codes and fifth bits, then scales
      n = static_cast<size_t>(cols / 32) * (320 + 2 * kPackRows);
      break;
    case GgmlType::kQ5_1:  // codes and fifth bits, then scales and mins
      n = static_cast<size_t>(cols / 32) * (320 + 4 * kPackRows);
      break;
    default:
      n = static_cast<size_t>(cols / 32) * ((type == GgmlType::kQ8_0 ? 512 : 256) + 2 * kPackRows);
  }
  return (n + 63) / 64 * 64;
}

size_t PackedBytes(GgmlType type, int64_t rows, int64_t cols) {
  const int64_t tiles = (rows + kPackRows - 1) / kPackRows;
  return static_cast<size_t>(tiles) * PackedTileBytes(type, cols);
}

void PackTiles(const Weight& w, int64_t t0, int64_t t1, uint8_t* dst) {
  CHECK(HasPackedLayout(w.type)) << "PackTiles: no packed layout for " << TypeName(w.type);
  const size_t tile_bytes = PackedTileBytes(w.type, w.cols);
  for (int64_t t = t0; t < t1; ++t) {
    uint8_t* tile = dst + static_cast<size_t>(t) * tile_bytes;
    switch (w.type) {
      case GgmlType::kQ4_0:
        PackTile<BlockQ4_0, 4, 0>(w, t, tile);
        break;
      case GgmlType::kQ4_1:
        PackTile<BlockQ4_1, 4, 0, true>(w, t, tile);
        break;
      case GgmlType::kQ5_0:
        PackTile<BlockQ5_0, 4, 0, false, true>(w, t, tile);
        break;
      case GgmlType::kQ5_1:
        PackTile<BlockQ5_1, 4, 0, true, true>(w, t, tile);
        break;
      case GgmlType::kQ8_0:
        PackTile<BlockQ8_0, 8, 0x80808080u>(w, t, tile);
        break;
      case GgmlType::kQ4_K:
        PackTileQ4K(w, t, tile, tile_bytes);
        break;
      case GgmlType::kF16:
      case GgmlType::kBF16:
        PackTileFloat(w, t, tile, tile_bytes);
        break;
      default:
        PackTileQ6K(w, t, tile, tile_bytes);
        break;
    }
  }
}

void PackWeight(const Weight& w, uint8_t* dst, ThreadPool* pool) {
  const int64_t tiles = (w.rows + kPackRows - 1) / kPackRows;
  auto run = [&](int64_t t0, int64_t t1) { PackTiles(w, t0, t1, dst); };
  if (pool != nullptr) {
    pool->ParallelFor(tiles, run);
  } else {
    run(0, tiles);
  }
}

AlignedBuffer AllocateAligned(size_t bytes) {
  if (bytes == 0) return nullptr;
  // Large buffers: 2 MiB aligned and backed by transparent huge pages where the kernel
  // allows (fewer page faults while packing, fewer TLB misses while streaming).
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t align = bytes >= kHuge ? kHuge : 64;
  const size_t rounded = (bytes + align - 1) / align * align;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(align, rounded));
  if (p != nullptr && align == kHuge) madvise(p, rounded, MADV_HUGEPAGE);
  return AlignedBuffer(p);
}

}  // namespace tachyon::kernels
