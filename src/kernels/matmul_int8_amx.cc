// AMX int8 tile kernels for packed Q4_0 / Q8_0 weights at a few activation rows (batched
// decode); declarations in kernels/matmul_internal.h, design and rates in docs/kernels.md.
//
// One TDPBSSD per 32-element block b, 16 weight rows and up to 16 activation rows:
//   A = the rows' 32 int8 activation codes of block b  (tile 4 / 5: 16 rows x 32 bytes)
//   B = the block's 32 weight codes of the 16 rows, signed (tile 6 / 7: 8 rows x 64 bytes:
//       row s = 4 codes of each weight row, which is exactly one packed 64-byte step)
//   C = the exact int32 block dots (tiles 0..3: 16 x 16 int32)
// C is stored to an L1 scratch and folded into f32 accumulators with AVX-512:
//   acc[i][r] += float(C[i][r]) * dx[i][b] * dw[b][r].
// The packed codes are unsigned. Q4_0: a chunk of blocks is rewritten once as signed codes
// (nibble - 8, low then high nibbles) into an L1 buffer reused by every group of 16 activation
// rows. Q8_0 (q + 128): the packed steps are the B tiles as they are (TDPBSUD) and the fold
// subtracts 128 * the activation block's code sum, exactly in int32.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/amx.h"
#include "kernels/matmul_int8_amx.h"
#include "kernels/matmul_internal.h"
#include "kernels/pack.h"
#include "util/logging.h"

namespace tachyon::kernels::internal {
namespace {

// Blocks per chunk: the chunk's signed B tiles (kChunkBlocks x 512 B = 16 KiB) and one row
// group's activation codes (16 x 1 KiB) stay in L1 while the groups pass.
constexpr int64_t kChunkBlocks = 32;

const TileConfig& Config() {
  static const TileConfig cfg = [] {
    TileConfig c;
    for (int i = 0; i < 4; ++i) c.Set(i, 16, 64);  // C: 16 activation rows x 16 int32
    c.Set(4, 16, 32);                              // A: 16 activation rows x 32 codes
    c.Set(5, 16, 32);
    c.Set(6, 8, 64);  // B: 8 steps x (16 weight rows x 4 codes)
    c.Set(7, 8, 64);
    return c;
  }();
  return cfg;
}

template <typename T>
T* AlignedScratch(std::vector<uint8_t>& buf, size_t bytes) {
  if (buf.size() < bytes + 64) buf.resize(bytes + 64);
  auto p = reinterpret_cast<uintptr_t>(buf.data());
  return reinterpret_cast<T*>((p + 63) & ~uintptr_t{63});
}

int Steps(GgmlType type) {
  return type == GgmlType::kQ8_0 ? 8 : 4;
}

// Blocks [b0, b0 + nb) of a packed Q4_0 tile as signed B tiles of 512 bytes each: step s
// holds elements 4s.. (low nibbles) and 16 + 4s.. (high nibbles), i.e. B rows s and 4 + s.
void UnpackQ4_0(const uint8_t* codes, int64_t b0, int64_t nb, int8_t* dst) {
  const __m512i lo = _mm512_set1_epi8(0x0F);
  const __m512i eight = _mm512_set1_epi8(8);
  const uint8_t* src = codes + b0 * 256;
  for (int64_t b = 0; b < nb; ++b) {
    for (int s = 0; s < 4; ++s) {
      const __m512i v = _mm512_load_si512(src + 256 * b + 64 * s);
      const __m512i l = _mm512_sub_epi8(_mm512_and_si512(v, lo), eight);
      const __m512i h = _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), lo), eight);
      _mm512_store_si512(dst + 512 * b + 64 * s, l);
      _mm512_store_si512(dst + 512 * b + 64 * (4 + s), h);
    }
  }
}

// acc[i] += float(c[i] - off[i]) * dx[i] * dw for the group's kR activation rows (kOff: the
// B codes were unsigned Q8_0 codes, off = 128 * the activation block's code sum).
template <int kR, bool kOff>
inline void Fold(__m512* acc, const int32_t* c, const float* dx, const int32_t* off,
                 const uint16_t* dw16) {
  const __m512 dw =
      _mm512_maskz_cvtph_ps(0xFFFF, _mm256_load_si256(reinterpret_cast<const __m256i*>(dw16)));
#pragma GCC unroll 16
  for (int i = 0; i < kR; ++i) {
    __m512i ci = _mm512_load_si512(c + 16 * i);
    if constexpr (kOff) ci = _mm512_sub_epi32(ci, _mm512_set1_epi32(off[i]));
    const __m512 v = _mm512_maskz_cvtepi32_ps(0xFFFF, ci);
    acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(v, _mm512_set1_ps(dx[i])), dw, acc[i]);
  }
}

// The tile multiply of one block: signed x signed, or (kOff) signed x unsigned codes.
#define TACHYON_DP(c, a, b)  \
  do {                       \
    if constexpr (kOff) {    \
      _tile_dpbsud(c, a, b); \
    } else {                 \
      _tile_dpbssd(c, a, b); \
    }                        \
  } while (0)

// One group of kR <= 16 activation rows over nb blocks of a chunk:
//   a: the group's codes at the chunk's first block (row stride lda; 16 rows readable);
//   dx, off: the chunk's first block's scales and (kOff) offsets, [block][row], block stride mp;
//   b: the chunk's B tiles (signed; kOff: the packed Q8_0 codes themselves);
//   dw: the chunk's first block's fp16 weight scales [block][16];
//   acc_mem: the group's accumulators [kR][16], read and written back.
//   pf: codes to prefetch (the next chunk's), pf_lines cache lines per block; null for none.
template <int kR, bool kOff>
void Group(const int8_t* a, size_t lda, const float* dx, const int32_t* off, int64_t mp,
           const int8_t* b, const uint16_t* dw, int64_t nb, float* acc_mem, int32_t* c,
           const uint8_t* pf, int pf_lines) {
  __m512 acc[kR];
#pragma GCC unroll 16
  for (int i = 0; i < kR; ++i) acc[i] = _mm512_load_ps(acc_mem + 16 * i);
  int64_t k = 0;
  // Four blocks per pass: the multiplies of blocks k + 2, k + 3 are issued before blocks
  // k, k + 1 are folded, so the tile unit and the AVX-512 folding overlap.
  for (; k + 4 <= nb; k += 4) {
    if (pf != nullptr) {
      for (int q = 0; q < 4 * pf_lines; ++q)
        _mm_prefetch(reinterpret_cast<const char*>(pf + 64 * (k * pf_lines + q)), _MM_HINT_T0);
    }
    _tile_zero(0);
    _tile_zero(1);
    _tile_loadd(4, a + 32 * k, lda);
    _tile_loadd(6, b + 512 * k, 64);
    TACHYON_DP(0, 4, 6);
    _tile_loadd(5, a + 32 * (k + 1), lda);
    _tile_loadd(7, b + 512 * (k + 1), 64);
    TACHYON_DP(1, 5, 7);
    _tile_stored(0, c, 64);
    _tile_stored(1, c + 256, 64);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, a + 32 * (k + 2), lda);
    _tile_loadd(6, b + 512 * (k + 2), 64);
    TACHYON_DP(2, 4, 6);
    _tile_loadd(5, a + 32 * (k + 3), lda);
    _tile_loadd(7, b + 512 * (k + 3), 64);
    TACHYON_DP(3, 5, 7);
    Fold<kR, kOff>(acc, c, dx + k * mp, off + k * mp, dw + 16 * k);
    Fold<kR, kOff>(acc, c + 256, dx + (k + 1) * mp, off + (k + 1) * mp, dw + 16 * (k + 1));
    _tile_stored(2, c + 512, 64);
    _tile_stored(3, c + 768, 64);
    Fold<kR, kOff>(acc, c + 512, dx + (k + 2) * mp, off + (k + 2) * mp, dw + 16 * (k + 2));
    Fold<kR, kOff>(acc, c + 768, dx + (k + 3) * mp, off + (k + 3) * mp, dw + 16 * (k + 3));
  }
  for (; k < nb; ++k) {
    _tile_zero(0);
    _tile_loadd(4, a + 32 * k, lda);
    _tile_loadd(6, b + 512 * k, 64);
    TACHYON_DP(0, 4, 6);
    _tile_stored(0, c, 64);
    Fold<kR, kOff>(acc, c, dx + k * mp, off + k * mp, dw + 16 * k);
  }
#pragma GCC unroll 16
  for (int i = 0; i < kR; ++i) _mm512_store_ps(acc_mem + 16 * i, acc[i]);
}

#undef TACHYON_DP

using GroupFn = void (*)(const int8_t*, size_t, const float*, const int32_t*, int64_t,
                         const int8_t*, const uint16_t*, int64_t, float*, int32_t*, const uint8_t*,
                         int);

template <bool kOff, int... kR>
constexpr std::array<GroupFn, sizeof...(kR)> MakeGroups(std::integer_sequence<int, kR...>) {
  return {Group<kR + 1, kOff>...};
}
// [kOff][rows - 1]
constexpr std::array<GroupFn, 16> kGroups[2] = {
    MakeGroups<false>(std::make_integer_sequence<int, 16>{}),
    MakeGroups<true>(std::make_integer_sequence<int, 16>{})};

}  // namespace

bool AmxInt8Supports(const Weight& w) {
  return w.packed != nullptr && (w.type == GgmlType::kQ4_0 || w.type == GgmlType::kQ8_0);
}

// Activation buffer (AmxInt8Act): codes [mp][lda], float scales [nb][mp], then int32 offsets
// [nb][mp] = 128 * the sum of the block's codes (the Q8_0 fold subtracts them).
AmxInt8Act AmxInt8Layout(int64_t cols, int64_t m) {
  AmxInt8Act l;
  l.nb = cols / 32;
  l.mp = (m + 15) / 16 * 16;
  // Rows padded to a cache line, plus one so the 16 rows of an A tile do not share an L1 set.
  l.lda = static_cast<size_t>((l.nb * 32 + 63) / 64 * 64 + 64);
  l.bytes = l.lda * static_cast<size_t>(l.mp) +
            static_cast<size_t>(l.nb) * static_cast<size_t>(l.mp) * (sizeof(float) + 4);
  return l;
}

void AmxInt8ConvertRows(const float* x, int64_t cols, int64_t m, int64_t i0, int64_t i1,
                        uint8_t* act) {
  const AmxInt8Act l = AmxInt8Layout(cols, m);
  auto* dx = reinterpret_cast<float*>(act + l.lda * static_cast<size_t>(l.mp));
  int32_t* off = reinterpret_cast<int32_t*>(dx + l.nb * l.mp);
  // The kQ8_32 quantizer of the other int8 kernels (identical codes and scales), then its
  // interleaved halves put back in block order.
  const QuantizeActFn quantize = QuantizeActAvx512(ActFormat::kQ8_32);
  thread_local std::vector<uint8_t> tmp_buf;
  uint8_t* tmp = AlignedScratch<uint8_t>(tmp_buf, ActRowBytes(ActFormat::kQ8_32, cols));
  for (int64_t i = i0; i < i1; ++i) {
    auto* o = reinterpret_cast<int8_t*>(act + static_cast<size_t>(i) * l.lda);
    if (i >= m) {
      std::memset(o, 0, l.lda);
      for (int64_t b = 0; b < l.nb; ++b) {
        dx[b * l.mp + i] = 0.0f;
        off[b * l.mp + i] = 0;
      }
      continue;
    }
    quantize(x + i * cols, cols, tmp);
    const Q8Row32 q = ViewQ8Row32(tmp, cols);
    for (int64_t b = 0; b < l.nb; ++b) {
      const int64_t g = b / 4, j = b % 4;
      std::memcpy(o + 32 * b, q.qs + 128 * g + 16 * j, 16);
      std::memcpy(o + 32 * b + 16, q.qs + 128 * g + 64 + 16 * j, 16);
      dx[b * l.mp + i] = q.d4[16 * g + 4 * j];
      int32_t sum = 0;
      for (int e = 0; e < 32; ++e) sum += o[32 * b + e];
      off[b * l.mp + i] = 128 * sum;
    }
    std::memset(o + 32 * l.nb, 0, l.lda - static_cast<size_t>(32 * l.nb));
  }
}

void AmxInt8RunTiles(const Weight& w, const uint8_t* act, int64_t m, float* y, int64_t t0,
                     int64_t t1) {
  if (t0 >= t1 || m <= 0) return;
  CHECK(AmxInt8Supports(w)) << "AmxInt8RunTiles: not a packed Q4_0 / Q8_0 weight";
  const AmxInt8Act l = AmxInt8Layout(w.cols, m);
  const auto* codes_a = reinterpret_cast<const int8_t*>(act);
  const auto* dx = reinterpret_cast<const float*>(act + l.lda * static_cast<size_t>(l.mp));
  const auto* off = reinterpret_cast<const int32_t*>(dx + l.nb * l.mp);
  // Q8_0 multiplies its packed (unsigned) codes as they are and subtracts the offset in the
  // fold; Q4_0 rewrites each chunk's nibbles as signed codes first.
  const bool direct = w.type == GgmlType::kQ8_0;
  const size_t tile_bytes = PackedTileBytes(w.type, w.cols);
  const int steps = Steps(w.type);
  const size_t code_bytes = static_cast<size_t>(l.nb) * steps * 64;
  thread_local std::vector<uint8_t> b_buf, acc_buf, c_buf;
  auto* bt = AlignedScratch<int8_t>(b_buf, kChunkBlocks * 512);
  auto* acc = AlignedScratch<float>(acc_buf, static_cast<size_t>(l.mp) * 16 * sizeof(float));
  auto* c = AlignedScratch<int32_t>(c_buf, 4 * 1024);
  LoadTileConfig(Config());
  for (int64_t t = t0; t < t1; ++t) {
    const uint8_t* tile = w.packed + static_cast<size_t>(t) * tile_bytes;
    const auto* dw = reinterpret_cast<const uint16_t*>(tile + code_bytes);
    std::memset(acc, 0, static_cast<size_t>(l.mp) * 16 * sizeof(float));
    for (int64_t b0 = 0; b0 < l.nb; b0 += kChunkBlocks) {
      const int64_t nb = std::min(kChunkBlocks, l.nb - b0);
      const int8_t* bsrc = bt;
      if (direct) {
        bsrc = reinterpret_cast<const int8_t*>(tile) + b0 * 512;
      } else {
        UnpackQ4_0(tile, b0, nb, bt);
      }
      // The first group prefetches the codes of the next chunk (or of the next tile's first),
      // so the weight stream overlaps the tile multiplies.
      const uint8_t* pf = nullptr;
      if (b0 + nb < l.nb) {
        pf = tile + static_cast<size_t>(b0 + nb) * steps * 64;
      } else if (t + 1 < t1) {
        pf = tile + tile_bytes;
      }
      for (int64_t i = 0; i < m; i += 16) {
        const int r = static_cast<int>(std::min<int64_t>(16, m - i));
        kGroups[direct][r - 1](codes_a + static_cast<size_t>(i) * l.lda + 32 * b0, l.lda,
                               dx + b0 * l.mp + i, off + b0 * l.mp + i, l.mp, bsrc, dw + 16 * b0,
                               nb, acc + 16 * i, c, i == 0 ? pf : nullptr, steps);
      }
    }
    const int nrows = static_cast<int>(std::min<int64_t>(kPackRows, w.rows - t * kPackRows));
    for (int64_t i = 0; i < m; ++i)
      std::memcpy(y + i * w.rows + t * kPackRows, acc + 16 * i,
                  static_cast<size_t>(nrows) * sizeof(float));
  }
  // Hand the tile state back, so a context switch does not save 8 KiB of tiles.
  ReleaseTiles();
}

}  // namespace tachyon::kernels::internal
