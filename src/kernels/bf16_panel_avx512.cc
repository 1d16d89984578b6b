// AVX-512 bf16 weight panels (kernels/bf16_panel.h): byte-identical to the scalar reference.
//
// Two shapes of work, both ending in vcvtne2ps2bf16 (two float vectors -> 32 bf16, round to
// nearest even, the reference's F32ToBf16 for every value a quantized type can produce):
//
// * Packed Q4_0 / Q8_0 / Q4_K / Q6_K (kernels/pack.h): one 64-byte code step already holds 4
//   consecutive codes of each of the 16 rows ([row][4]). 16 code bytes (4 rows) widen to 16
//   int32 lanes; the values are made in float with the row scales broadcast 4 lanes per row;
//   two vcvtne2ps2bf16 give rows 0-7 and 8-15 as [row][4] bf16, and two vpermt2d pick the
//   even and odd 32-bit pairs: the panel's pair rows (k, k+1) and (k+2, k+3). No transpose.
// * Row-major data (F32, F16, BF16 and the GGUF block layouts): each of the 16 rows gives 32
//   consecutive values as one vector of 16 bf16 pairs; a 16x16 transpose of 32-bit pairs
//   (4 shuffle stages) turns them into 16 pair rows of the panel.
//
// Exactness: the float operations are the reference's (dequantize.cc), in its order and with
// its operands, one rounding each: the _round forms of mul/sub/add are builtins GCC never
// contracts into an FMA (-mfma is on for this file). 4-bit codes become floats with a vpermps
// table lookup (q - 8, or q). Quantized values are never subnormal (scales are fp16 times
// small integers), so vcvtne2ps2bf16 treating subnormal inputs as zero cannot differ from the
// reference there; F32 rows holding a subnormal take the scalar conversion for that chunk.
#include "kernels/simd_avx512.h"  // first: see there

#include <algorithm>
#include <cstring>

#include "kernels/bf16_panel.h"
#include "kernels/bf16_panel_internal.h"
#include "kernels/pack.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"

namespace tachyon::kernels::internal {
namespace {

constexpr int kRows = 16;        // weight rows per panel (one B tile's columns)
constexpr int64_t kTileK = 32;   // inputs per B tile
constexpr int kTileElems = 512;  // bf16 per B tile (16 pair rows x 32)

inline __m512 Mul(__m512 a, __m512 b) {
  return _mm512_mul_round_ps(a, b, _MM_FROUND_CUR_DIRECTION);
}
inline __m512 Sub(__m512 a, __m512 b) {
  return _mm512_sub_round_ps(a, b, _MM_FROUND_CUR_DIRECTION);
}
inline __m512 Add(__m512 a, __m512 b) {
  return _mm512_add_round_ps(a, b, _MM_FROUND_CUR_DIRECTION);
}

// 32 bf16: lanes 0..15 from lo, 16..31 from hi.
inline __m512i ToBf16(__m512 lo, __m512 hi) {
  return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

inline __m512 LoadFp16x16(const void* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(static_cast<const __m256i*>(p)));
}
// vcvtph2ps: exact for every half; it quiets a signalling NaN, which the multiply by the
// scale that follows would do anyway, so the bytes still equal the reference's.
inline float Half(uint16_t h) {
  return _cvtsh_ss(h);
}
inline float Fp16At(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return Half(h);
}
inline __m512i U8x16(const uint8_t* p) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m512i I8x16(const void* p) {
  return _mm512_cvtepi8_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p)));
}

// float(q - 8) and float(q) for the 4-bit code q in the low 4 bits of each lane.
inline __m512 Q4Minus8(__m512i v) {
  return _mm512_permutexvar_ps(
      v, _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7));
}
inline __m512 Q4Value(__m512i v) {
  return _mm512_permutexvar_ps(
      v, _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
}

// ---- packed layouts -------------------------------------------------------------------------

// A tile's codes are one stream: fetch 1 KiB ahead (as the decode kernels do), so panels of
// weights that come from memory rather than cache do not wait on each line.
constexpr int kPrefetchAhead = 1024;
inline void Prefetch(const uint8_t* p) {
  _mm_prefetch(reinterpret_cast<const char*>(p) + kPrefetchAhead, _MM_HINT_T0);
}

// Per-row values (lane r = row r) to the [row][4] order of group g (rows 4g .. 4g + 3).
inline __m512 Spread4(__m512 per_row, int g) {
  const __m512i idx = _mm512_add_epi32(
      _mm512_set1_epi32(4 * g), _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3));
  return _mm512_permutexvar_ps(idx, per_row);
}

// f[g]: rows 4g .. 4g + 3, 4 consecutive inputs each ([row][4]). Writes the two pair rows
// (k, k + 1) and (k + 2, k + 3) at dst and dst + 32.
inline void Emit4(const __m512 f[4], uint16_t* dst) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __m512i a = ToBf16(f[0], f[1]);  // rows 0..7: 32-bit pair 2r + h = (4s + 2h, 4s + 2h + 1)
  const __m512i b = ToBf16(f[2], f[3]);  // rows 8..15
  _mm512_storeu_si512(dst, _mm512_permutex2var_epi32(a, even, b));
  _mm512_storeu_si512(dst + 32, _mm512_permutex2var_epi32(a, odd, b));
}

// Each kernel writes block b (kBlock inputs, kBlock / 32 B tiles) of a packed tile to out.
// nb = blocks per row.

void PackedQ4_0(const uint8_t* tile, int64_t nb, int64_t b, uint16_t* out) {
  const uint8_t* codes = tile + b * 256;
  const __m512 d = LoadFp16x16(tile + nb * 256 + b * 32);
  __m512 dg[4];
#pragma GCC unroll 8
  for (int g = 0; g < 4; ++g) dg[g] = Spread4(d, g);
#pragma GCC unroll 8
  for (int s = 0; s < 4; ++s) {
    // Step s: low nibbles are inputs 4s .. 4s + 3, high nibbles 16 + 4s .. 16 + 4s + 3.
    Prefetch(codes + 64 * s);
    __m512 lo[4], hi[4];
#pragma GCC unroll 8
    for (int g = 0; g < 4; ++g) {
      const __m512i v = U8x16(codes + 64 * s + 16 * g);
      lo[g] = Mul(dg[g], Q4Minus8(v));
      hi[g] = Mul(dg[g], Q4Minus8(_mm512_srli_epi32(v, 4)));
    }
    Emit4(lo, out + 64 * s);
    Emit4(hi, out + 256 + 64 * s);
  }
}

void PackedQ8_0(const uint8_t* tile, int64_t nb, int64_t b, uint16_t* out) {
  const uint8_t* codes = tile + b * 512;
  const __m512 d = LoadFp16x16(tile + nb * 512 + b * 32);
  // Codes are stored XOR 0x80: sign-extending the stored byte and flipping bits 7..31 gives q.
  const __m512i flip = _mm512_set1_epi32(static_cast<int>(0xFFFFFF80u));
  __m512 dg[4];
#pragma GCC unroll 8
  for (int g = 0; g < 4; ++g) dg[g] = Spread4(d, g);
#pragma GCC unroll 8
  for (int s = 0; s < 8; ++s) {
    Prefetch(codes + 64 * s);
    __m512 f[4];
#pragma GCC unroll 8
    for (int g = 0; g < 4; ++g) {
      const __m512i q = _mm512_xor_si512(I8x16(codes + 64 * s + 16 * g), flip);
      f[g] = Mul(dg[g], _mm512_cvtepi32_ps(q));
    }
    Emit4(f, out + 64 * s);
  }
}

// ds * q - dm with the reference's two roundings, or fused: ds = d * scale (11 x 6 significant
// bits) times a 4-bit q is exact in float, so the reference's first rounding does nothing and
// one FMA gives the same bits (signed zeros included) -- when d and dmin are finite; a
// super-block with an infinite or NaN scale takes the unfused path (NaN payloads).
template <bool kFused>
inline __m512 ScaleMin(__m512 ds, __m512 q, __m512 dm) {
  return kFused ? _mm512_fmsub_ps(ds, q, dm) : Sub(Mul(ds, q), dm);
}
inline bool AllFinite(__m512 a, __m512 b) {
  return (_mm512_fpclass_ps_mask(a, 0x99) | _mm512_fpclass_ps_mask(b, 0x99)) == 0;  // NaN, inf
}

template <bool kFused>
void PackedQ4_KImpl(const uint8_t* codes, const uint8_t* meta, __m512 d, __m512 dmin,
                    uint16_t* out) {
#pragma GCC unroll 8
  for (int c = 0; c < 4; ++c) {
    // Sub-blocks 2c (low nibbles) and 2c + 1 (high nibbles): d * scale, dmin * min per row.
    const __m512 s_lo = Mul(d, _mm512_cvtepi32_ps(U8x16(meta + 16 * (2 * c))));
    const __m512 s_hi = Mul(d, _mm512_cvtepi32_ps(U8x16(meta + 16 * (2 * c + 1))));
    const __m512 m_lo = Mul(dmin, _mm512_cvtepi32_ps(U8x16(meta + 128 + 16 * (2 * c))));
    const __m512 m_hi = Mul(dmin, _mm512_cvtepi32_ps(U8x16(meta + 128 + 16 * (2 * c + 1))));
    __m512 sl[4], sh[4], ml[4], mh[4];
#pragma GCC unroll 8
    for (int g = 0; g < 4; ++g) {
      sl[g] = Spread4(s_lo, g);
      sh[g] = Spread4(s_hi, g);
      ml[g] = Spread4(m_lo, g);
      mh[g] = Spread4(m_hi, g);
    }
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      const uint8_t* step = codes + 64 * (8 * c + s);
      Prefetch(step);
      __m512 lo[4], hi[4];
#pragma GCC unroll 8
      for (int g = 0; g < 4; ++g) {
        const __m512i v = U8x16(step + 16 * g);
        lo[g] = ScaleMin<kFused>(sl[g], Q4Value(v), ml[g]);
        hi[g] = ScaleMin<kFused>(sh[g], Q4Value(_mm512_srli_epi32(v, 4)), mh[g]);
      }
      Emit4(lo, out + (2 * c) * kTileElems + 64 * s);
      Emit4(hi, out + (2 * c + 1) * kTileElems + 64 * s);
    }
  }
}

void PackedQ4_K(const uint8_t* tile, int64_t nb, int64_t b, uint16_t* out) {
  const uint8_t* codes = tile + b * 2048;
  const uint8_t* meta = tile + nb * 2048 + b * 320;  // scale[8][16], min[8][16], d, dmin
  const __m512 d = LoadFp16x16(meta + 256), dmin = LoadFp16x16(meta + 288);
  if (AllFinite(d, dmin)) {
    PackedQ4_KImpl<true>(codes, meta, d, dmin, out);
  } else {
    PackedQ4_KImpl<false>(codes, meta, d, dmin, out);
  }
}

void PackedQ6_K(const uint8_t* tile, int64_t nb, int64_t b, uint16_t* out) {
  const uint8_t* codes = tile + b * 3072;
  const uint8_t* meta = tile + nb * 3072 + b * 288;  // int8 scale[16][16], d
  const __m512 d = LoadFp16x16(meta + 256);
  const __m512i m0f = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  const __m512i k32 = _mm512_set1_epi8(32);
  for (int g16 = 0; g16 < 16; ++g16) {
    // Sub-block g16: inputs 16 g16 .. 16 g16 + 15 = B tile g16 / 2, pair rows from 8 (g16 % 2).
    // The 6-bit codes of its 4 quarters (inputs 4i .. 4i + 3 of the 16 rows) are assembled
    // 64 at a time in bytes, minus 32 (int8), and widened from a small L1 buffer.
    const uint8_t* step = codes + 64 * 3 * g16;
#pragma GCC unroll 4
    for (int i = 0; i < 3; ++i) Prefetch(step + 64 * i);
    const __m512i a = _mm512_loadu_si512(step), c = _mm512_loadu_si512(step + 64);
    const __m512i h = _mm512_loadu_si512(step + 128);
    // lo | (hi2 moved to bits 4..5), ternlog A | (B & C); 16-bit shifts only leak bits that the
    // masks drop.
    auto q6 = [&](__m512i lo, __m512i hi_at4) {
      return _mm512_sub_epi8(_mm512_ternarylogic_epi32(lo, hi_at4, m30, 0xF8), k32);
    };
    alignas(64) int8_t q[4][64];
    _mm512_store_si512(q[0], q6(_mm512_and_si512(a, m0f), _mm512_slli_epi16(h, 4)));
    _mm512_store_si512(q[1],
                       q6(_mm512_and_si512(_mm512_srli_epi16(a, 4), m0f), _mm512_slli_epi16(h, 2)));
    _mm512_store_si512(q[2], q6(_mm512_and_si512(c, m0f), h));
    _mm512_store_si512(q[3],
                       q6(_mm512_and_si512(_mm512_srli_epi16(c, 4), m0f), _mm512_srli_epi16(h, 2)));
    const __m512 s = Mul(d, _mm512_cvtepi32_ps(I8x16(meta + 16 * g16)));
    __m512 sg[4];
#pragma GCC unroll 8
    for (int g = 0; g < 4; ++g) sg[g] = Spread4(s, g);
    uint16_t* dst = out + (g16 / 2) * kTileElems + (g16 % 2) * 256;
#pragma GCC unroll 8
    for (int i = 0; i < 4; ++i) {
      __m512 f[4];
#pragma GCC unroll 8
      for (int g = 0; g < 4; ++g) f[g] = Mul(sg[g], _mm512_cvtepi32_ps(I8x16(q[i] + 16 * g)));
      Emit4(f, dst + 64 * i);
    }
  }
}

using PackedKernel = void (*)(const uint8_t* tile, int64_t nb, int64_t b, uint16_t* out);

// Zeroes rows >= nrows of `pairs` pair rows (the packed layout pads a partial tile with zero
// bytes, which do not all decode to +0).
void ZeroRowsFrom(int nrows, int64_t pairs, uint16_t* dst) {
  const __mmask16 keep = Mask16(nrows);
  for (int64_t p = 0; p < pairs; ++p) {
    _mm512_storeu_si512(dst + 32 * p,
                        _mm512_maskz_mov_epi32(keep, _mm512_loadu_si512(dst + 32 * p)));
  }
}

template <PackedKernel kKernel, int64_t kBlock>
void PackedPanel(const Weight& w, int64_t t, int64_t k0, int64_t kc, uint16_t* dst) {
  const uint8_t* tile = w.packed + static_cast<size_t>(t) * PackedTileBytes(w.type, w.cols);
  const int64_t nb = w.cols / kBlock, b0 = k0 / kBlock;
  const int64_t kvalid = std::min(k0 + kc, w.cols) - k0;  // a multiple of 32
  const int64_t full = kvalid / kBlock, rem = kvalid % kBlock;
  for (int64_t i = 0; i < full; ++i) kKernel(tile, nb, b0 + i, dst + i * kBlock * kRows);
  if (rem > 0) {
    // A K-quant super-block cut by the range: decode it whole, keep its first rem inputs.
    alignas(64) uint16_t tmp[kBlock * kRows];
    kKernel(tile, nb, b0 + full, tmp);
    std::memcpy(dst + full * kBlock * kRows, tmp, static_cast<size_t>(rem) * kRows * 2);
  }
  std::memset(dst + kvalid * kRows, 0, static_cast<size_t>(kc - kvalid) * kRows * 2);
  const int64_t nrows = std::min<int64_t>(kRows, w.rows - kRows * t);
  if (nrows < kRows) ZeroRowsFrom(static_cast<int>(nrows), kvalid / 2, dst);
}

// ---- row-major data ---------------------------------------------------------------------

// Transposes 16 vectors of 16 32-bit lanes: r[i] lane j -> r[j] lane i.
__attribute__((always_inline)) inline void Transpose16(__m512i r[16]) {
  __m512i t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  // u[4i + e], 128-bit lane L: rows 4i .. 4i + 3 of column 4L + e.
  __m512i u[16];
#pragma GCC unroll 8
  for (int i = 0; i < 4; ++i) {
    u[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
#pragma GCC unroll 8
  for (int e = 0; e < 4; ++e) {
    const __m512i x0 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0x88);
    const __m512i x1 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0xDD);
    const __m512i y0 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0x88);
    const __m512i y1 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0xDD);
    r[e] = _mm512_shuffle_i32x4(x0, y0, 0x88);
    r[8 + e] = _mm512_shuffle_i32x4(x0, y0, 0xDD);
    r[4 + e] = _mm512_shuffle_i32x4(x1, y1, 0x88);
    r[12 + e] = _mm512_shuffle_i32x4(x1, y1, 0xDD);
  }
}

// Chunk readers: Get(row, k, n) returns 32 bf16 of one row for inputs k .. k + 31 (k a
// multiple of 32) of which the first n (n >= 1; n >= 32: all) exist; the others read as +0.

struct ChunkF32 {
  __attribute__((always_inline)) static __m512i Get(const uint8_t* row, int64_t k, int64_t n,
                                                    const float*) {
    const float* p = reinterpret_cast<const float*>(row) + k;
    __m512 lo, hi;
    if (n >= 32) {
      lo = _mm512_loadu_ps(p);
      hi = _mm512_loadu_ps(p + 16);
    } else {
      lo = _mm512_maskz_loadu_ps(Mask16(n), p);
      hi = _mm512_maskz_loadu_ps(Mask16(std::max<int64_t>(n - 16, 0)), p + 16);
    }
    // vcvtne2ps2bf16 reads subnormals as zero; the reference rounds them: do those chunks
    // (rare in real weights) one value at a time.
    if ((_mm512_fpclass_ps_mask(lo, 0x20) | _mm512_fpclass_ps_mask(hi, 0x20)) != 0) {
      alignas(64) uint16_t tmp[32];
      for (int64_t i = 0; i < 32; ++i) tmp[i] = i < n ? F32ToBf16(p[i]) : 0;
      return _mm512_load_si512(tmp);
    }
    return ToBf16(lo, hi);
  }
};

struct ChunkF16 {
  __attribute__((always_inline)) static __m512i Get(const uint8_t* row, int64_t k, int64_t n,
                                                    const float*) {
    const uint16_t* p = reinterpret_cast<const uint16_t*>(row) + k;
    if (n >= 32) return ToBf16(LoadFp16x16(p), LoadFp16x16(p + 16));  // converts from memory
    const __m512i v = _mm512_maskz_loadu_epi16(Mask32(n), p);
    return ToBf16(_mm512_cvtph_ps(_mm512_castsi512_si256(v)),
                  _mm512_cvtph_ps(_mm512_extracti64x4_epi64(v, 1)));
  }
};

struct ChunkBf16 {
  __attribute__((always_inline)) static __m512i Get(const uint8_t* row, int64_t k, int64_t n,
                                                    const float*) {
    const uint16_t* p = reinterpret_cast<const uint16_t*>(row) + k;
    const __m512i v = n >= 32 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi16(Mask32(n), p);
    // The reference goes through float: a NaN comes back with its quiet bit (0x40) set.
    // (v & 0x7FFF) + 0x7F carries into bit 15 exactly for NaNs (> 0x7F80); that bit >> 9 is
    // 0x40. No compare, so nothing here competes with the transpose's shuffle port.
    const __m512i t =
        _mm512_add_epi16(_mm512_and_si512(v, _mm512_set1_epi16(0x7FFF)), _mm512_set1_epi16(0x7F));
    return _mm512_ternarylogic_epi32(v, _mm512_srli_epi16(t, 9), _mm512_set1_epi16(0x40), 0xF8);
  }
};

struct ChunkQ4_0 {
  __attribute__((always_inline)) static __m512i Get(const uint8_t* row, int64_t k, int64_t,
                                                    const float* sc) {
    const uint8_t* blk = row + (k / 32) * sizeof(BlockQ4_0);
    const __m512 d = _mm512_set1_ps(Fp16At(blk));
    const __m512i v = U8x16(blk + 2);
    return ToBf16(Mul(d, Q4Minus8(v)), Mul(d, Q4Minus8(_mm512_srli_epi32(v, 4))));
  }
};

struct ChunkQ8_0 {
  __attribute__((always_inline)) static __m512i Get(const uint8_t* row, int64_t k, int64_t,
                                                    const float* sc) {
    const uint8_t* blk = row + (k / 32) * sizeof(BlockQ8_0);
    const __m512 d = _mm512_set1_ps(Fp16At(blk));
    return ToBf16(Mul(d, _mm512_cvtepi32_ps(I8x16(blk + 2))),
                  Mul(d, _mm512_cvtepi32_ps(I8x16(blk + 18))));
  }
};

// K-quant chunk readers take their super-block's float scales from a small table that the
// panel loop fills once per row and super-block (Scales), so a chunk costs no scalar unpacking
// and its broadcasts are loads. The products are the reference's (d * scale, dmin * min).
inline void ScaleMinTableK4(const uint8_t* scales, float d, float dmin, float* out) {
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, mn;
    UnpackScaleMinK4(scales, j, &sc, &mn);
    out[2 * j] = d * static_cast<float>(sc);
    out[2 * j + 1] = dmin * static_cast<float>(mn);
  }
}

struct ChunkQ4_K {
  static constexpr int kScales = 16;  // [sub-block][d * scale, dmin * min]
  static void Scales(const uint8_t* row, int64_t sb, float* out) {
    const auto* blk = reinterpret_cast<const BlockQ4_K*>(row) + sb;
    ScaleMinTableK4(blk->scales, Half(blk->d), Half(blk->dmin), out);
  }
  __attribute__((always_inline)) static __m512i Get(const uint8_t* row, int64_t k, int64_t,
                                                    const float* sc) {
    const auto* blk = reinterpret_cast<const BlockQ4_K*>(row) + k / 256;
    const int j = static_cast<int>(k % 256) / 32;  // sub-block
    const __m512 ds = _mm512_set1_ps(sc[2 * j]), dm = _mm512_set1_ps(sc[2 * j + 1]);
    const uint8_t* qs = blk->qs + 32 * (j / 2);
    __m512i v0 = U8x16(qs), v1 = U8x16(qs + 16);
    if (j & 1) {
      v0 = _mm512_srli_epi32(v0, 4);
      v1 = _mm512_srli_epi32(v1, 4);
    }
    return ToBf16(Sub(Mul(ds, Q4Value(v0)), dm), Sub(Mul(ds, Q4Value(v1)), dm));
  }
};

struct ChunkQ6_K {
  static constexpr int kScales = 16;  // d * scale per 16-input sub-block
  static void Scales(const uint8_t* row, int64_t sb, float* out) {
    const auto* blk = reinterpret_cast<const BlockQ6_K*>(row) + sb;
    const float d = Half(blk->d);
    for (int g = 0; g < 16; ++g) out[g] = d * static_cast<float>(blk->scales[g]);
  }
  __attribute__((always_inline)) static __m512i Get(const uint8_t* row, int64_t k, int64_t,
                                                    const float* sc) {
    const auto* blk = reinterpret_cast<const BlockQ6_K*>(row) + k / 256;
    const int j = static_cast<int>(k % 256) / 32;  // 32 inputs: half j / 4, quarter s
    const int half = j / 4, s = j % 4;
    const uint8_t* ql = blk->ql + 64 * half + 32 * (s & 1);
    const uint8_t* qh = blk->qh + 32 * half;
    const __m128i hshift = _mm_cvtsi32_si128(2 * s);
    const __m512i m30 = _mm512_set1_epi32(0x30), m0f = _mm512_set1_epi32(0xF);
    const __m512i k32 = _mm512_set1_epi32(32);
    auto value = [&](int l0) {
      __m512i lo = U8x16(ql + l0);
      lo = s < 2 ? _mm512_and_si512(lo, m0f) : _mm512_srli_epi32(lo, 4);
      const __m512i hi = _mm512_slli_epi32(_mm512_srl_epi32(U8x16(qh + l0), hshift), 4);
      const __m512i q = _mm512_ternarylogic_epi32(lo, hi, m30, 0xF8);  // lo | (hi & 0x30)
      return _mm512_cvtepi32_ps(_mm512_sub_epi32(q, k32));
    };
    return ToBf16(Mul(_mm512_set1_ps(sc[2 * j]), value(0)),
                  Mul(_mm512_set1_ps(sc[2 * j + 1]), value(16)));
  }
};

// 5-bit codes: float(q - 16) and float(q) for q in the low 5 bits of each lane.
inline __m512 Q5Minus16(__m512i v) {
  return _mm512_permutex2var_ps(
      _mm512_setr_ps(-16, -15, -14, -13, -12, -11, -10, -9, -8, -7, -6, -5, -4, -3, -2, -1), v,
      _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
}
inline __m512 Q5Value(__m512i v) {
  return _mm512_permutex2var_ps(
      _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), v,
      _mm512_setr_ps(16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31));
}

inline uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

struct ChunkQ4_1 {
  __attribute__((always_inline)) static __m512i Get(const uint8_t* row, int64_t k, int64_t,
                                                    const float* sc) {
    const uint8_t* blk = row + (k / 32) * sizeof(BlockQ4_1);
    const __m512 d = _mm512_set1_ps(Fp16At(blk)), m = _mm512_set1_ps(Fp16At(blk + 2));
    const __m512i v = U8x16(blk + 4);
    return ToBf16(Add(Mul(d, Q4Value(v)), m), Add(Mul(d, Q4Value(_mm512_srli_epi32(v, 4))), m));
  }
};

// Q5_0 / Q5_1: the 4-bit codes of qs with bit j (low nibbles) / 16 + j (high) of qh as bit 4.
inline void Q5Codes(const uint8_t* qh, const uint8_t* qs, __m512i* lo, __m512i* hi) {
  const uint32_t h = LoadU32(qh);
  const __m512i v = U8x16(qs), b4 = _mm512_set1_epi32(16);
  const __m512i l4 = _mm512_and_si512(v, _mm512_set1_epi32(0xF)), h4 = _mm512_srli_epi32(v, 4);
  *lo = _mm512_mask_or_epi32(l4, static_cast<__mmask16>(h), l4, b4);
  *hi = _mm512_mask_or_epi32(h4, static_cast<__mmask16>(h >> 16), h4, b4);
}

struct ChunkQ5_0 {
  __attribute__((always_inline)) static __m512i Get(const uint8_t* row, int64_t k, int64_t,
                                                    const float* sc) {
    const uint8_t* blk = row + (k / 32) * sizeof(BlockQ5_0);
    const __m512 d = _mm512_set1_ps(Fp16At(blk));
    __m512i lo, hi;
    Q5Codes(blk + 2, blk + 6, &lo, &hi);
    return ToBf16(Mul(d, Q5Minus16(lo)), Mul(d, Q5Minus16(hi)));
  }
};

struct ChunkQ5_1 {
  __attribute__((always_inline)) static __m512i Get(const uint8_t* row, int64_t k, int64_t,
                                                    const float* sc) {
    const uint8_t* blk = row + (k / 32) * sizeof(BlockQ5_1);
    const __m512 d = _mm512_set1_ps(Fp16At(blk)), m = _mm512_set1_ps(Fp16At(blk + 2));
    __m512i lo, hi;
    Q5Codes(blk + 4, blk + 8, &lo, &hi);
    return ToBf16(Add(Mul(d, Q5Value(lo)), m), Add(Mul(d, Q5Value(hi)), m));
  }
};

struct ChunkQ5_K {
  static constexpr int kScales = 16;  // as Q4_K
  static void Scales(const uint8_t* row, int64_t sb, float* out) {
    const auto* blk = reinterpret_cast<const BlockQ5_K*>(row) + sb;
    ScaleMinTableK4(blk->scales, Half(blk->d), Half(blk->dmin), out);
  }
  __attribute__((always_inline)) static __m512i Get(const uint8_t* row, int64_t k, int64_t,
                                                    const float* sc) {
    const auto* blk = reinterpret_cast<const BlockQ5_K*>(row) + k / 256;
    const int j = static_cast<int>(k % 256) / 32;  // sub-block
    const __m512 ds = _mm512_set1_ps(sc[2 * j]), dm = _mm512_set1_ps(sc[2 * j + 1]);
    const uint8_t* qs = blk->qs + 32 * (j / 2);
    const __m128i shift = _mm_cvtsi32_si128(4 * (j & 1));
    const __m128i hshift = _mm_cvtsi32_si128(j);
    auto value = [&](int l0) {
      const __m512i lo =
          _mm512_and_si512(_mm512_srl_epi32(U8x16(qs + l0), shift), _mm512_set1_epi32(0xF));
      const __m512i hb = _mm512_slli_epi32(_mm512_srl_epi32(U8x16(blk->qh + l0), hshift), 4);
      // lo | (hb & 16)
      const __m512i q = _mm512_ternarylogic_epi32(lo, hb, _mm512_set1_epi32(16), 0xF8);
      return Sub(Mul(ds, Q5Value(q)), dm);
    };
    return ToBf16(value(0), value(16));
  }
};

struct ChunkQ2_K {
  static constexpr int kScales = 32;  // [sub-block][d * (sc & 15), dmin * (sc >> 4)]
  static void Scales(const uint8_t* row, int64_t sb, float* out) {
    const auto* blk = reinterpret_cast<const BlockQ2_K*>(row) + sb;
    const float d = Half(blk->d), dmin = Half(blk->dmin);
    for (int g = 0; g < 16; ++g) {
      out[2 * g] = d * static_cast<float>(blk->scales[g] & 0xF);
      out[2 * g + 1] = dmin * static_cast<float>(blk->scales[g] >> 4);
    }
  }
  __attribute__((always_inline)) static __m512i Get(const uint8_t* row, int64_t k, int64_t,
                                                    const float* sc) {
    const auto* blk = reinterpret_cast<const BlockQ2_K*>(row) + k / 256;
    const int j = static_cast<int>(k % 256) / 32;  // inputs 32 j ..: half j / 4, shift 2 (j % 4)
    const uint8_t* qs = blk->qs + 32 * (j / 4);
    const __m128i shift = _mm_cvtsi32_si128(2 * (j % 4));
    auto value = [&](int l0, int g) {
      const __m512i q =
          _mm512_and_si512(_mm512_srl_epi32(U8x16(qs + l0), shift), _mm512_set1_epi32(3));
      return Sub(Mul(_mm512_set1_ps(sc[2 * g]), _mm512_cvtepi32_ps(q)),
                 _mm512_set1_ps(sc[2 * g + 1]));
    };
    return ToBf16(value(0, 2 * j), value(16, 2 * j + 1));
  }
};

// Q3_K's 6-bit scale i (0..15) without its +32 bias.
inline int Q3Scale(const uint8_t* s, int i) {
  const int lo = i < 8 ? (s[i] & 0xF) : (s[i - 8] >> 4);
  const int hi = (s[8 + (i % 4)] >> (2 * (i / 4))) & 3;
  return (lo | (hi << 4)) - 32;
}

struct ChunkQ3_K {
  static constexpr int kScales = 16;  // d * (scale - 32) per 16-input sub-block
  static void Scales(const uint8_t* row, int64_t sb, float* out) {
    const auto* blk = reinterpret_cast<const BlockQ3_K*>(row) + sb;
    const float d = Half(blk->d);
    for (int g = 0; g < 16; ++g) out[g] = d * static_cast<float>(Q3Scale(blk->scales, g));
  }
  __attribute__((always_inline)) static __m512i Get(const uint8_t* row, int64_t k, int64_t,
                                                    const float* sc) {
    const auto* blk = reinterpret_cast<const BlockQ3_K*>(row) + k / 256;
    const int j = static_cast<int>(k % 256) / 32;  // half j / 4, shift 2 (j % 4), hmask bit j
    const uint8_t* qs = blk->qs + 32 * (j / 4);
    const __m128i shift = _mm_cvtsi32_si128(2 * (j % 4));
    const __m128i hshift = _mm_cvtsi32_si128(j);
    // index q2 | hbit << 2 -> float(q2 - (hbit ? 0 : 4))
    const __m512 table = _mm512_setr_ps(-4, -3, -2, -1, 0, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0);
    auto value = [&](int l0, int g) {
      const __m512i q2 =
          _mm512_and_si512(_mm512_srl_epi32(U8x16(qs + l0), shift), _mm512_set1_epi32(3));
      const __m512i hb = _mm512_slli_epi32(_mm512_srl_epi32(U8x16(blk->hmask + l0), hshift), 2);
      const __m512i idx = _mm512_ternarylogic_epi32(q2, hb, _mm512_set1_epi32(4), 0xF8);
      return Mul(_mm512_set1_ps(sc[g]), _mm512_permutexvar_ps(idx, table));
    };
    return ToBf16(value(0, 2 * j), value(16, 2 * j + 1));
  }
};

// Scale-table floats per row and super-block a chunk reader needs (0: none).
template <typename Chunk>
constexpr int ScalesOf() {
  if constexpr (requires { Chunk::kScales; }) {
    return Chunk::kScales;
  } else {
    return 0;
  }
}

// One B tile (32 inputs) of the panel: the 16 rows' chunks, transposed. kAllRows: all 16 rows
// exist (no per-row test); n: inputs of the chunk that exist (a constant 32 for whole chunks);
// sc: the rows' scale tables, `stride` floats apart.
template <typename Chunk, bool kAllRows>
__attribute__((always_inline)) inline void RowMajorTile(const uint8_t* const* rows, int nrows,
                                                        int64_t k, int64_t n, const float* sc,
                                                        int stride, uint16_t* out) {
  // Fully unrolled so the 16 vectors stay in registers through the transpose.
  __m512i v[kRows];
#pragma GCC unroll 16
  for (int i = 0; i < kRows; ++i) {
    v[i] = (kAllRows || i < nrows) ? Chunk::Get(rows[i], k, n, sc + i * stride)
                                   : _mm512_setzero_si512();
  }
  Transpose16(v);
#pragma GCC unroll 16
  for (int p = 0; p < kRows; ++p) _mm512_storeu_si512(out + 32 * p, v[p]);
}

template <typename Chunk>
void RowMajorPanel(const Weight& w, int64_t t, int64_t k0, int64_t kc, uint16_t* dst) {
  const size_t row_bytes = w.row_bytes ? w.row_bytes : RowBytes(w.type, w.cols);
  const auto* base = static_cast<const uint8_t*>(w.data);
  const int nrows = static_cast<int>(std::min<int64_t>(kRows, w.rows - kRows * t));
  const uint8_t* rows[kRows];
  for (int n = 0; n < kRows; ++n) {
    rows[n] = base + static_cast<size_t>(kRows * t + std::min(n, nrows - 1)) * row_bytes;
  }
  constexpr int kStride = ScalesOf<Chunk>();
  alignas(64) float sc[kRows * (kStride > 0 ? kStride : 1)];
  int64_t sc_block = -1;
  auto prepare = [&](int64_t k) {
    if constexpr (kStride > 0) {
      if (k / 256 != sc_block) {
        sc_block = k / 256;
        for (int n = 0; n < nrows; ++n) Chunk::Scales(rows[n], sc_block, sc + n * kStride);
      }
    }
  };
  const int64_t kvalid = std::min(k0 + kc, w.cols) - k0;
  const int64_t chunks = (kvalid + kTileK - 1) / kTileK;
  // Whole tiles (16 rows, 32 inputs) take the branch-free path.
  const int64_t whole = nrows == kRows ? kvalid / kTileK : 0;
  for (int64_t c = 0; c < whole; ++c) {
    prepare(k0 + kTileK * c);
    RowMajorTile<Chunk, true>(rows, kRows, k0 + kTileK * c, kTileK, sc, kStride,
                              dst + c * kTileElems);
  }
  for (int64_t c = whole; c < chunks; ++c) {
    prepare(k0 + kTileK * c);
    RowMajorTile<Chunk, false>(rows, nrows, k0 + kTileK * c, kvalid - kTileK * c, sc, kStride,
                               dst + c * kTileElems);
  }
  std::memset(dst + chunks * kTileElems, 0,
              static_cast<size_t>(kc / kTileK - chunks) * kTileElems * 2);
}

// ---- hi / lo split (F32, F16) -----------------------------------------------------------

// 16 floats of a row chunk: F32 straight, F16 through vcvtph2ps (exact). Lanes past n: +0.
template <GgmlType kType>
__attribute__((always_inline)) inline __m512 SplitLoad(const uint8_t* row, int64_t k, int64_t n) {
  const __mmask16 mask = Mask16(std::clamp<int64_t>(n, 0, 16));
  if constexpr (kType == GgmlType::kF32) {
    return _mm512_maskz_loadu_ps(mask, reinterpret_cast<const float*>(row) + k);
  } else {
    return _mm512_cvtph_ps(
        _mm256_maskz_loadu_epi16(mask, reinterpret_cast<const uint16_t*>(row) + k));
  }
}

// Float value of 16 bf16 (the low or high 256 bits of a ToBf16 result).
inline __m512 Bf16Floats(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// One row's 32 inputs k .. k + 31 (n of them exist) as hi and lo bf16 vectors, the bytes of
// DequantPanelBf16SplitReference.
// hi = bf16(f0 | f1) (32 values, f0 in the low half), and f - float(hi) for each half (+0
// where hi is Inf / NaN: fpclass 0x99 = QNaN, +Inf, -Inf, SNaN).
__attribute__((always_inline)) inline __m512i SplitHi(__m512 f0, __m512 f1, __m512* d0,
                                                      __m512* d1) {
  const __m512i h = ToBf16(f0, f1);
  const __m512 h0 = Bf16Floats(_mm512_castsi512_si256(h));
  const __m512 h1 = Bf16Floats(_mm512_extracti64x4_epi64(h, 1));
  const __mmask16 fin0 = static_cast<__mmask16>(~_mm512_fpclass_ps_mask(h0, 0x99));
  const __mmask16 fin1 = static_cast<__mmask16>(~_mm512_fpclass_ps_mask(h1, 0x99));
  *d0 = _mm512_maskz_sub_round_ps(fin0, f0, h0, _MM_FROUND_CUR_DIRECTION);
  *d1 = _mm512_maskz_sub_round_ps(fin1, f1, h1, _MM_FROUND_CUR_DIRECTION);
  return h;
}

template <GgmlType kType>
__attribute__((always_inline)) inline void SplitChunk(const uint8_t* row, int64_t k, int64_t n,
                                                      __m512i* hi, __m512i* lo) {
  const __m512 f0 = SplitLoad<kType>(row, k, n), f1 = SplitLoad<kType>(row, k + 16, n - 16);
  __m512 d0, d1;
  const __m512i h = SplitHi(f0, f1, &d0, &d1);
  if constexpr (kType == GgmlType::kF32) {
    // vcvtne2ps2bf16 reads subnormals as zero, the reference rounds them: F32 inputs or
    // differences below 2^-126 (never from F16, whose steps are >= 2^-24) go one at a time.
    if ((_mm512_fpclass_ps_mask(f0, 0x20) | _mm512_fpclass_ps_mask(f1, 0x20) |
         _mm512_fpclass_ps_mask(d0, 0x20) | _mm512_fpclass_ps_mask(d1, 0x20)) != 0) {
      alignas(64) uint16_t th[32], tl[32];
      const float* p = reinterpret_cast<const float*>(row) + k;
      for (int64_t i = 0; i < 32; ++i) {
        th[i] = i < n ? F32ToBf16(p[i]) : 0;
        tl[i] = i < n ? Bf16SplitLow(p[i], th[i]) : 0;
      }
      *hi = _mm512_load_si512(th);
      *lo = _mm512_load_si512(tl);
      return;
    }
  }
  *hi = h;
  *lo = ToBf16(d0, d1);
}

template <GgmlType kType>
void SplitPanel(const Weight& w, int64_t t, int64_t k0, int64_t kc, uint16_t* hi, uint16_t* lo) {
  const size_t row_bytes = w.row_bytes ? w.row_bytes : RowBytes(w.type, w.cols);
  const auto* base = static_cast<const uint8_t*>(w.data);
  const int nrows = static_cast<int>(std::min<int64_t>(kRows, w.rows - kRows * t));
  const int64_t kvalid = std::min(k0 + kc, w.cols) - k0;
  const int64_t chunks = (kvalid + kTileK - 1) / kTileK;
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t k = k0 + kTileK * c, n = std::min<int64_t>(kTileK, kvalid - kTileK * c);
    __m512i v[kRows];
    alignas(64) __m512i l[kRows];
#pragma GCC unroll 16
    for (int i = 0; i < kRows; ++i) {
      if (i < nrows) {
        SplitChunk<kType>(base + static_cast<size_t>(kRows * t + i) * row_bytes, k, n, &v[i],
                          &l[i]);
      } else {
        v[i] = l[i] = _mm512_setzero_si512();
      }
    }
    Transpose16(v);
#pragma GCC unroll 16
    for (int p = 0; p < kRows; ++p) _mm512_storeu_si512(hi + c * kTileElems + 32 * p, v[p]);
#pragma GCC unroll 16
    for (int i = 0; i < kRows; ++i) v[i] = l[i];
    Transpose16(v);
#pragma GCC unroll 16
    for (int p = 0; p < kRows; ++p) _mm512_storeu_si512(lo + c * kTileElems + 32 * p, v[p]);
  }
  const size_t tail = static_cast<size_t>(kc / kTileK - chunks) * kTileElems * 2;
  std::memset(hi + chunks * kTileElems, 0, tail);
  std::memset(lo + chunks * kTileElems, 0, tail);
}

// F16 from w.packed (kernels/pack.h): a packed F16 tile is already the panel layout in halves
// (64-byte step p = inputs 2p, 2p + 1 of the 16 rows as [row][2], inputs past cols and rows
// past w.rows +0), so every step converts where it lies: no transpose, and the tile is one
// contiguous stream that the hardware prefetchers follow (the 16 rows of w.data are 16 short
// segments per panel, w.row_bytes apart).
void SplitPanelPackedF16(const Weight& w, int64_t t, int64_t k0, int64_t kc, uint16_t* hi,
                         uint16_t* lo) {
  const int64_t kp = (w.cols + 31) / 32 * 32;
  const uint8_t* src = w.packed + static_cast<size_t>(t) * PackedTileBytes(w.type, w.cols) +
                       static_cast<size_t>(k0) * 32;
  const int64_t steps = (std::min(k0 + kc, kp) - k0) / 2;  // 64-byte steps present
#pragma GCC unroll 4
  for (int64_t p = 0; p < steps; ++p) {
    __m512 d0, d1;
    const __m512i h = SplitHi(LoadFp16x16(src + 64 * p), LoadFp16x16(src + 64 * p + 32), &d0, &d1);
    _mm512_storeu_si512(hi + 32 * p, h);
    _mm512_storeu_si512(lo + 32 * p, ToBf16(d0, d1));
  }
  const size_t tail = static_cast<size_t>(kc / 2 - steps) * 64;
  std::memset(hi + 32 * steps, 0, tail);
  std::memset(lo + 32 * steps, 0, tail);
}

}  // namespace

bool DequantPanelBf16Avx512(const Weight& w, int64_t t, int64_t k0, int64_t kc, uint16_t* dst) {
  const bool packed = w.packed != nullptr;
  switch (w.type) {
    case GgmlType::kF32:
      RowMajorPanel<ChunkF32>(w, t, k0, kc, dst);
      return true;
    case GgmlType::kF16:  // always the GGUF layout (w.data), whatever w.packed holds
      RowMajorPanel<ChunkF16>(w, t, k0, kc, dst);
      return true;
    case GgmlType::kBF16:
      RowMajorPanel<ChunkBf16>(w, t, k0, kc, dst);
      return true;
    case GgmlType::kQ4_0:
      packed ? PackedPanel<PackedQ4_0, 32>(w, t, k0, kc, dst)
             : RowMajorPanel<ChunkQ4_0>(w, t, k0, kc, dst);
      return true;
    case GgmlType::kQ8_0:
      packed ? PackedPanel<PackedQ8_0, 32>(w, t, k0, kc, dst)
             : RowMajorPanel<ChunkQ8_0>(w, t, k0, kc, dst);
      return true;
    case GgmlType::kQ4_K:
      packed ? PackedPanel<PackedQ4_K, 256>(w, t, k0, kc, dst)
             : RowMajorPanel<ChunkQ4_K>(w, t, k0, kc, dst);
      return true;
    case GgmlType::kQ6_K:
      packed ? PackedPanel<PackedQ6_K, 256>(w, t, k0, kc, dst)
             : RowMajorPanel<ChunkQ6_K>(w, t, k0, kc, dst);
      return true;
    case GgmlType::kQ4_1:
      RowMajorPanel<ChunkQ4_1>(w, t, k0, kc, dst);
      return true;
    case GgmlType::kQ5_0:
      RowMajorPanel<ChunkQ5_0>(w, t, k0, kc, dst);
      return true;
    case GgmlType::kQ5_1:
      RowMajorPanel<ChunkQ5_1>(w, t, k0, kc, dst);
      return true;
    case GgmlType::kQ2_K:
      RowMajorPanel<ChunkQ2_K>(w, t, k0, kc, dst);
      return true;
    case GgmlType::kQ3_K:
      RowMajorPanel<ChunkQ3_K>(w, t, k0, kc, dst);
      return true;
    case GgmlType::kQ5_K:
      RowMajorPanel<ChunkQ5_K>(w, t, k0, kc, dst);
      return true;
    default:
      return false;
  }
}

bool DequantPanelBf16SplitAvx512(const Weight& w, int64_t t, int64_t k0, int64_t kc, uint16_t* hi,
                                 uint16_t* lo) {
  switch (w.type) {
    case GgmlType::kF32:
      SplitPanel<GgmlType::kF32>(w, t, k0, kc, hi, lo);
      return true;
    case GgmlType::kF16:
      if (w.packed != nullptr) {
        SplitPanelPackedF16(w, t, k0, kc, hi, lo);
      } else {
        SplitPanel<GgmlType::kF16>(w, t, k0, kc, hi, lo);
      }
      return true;
    default:
      return false;
  }
}

}  // namespace tachyon::kernels::internal
