// AVX-512 VNNI kernels for the packed 16-row layouts (kernels/pack.h).
//
// One 64-byte step of a tile holds 4 code bytes of each of the 16 rows, so
//   vpdpbusd(acc, codes, broadcast(4 activation bytes))
// adds 4 products to each row's int32 lane; a block's 8 steps give the 16 rows' block dots in
// one register. Per activation row and block the int32 dot less kOffset * sum(xq) (exact: the
// code offset costs no float work), then
//   acc += (float(isum) * dx) * dw
// with dw the 16 rows' scales (one vcvtph2ps). Q4_1 (kOffset 0) has no code offset but a
// per-block min m for each row:
//   acc += (float(isum) * dx) * dw;   acc += m * (dx * sum(xq))
// (dx * sum(xq) = 4 * s4 of the activation, exact). Q5_0 / Q5_1 are Q4_0 / Q4_1 with 5-bit
// codes: each step's nibbles get their fifth bit from the block's bit-plane step (pack.cc),
// two shifts and masks per step. Each unpacked block is used for all nx
// activation rows; the 16 outputs of a row are stored at once (masked for a partial tile).
// These are the float operations of the GEMM kernels (matmul_gemm_avx512.cc), in the same
// order, so a row's outputs are the same bits at every m (batch invariance); the K-quant
// kernels below likewise follow the GEMM's per-sub-block float sums.
#include "kernels/simd_avx512.h"  // first: see its note

#include <cstring>

#include "kernels/matmul_internal.h"
#include "kernels/pack.h"

namespace tachyon::kernels::internal {
namespace {

inline __m512i Bcast(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Bytes ahead of the current block that are prefetched (weights stream from memory at m = 1).
constexpr int kPrefetchBytes = 1024;

// kOffset * sum(xq) of a block in every lane (the code offset's term, subtracted from the
// block's int32 dots: exact), from the activation's int32 code sum at `sum` (kOffset a power
// of two: a broadcast load and a shift).
template <int kOffset>
inline __m512i OffsetTerm(const int32_t* sum) {
  static_assert(kOffset > 0 && (kOffset & (kOffset - 1)) == 0);
  return _mm512_slli_epi32(_mm512_set1_epi32(*sum), __builtin_ctz(kOffset));
}

// One block's float terms for one activation row: acc + (float(isum - offset) * dx) * dw, then
// (kOffset 0, Q4_1) + mins * (dx * sum(xq)). isum: the block's raw int32 dots.
template <int kOffset>
inline __m512 BlockTerms(__m512i isum, const Q8Row32& x, int64_t b, __m512 dw, __m512 mins,
                         __m512 acc) {
  if constexpr (kOffset > 0) isum = _mm512_sub_epi32(isum, OffsetTerm<kOffset>(x.sum + b));
  const __m512 dx = _mm512_set1_ps(x.d4[4 * b]);
  acc = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(isum), dx), dw, acc);
  if constexpr (kOffset == 0) acc = _mm512_fmadd_ps(mins, _mm512_set1_ps(4.0f * x.s4[4 * b]), acc);
  return acc;
}

// The 16 rows' fp16 values of block b at p (scales or mins), as floats.
inline __m512 BlockRows(const uint16_t* p, int64_t b) {
  return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p + b * kPackRows)));
}

// One step of a Q4 / Q5 block: the low and high nibbles of the codes v as u8 codes. kHigh
// (Q5): their fifth bits are bit 4 of each byte of *hl / *hh, which start as the bit plane
// shifted left by 4 / as it is (step 0: plane bits 0 / 4) and move right by one bit per step
// (16-bit shifts: the bits a byte keeps never cross into the other byte).
template <bool kHigh>
inline void Nibbles(__m512i v, __m512i* hl, __m512i* hh, __m512i* lo, __m512i* hi) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  *lo = _mm512_and_si512(v, m4);
  *hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
  if constexpr (kHigh) {
    const __m512i m10 = _mm512_set1_epi8(0x10);
    *lo = _mm512_or_si512(*lo, _mm512_and_si512(*hl, m10));
    *hi = _mm512_or_si512(*hi, _mm512_and_si512(*hh, m10));
    *hl = _mm512_srli_epi16(*hl, 1);
    *hh = _mm512_srli_epi16(*hh, 1);
  }
}
// The starting *hl, *hh of Nibbles from the bit-plane step at p (zeros without kHigh).
template <bool kHigh>
inline void BitPlane(const uint8_t* p, __m512i* hl, __m512i* hh) {
  *hh = kHigh ? _mm512_load_si512(p) : _mm512_setzero_si512();
  *hl = _mm512_slli_epi16(*hh, 4);
}

// kHigh: Q5 (4 code steps, then the bit-plane step).
template <int kCodeSteps, int kOffset, bool kHigh, int NX>
void TileN(int64_t k, const uint8_t* tile, const uint8_t* act, size_t stride, float* y,
           int64_t ldy, int nrows) {
  const int64_t nb = k / 32;
  constexpr int kBlockBytes = (kCodeSteps + (kHigh ? 1 : 0)) * 64;
  const auto* scales = reinterpret_cast<const uint16_t*>(tile + nb * kBlockBytes);
  const uint16_t* mins = scales + nb * kPackRows;  // Q4_1 / Q5_1 (kOffset 0) only
  Q8Row32 x[NX];
  __m512 acc[NX];
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i) {
    x[i] = ViewQ8Row32(act + i * stride, k);
    acc[i] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* codes = tile + b * kBlockBytes;
    _mm_prefetch(reinterpret_cast<const char*>(codes + kPrefetchBytes), _MM_HINT_T0);
    if constexpr (kBlockBytes > 256) {
      _mm_prefetch(reinterpret_cast<const char*>(codes + kPrefetchBytes + 256), _MM_HINT_T0);
    }
    const __m512 dw = BlockRows(scales, b);
    const __m512 mw = kOffset == 0 ? BlockRows(mins, b) : _mm512_setzero_ps();
    __m512i u[8];
    if constexpr (kCodeSteps == 4) {
      __m512i hl, hh;
      BitPlane<kHigh>(codes + 256, &hl, &hh);
#pragma GCC unroll 4
      for (int s = 0; s < 4; ++s) {
        Nibbles<kHigh>(_mm512_load_si512(codes + 64 * s), &hl, &hh, &u[s], &u[s + 4]);
      }
    } else {
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) u[s] = _mm512_load_si512(codes + 64 * s);
    }
    const int64_t xoff = 128 * (b / 4) + 16 * (b % 4);
#pragma GCC unroll 8
    for (int i = 0; i < NX; ++i) {
      const int8_t* xb = x[i].qs + xoff;
      __m512i s0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[0], Bcast(xb));
      __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[4], Bcast(xb + 64));
      s0 = _mm512_dpbusd_epi32(s0, u[1], Bcast(xb + 4));
      s1 = _mm512_dpbusd_epi32(s1, u[5], Bcast(xb + 68));
      s0 = _mm512_dpbusd_epi32(s0, u[2], Bcast(xb + 8));
      s1 = _mm512_dpbusd_epi32(s1, u[6], Bcast(xb + 72));
      s0 = _mm512_dpbusd_epi32(s0, u[3], Bcast(xb + 12));
      s1 = _mm512_dpbusd_epi32(s1, u[7], Bcast(xb + 76));
      acc[i] = BlockTerms<kOffset>(_mm512_add_epi32(s0, s1), x[i], b, dw, mw, acc[i]);
    }
  }
  const __mmask16 mask = Mask16(nrows);
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i) _mm512_mask_storeu_ps(y + i * ldy, mask, acc[i]);
}

// Two consecutive tiles (32 weight rows) against nx activation rows: each broadcast
// activation word feeds two vpdpbusd, halving the broadcast loads per multiply (prefill and
// batched decode are load-port bound otherwise). Tile B may be partial (nrows_b rows).
// No software prefetch: the two tiles' codes, scales (and Q4_1 mins) are six short
// sequential streams the hardware prefetchers follow on their own, and prefetching 1 KiB
// ahead of each tile's codes cost time at m = 1 (CPU time per token of one-thread decode on
// the AMD EPYC VM, alternating runs: SmolLM2-135M Q4_1 10.75 -> 9.96 ms, llama-1b Q4_0
// 63.8 -> 55.8 ms without it; docs/performance.md).
template <int kCodeSteps, int kOffset, bool kHigh, int NX>
void Tile2N(int64_t k, const uint8_t* ta, size_t tile_bytes, const uint8_t* act, size_t stride,
            float* y, int64_t ldy, int nrows_b) {
  const int64_t nb = k / 32;
  constexpr int kBlockBytes = (kCodeSteps + (kHigh ? 1 : 0)) * 64;
  const uint8_t* tb = ta + tile_bytes;
  const auto* sa = reinterpret_cast<const uint16_t*>(ta + nb * kBlockBytes);
  const auto* sb = reinterpret_cast<const uint16_t*>(tb + nb * kBlockBytes);
  const uint16_t* ma = sa + nb * kPackRows;  // Q4_1 / Q5_1 (kOffset 0) only
  const uint16_t* mb = sb + nb * kPackRows;
  Q8Row32 x[NX];
  __m512 acc[NX][2];
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i) {
    x[i] = ViewQ8Row32(act + i * stride, k);
    acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* ca = ta + b * kBlockBytes;
    const uint8_t* cb = tb + b * kBlockBytes;
    const int64_t xoff = 128 * (b / 4) + 16 * (b % 4);
    __m512i is[NX][2];
#pragma GCC unroll 8
    for (int i = 0; i < NX; ++i) is[i][0] = is[i][1] = _mm512_setzero_si512();
    if constexpr (kCodeSteps == 4) {
      __m512i hla, hha, hlb, hhb;
      BitPlane<kHigh>(ca + 256, &hla, &hha);
      BitPlane<kHigh>(cb + 256, &hlb, &hhb);
#pragma GCC unroll 4
      for (int st = 0; st < 4; ++st) {
        __m512i la, ha, lb, hb;
        Nibbles<kHigh>(_mm512_load_si512(ca + 64 * st), &hla, &hha, &la, &ha);
        Nibbles<kHigh>(_mm512_load_si512(cb + 64 * st), &hlb, &hhb, &lb, &hb);
#pragma GCC unroll 8
        for (int i = 0; i < NX; ++i) {
          const int8_t* xb = x[i].qs + xoff;
          const __m512i xl = Bcast(xb + 4 * st), xh = Bcast(xb + 64 + 4 * st);
          is[i][0] = _mm512_dpbusd_epi32(is[i][0], la, xl);
          is[i][1] = _mm512_dpbusd_epi32(is[i][1], lb, xl);
          is[i][0] = _mm512_dpbusd_epi32(is[i][0], ha, xh);
          is[i][1] = _mm512_dpbusd_epi32(is[i][1], hb, xh);
        }
      }
    } else {
#pragma GCC unroll 8
      for (int st = 0; st < 8; ++st) {
        const __m512i va = _mm512_load_si512(ca + 64 * st), vb = _mm512_load_si512(cb + 64 * st);
        const int off = st < 4 ? 4 * st : 64 + 4 * (st - 4);
#pragma GCC unroll 8
        for (int i = 0; i < NX; ++i) {
          const __m512i xs = Bcast(x[i].qs + xoff + off);
          is[i][0] = _mm512_dpbusd_epi32(is[i][0], va, xs);
          is[i][1] = _mm512_dpbusd_epi32(is[i][1], vb, xs);
        }
      }
    }
    const __m512 dwa = BlockRows(sa, b), dwb = BlockRows(sb, b);
    const __m512 mwa = kOffset == 0 ? BlockRows(ma, b) : _mm512_setzero_ps();
    const __m512 mwb = kOffset == 0 ? BlockRows(mb, b) : _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int i = 0; i < NX; ++i) {
      acc[i][0] = BlockTerms<kOffset>(is[i][0], x[i], b, dwa, mwa, acc[i][0]);
      acc[i][1] = BlockTerms<kOffset>(is[i][1], x[i], b, dwb, mwb, acc[i][1]);
    }
  }
  const __mmask16 mask = Mask16(nrows_b);
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i) {
    _mm512_storeu_ps(y + i * ldy, acc[i][0]);
    _mm512_mask_storeu_ps(y + i * ldy + kPackRows, mask, acc[i][1]);
  }
}

template <int kCodeSteps, int kOffset, bool kHigh = false>
void Tile2(int64_t k, const uint8_t* ta, size_t tile_bytes, const uint8_t* act, size_t stride,
           int nx, float* y, int64_t ldy, int nrows_b) {
  switch (nx) {
    case 1:
      return Tile2N<kCodeSteps, kOffset, kHigh, 1>(k, ta, tile_bytes, act, stride, y, ldy, nrows_b);
    case 2:
      return Tile2N<kCodeSteps, kOffset, kHigh, 2>(k, ta, tile_bytes, act, stride, y, ldy, nrows_b);
    case 3:
      return Tile2N<kCodeSteps, kOffset, kHigh, 3>(k, ta, tile_bytes, act, stride, y, ldy, nrows_b);
    default:
      return Tile2N<kCodeSteps, kOffset, kHigh, 4>(k, ta, tile_bytes, act, stride, y, ldy, nrows_b);
  }
}

template <int kCodeSteps, int kOffset, bool kHigh = false>
void Tile(int64_t k, const uint8_t* tile, const uint8_t* act, size_t stride, int nx, float* y,
          int64_t ldy, int nrows) {
  switch (nx) {
    case 1:
      return TileN<kCodeSteps, kOffset, kHigh, 1>(k, tile, act, stride, y, ldy, nrows);
    case 2:
      return TileN<kCodeSteps, kOffset, kHigh, 2>(k, tile, act, stride, y, ldy, nrows);
    case 3:
      return TileN<kCodeSteps, kOffset, kHigh, 3>(k, tile, act, stride, y, ldy, nrows);
    default:
      return TileN<kCodeSteps, kOffset, kHigh, 4>(k, tile, act, stride, y, ldy, nrows);
  }
}

inline __m512i Bcast32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}
inline __m512i U8x16(const uint8_t* p) {  // 16 bytes -> 16 int32 (zero-extended)
  return _mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m512 Fp16x16(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
}

// K-quants, in the float operations of the GEMM's MicroK (matmul_gemm_avx512.cc), in its
// order, so that a row's outputs do not depend on m: per super-block, tile and activation row
//   sb = sum over sub-blocks of float(dot_sub) * (d * sc_sub)      (one FMA per sub-block)
//   sb += float(csum) * cscale                                      (the mins / the code offset)
//   acc += sb * dx
// with the integer dot of each sub-block exact, csum the exact integer correction (Q4_K:
// sum_j min_j * (32-element activation sum j), cscale = -dmin; Q6_K: sum_g sc_g * bsum_g,
// cscale = -32 d) and d * sc exact in float (11 x 8 significant bits at most).

// The 16 rows' d * sc of a sub-block (sc: 16 scale codes, zero- or sign-extended to int32).
inline __m512 SubScale(__m512i sc, __m512 d) {
  return _mm512_mul_ps(_mm512_cvtepi32_ps(sc), d);
}

// Q4_K (layout in pack.cc): per super-block and activation row, 8 sub-block dots of 8
// vpdpbusd each; the mins through vpdpwssd on (min_j, min_j) pairs against the 16-element sums.
template <int NX>
void Q4KTileN(int64_t k, const uint8_t* tile, const uint8_t* act, size_t stride, float* y,
              int64_t ldy, int nrows) {
  const int64_t nb = k / 256;
  Q8Row256 x[NX];
  __m512 acc[NX];
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i) {
    x[i] = ViewQ8Row256(act + i * stride, k);
    acc[i] = _mm512_setzero_ps();
  }
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* codes = tile + b * 2048;
    const uint8_t* meta = tile + nb * 2048 + b * 320;
    const __m512 d = Fp16x16(meta + 256), dmin = Fp16x16(meta + 288);
    __m512 sb[NX];
    __m512i msum[NX];
#pragma GCC unroll 8
    for (int i = 0; i < NX; ++i) {
      sb[i] = _mm512_setzero_ps();
      msum[i] = _mm512_setzero_si512();
    }
#pragma GCC unroll 1
    for (int c = 0; c < 4; ++c) {
      const uint8_t* cc = codes + 512 * c;
      _mm_prefetch(reinterpret_cast<const char*>(cc + kPrefetchBytes), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(cc + kPrefetchBytes + 128), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(cc + kPrefetchBytes + 256), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(cc + kPrefetchBytes + 384), _MM_HINT_T0);
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {  // low nibbles: sub-block 2c; high: 2c + 1
        __m512i u[8];
#pragma GCC unroll 8
        for (int t = 0; t < 8; ++t) {
          const __m512i v = _mm512_load_si512(cc + 64 * t);
          u[t] = _mm512_and_si512(h ? _mm512_srli_epi16(v, 4) : v, m4);
        }
        const __m512 scd = SubScale(U8x16(meta + 16 * (2 * c + h)), d);
#pragma GCC unroll 8
        for (int i = 0; i < NX; ++i) {
          const int8_t* xq = x[i].qs + 256 * b + 64 * c + 32 * h;
          __m512i d0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[0], Bcast32(xq));
          __m512i d1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[1], Bcast32(xq + 4));
#pragma GCC unroll 8
          for (int t = 2; t < 8; t += 2) {
            d0 = _mm512_dpbusd_epi32(d0, u[t], Bcast32(xq + 4 * t));
            d1 = _mm512_dpbusd_epi32(d1, u[t + 1], Bcast32(xq + 4 * t + 4));
          }
          sb[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(d0, d1)), scd, sb[i]);
        }
      }
    }
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      const __m512i mn = U8x16(meta + 128 + 16 * j);
      const __m512i pair = _mm512_or_si512(mn, _mm512_slli_epi32(mn, 16));
#pragma GCC unroll 8
      for (int i = 0; i < NX; ++i) {
        msum[i] = _mm512_dpwssd_epi32(msum[i], pair, Bcast32(x[i].bsums + 16 * b + 2 * j));
      }
    }
    const __m512 cscale = _mm512_sub_ps(_mm512_setzero_ps(), dmin);
#pragma GCC unroll 8
    for (int i = 0; i < NX; ++i) {
      sb[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(msum[i]), cscale, sb[i]);
      acc[i] = _mm512_fmadd_ps(sb[i], _mm512_set1_ps(x[i].d[b]), acc[i]);
    }
  }
  const __mmask16 mask = Mask16(nrows);
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i) _mm512_mask_storeu_ps(y + i * ldy, mask, acc[i]);
}

// Q6_K: per 16-element sub-block g, 4 vpdpbusd on the rebuilt 6-bit codes (unsigned, 0..63);
// the code offset through csum = sum_g sc_g * bsum_g.
template <int NX>
void Q6KTileN(int64_t k, const uint8_t* tile, const uint8_t* act, size_t stride, float* y,
              int64_t ldy, int nrows) {
  const int64_t nb = k / 256;
  Q8Row256 x[NX];
  __m512 acc[NX];
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i) {
    x[i] = ViewQ8Row256(act + i * stride, k);
    acc[i] = _mm512_setzero_ps();
  }
  const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* codes = tile + b * 3072;
    const uint8_t* meta = tile + nb * 3072 + b * 288;
    const __m512 d = Fp16x16(meta + 256);
    __m512 sb[NX];
    __m512i csum[NX];
#pragma GCC unroll 8
    for (int i = 0; i < NX; ++i) {
      sb[i] = _mm512_setzero_ps();
      csum[i] = _mm512_setzero_si512();
    }
#pragma GCC unroll 2
    for (int g = 0; g < 16; ++g) {
      const uint8_t* cg = codes + 192 * g;
      _mm_prefetch(reinterpret_cast<const char*>(cg + kPrefetchBytes), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(cg + kPrefetchBytes + 64), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(cg + kPrefetchBytes + 128), _MM_HINT_T0);
      const __m512i n0 = _mm512_load_si512(cg), n1 = _mm512_load_si512(cg + 64);
      const __m512i h = _mm512_load_si512(cg + 128);
      const __m512i qa = _mm512_or_si512(_mm512_and_si512(n0, m4),
                                         _mm512_and_si512(_mm512_slli_epi16(h, 4), m30));
      const __m512i qb = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(n0, 4), m4),
                                         _mm512_and_si512(_mm512_slli_epi16(h, 2), m30));
      const __m512i qc = _mm512_or_si512(_mm512_and_si512(n1, m4), _mm512_and_si512(h, m30));
      const __m512i qd = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(n1, 4), m4),
                                         _mm512_and_si512(_mm512_srli_epi16(h, 2), m30));
      const __m512i sc = _mm512_cvtepi8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(meta + 16 * g)));
      const __m512 scd = SubScale(sc, d);
#pragma GCC unroll 8
      for (int i = 0; i < NX; ++i) {
        const int8_t* xq = x[i].qs + 256 * b + 16 * g;
        __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), qa, Bcast32(xq));
        dot = _mm512_dpbusd_epi32(dot, qb, Bcast32(xq + 4));
        dot = _mm512_dpbusd_epi32(dot, qc, Bcast32(xq + 8));
        dot = _mm512_dpbusd_epi32(dot, qd, Bcast32(xq + 12));
        sb[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scd, sb[i]);
        csum[i] = _mm512_add_epi32(
            csum[i], _mm512_mullo_epi32(sc, _mm512_set1_epi32(x[i].bsums[16 * b + g])));
      }
    }
    const __m512 cscale = _mm512_mul_ps(d, _mm512_set1_ps(-32.0f));
#pragma GCC unroll 8
    for (int i = 0; i < NX; ++i) {
      sb[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(csum[i]), cscale, sb[i]);
      acc[i] = _mm512_fmadd_ps(sb[i], _mm512_set1_ps(x[i].d[b]), acc[i]);
    }
  }
  const __mmask16 mask = Mask16(nrows);
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i) _mm512_mask_storeu_ps(y + i * ldy, mask, acc[i]);
}

// Two-tile K-quant kernels (32 weight rows per pass, each broadcast activation word feeds two
// vpdpbusd), at most 2 activation rows per pass to stay within the 32 vector registers.
template <int NX>
void Q4KTile2N(int64_t k, const uint8_t* ta, size_t tile_bytes, const uint8_t* act,
               size_t stride, float* y, int64_t ldy, int nrows_b) {
  const int64_t nb = k / 256;
  const uint8_t* tiles[2] = {ta, ta + tile_bytes};
  Q8Row256 x[NX];
  __m512 acc[NX][2];
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i) {
    x[i] = ViewQ8Row256(act + i * stride, k);
    acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  }
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* code[2] = {tiles[0] + b * 2048, tiles[1] + b * 2048};
    const uint8_t* meta[2] = {tiles[0] + nb * 2048 + b * 320, tiles[1] + nb * 2048 + b * 320};
    const __m512 dd[2] = {Fp16x16(meta[0] + 256), Fp16x16(meta[1] + 256)};
    __m512 sb[NX][2];
#pragma GCC unroll 8
    for (int i = 0; i < NX; ++i) sb[i][0] = sb[i][1] = _mm512_setzero_ps();
#pragma GCC unroll 1
    for (int c = 0; c < 4; ++c) {
#pragma GCC unroll 2
      for (int u = 0; u < 2; ++u) {
        _mm_prefetch(reinterpret_cast<const char*>(code[u] + 512 * c + kPrefetchBytes), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(code[u] + 512 * c + kPrefetchBytes + 128),
                     _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(code[u] + 512 * c + kPrefetchBytes + 256),
                     _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(code[u] + 512 * c + kPrefetchBytes + 384),
                     _MM_HINT_T0);
      }
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {  // low nibbles: sub-block 2c; high: 2c + 1
        __m512i d[NX][2];
#pragma GCC unroll 8
        for (int i = 0; i < NX; ++i) d[i][0] = d[i][1] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int t = 0; t < 8; ++t) {
          const __m512i va = _mm512_load_si512(code[0] + 512 * c + 64 * t);
          const __m512i vb = _mm512_load_si512(code[1] + 512 * c + 64 * t);
          const __m512i ua = _mm512_and_si512(h ? _mm512_srli_epi16(va, 4) : va, m4);
          const __m512i ub = _mm512_and_si512(h ? _mm512_srli_epi16(vb, 4) : vb, m4);
#pragma GCC unroll 8
          for (int i = 0; i < NX; ++i) {
            const __m512i xs = Bcast32(x[i].qs + 256 * b + 64 * c + 32 * h + 4 * t);
            d[i][0] = _mm512_dpbusd_epi32(d[i][0], ua, xs);
            d[i][1] = _mm512_dpbusd_epi32(d[i][1], ub, xs);
          }
        }
#pragma GCC unroll 2
        for (int u = 0; u < 2; ++u) {
          const __m512 scd = SubScale(U8x16(meta[u] + 16 * (2 * c + h)), dd[u]);
#pragma GCC unroll 8
          for (int i = 0; i < NX; ++i) {
            sb[i][u] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d[i][u]), scd, sb[i][u]);
          }
        }
      }
    }
#pragma GCC unroll 2
    for (int u = 0; u < 2; ++u) {
      __m512i msum[NX];
#pragma GCC unroll 8
      for (int i = 0; i < NX; ++i) msum[i] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        const __m512i mn = U8x16(meta[u] + 128 + 16 * j);
        const __m512i pair = _mm512_or_si512(mn, _mm512_slli_epi32(mn, 16));
#pragma GCC unroll 8
        for (int i = 0; i < NX; ++i) {
          msum[i] = _mm512_dpwssd_epi32(msum[i], pair, Bcast32(x[i].bsums + 16 * b + 2 * j));
        }
      }
      const __m512 cscale = _mm512_sub_ps(_mm512_setzero_ps(), Fp16x16(meta[u] + 288));
#pragma GCC unroll 8
      for (int i = 0; i < NX; ++i) {
        sb[i][u] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(msum[i]), cscale, sb[i][u]);
        acc[i][u] = _mm512_fmadd_ps(sb[i][u], _mm512_set1_ps(x[i].d[b]), acc[i][u]);
      }
    }
  }
  const __mmask16 mask = Mask16(nrows_b);
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i) {
    _mm512_storeu_ps(y + i * ldy, acc[i][0]);
    _mm512_mask_storeu_ps(y + i * ldy + kPackRows, mask, acc[i][1]);
  }
}

template <int NX>
void Q6KTile2N(int64_t k, const uint8_t* ta, size_t tile_bytes, const uint8_t* act,
               size_t stride, float* y, int64_t ldy, int nrows_b) {
  const int64_t nb = k / 256;
  const uint8_t* tiles[2] = {ta, ta + tile_bytes};
  Q8Row256 x[NX];
  __m512 acc[NX][2];
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i) {
    x[i] = ViewQ8Row256(act + i * stride, k);
    acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  }
  const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  for (int64_t b = 0; b < nb; ++b) {
    const __m512 dd[2] = {Fp16x16(tiles[0] + nb * 3072 + b * 288 + 256),
                          Fp16x16(tiles[1] + nb * 3072 + b * 288 + 256)};
    __m512 sb[NX][2];
    __m512i csum[NX][2];
#pragma GCC unroll 8
    for (int i = 0; i < NX; ++i) {
      sb[i][0] = sb[i][1] = _mm512_setzero_ps();
      csum[i][0] = csum[i][1] = _mm512_setzero_si512();
    }
#pragma GCC unroll 1
    for (int g = 0; g < 16; ++g) {
      __m512i q[2][4], sc[2];
#pragma GCC unroll 2
      for (int u = 0; u < 2; ++u) {
        const uint8_t* cg = tiles[u] + b * 3072 + 192 * g;
        _mm_prefetch(reinterpret_cast<const char*>(cg + kPrefetchBytes), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(cg + kPrefetchBytes + 64), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(cg + kPrefetchBytes + 128), _MM_HINT_T0);
        const __m512i n0 = _mm512_load_si512(cg), n1 = _mm512_load_si512(cg + 64);
        const __m512i h = _mm512_load_si512(cg + 128);
        q[u][0] = _mm512_or_si512(_mm512_and_si512(n0, m4),
                                  _mm512_and_si512(_mm512_slli_epi16(h, 4), m30));
        q[u][1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(n0, 4), m4),
                                  _mm512_and_si512(_mm512_slli_epi16(h, 2), m30));
        q[u][2] = _mm512_or_si512(_mm512_and_si512(n1, m4), _mm512_and_si512(h, m30));
        q[u][3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(n1, 4), m4),
                                  _mm512_and_si512(_mm512_srli_epi16(h, 2), m30));
        const uint8_t* meta = tiles[u] + nb * 3072 + b * 288;
        sc[u] = _mm512_cvtepi8_epi32(
            _mm_load_si128(reinterpret_cast<const __m128i*>(meta + 16 * g)));
      }
      const __m512 scd[2] = {SubScale(sc[0], dd[0]), SubScale(sc[1], dd[1])};
#pragma GCC unroll 8
      for (int i = 0; i < NX; ++i) {
        const int8_t* xq = x[i].qs + 256 * b + 16 * g;
        __m512i da = _mm512_setzero_si512(), db = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int a = 0; a < 4; ++a) {
          const __m512i xs = Bcast32(xq + 4 * a);
          da = _mm512_dpbusd_epi32(da, q[0][a], xs);
          db = _mm512_dpbusd_epi32(db, q[1][a], xs);
        }
        const __m512i bs = _mm512_set1_epi32(x[i].bsums[16 * b + g]);
        sb[i][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(da), scd[0], sb[i][0]);
        sb[i][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(db), scd[1], sb[i][1]);
        csum[i][0] = _mm512_add_epi32(csum[i][0], _mm512_mullo_epi32(sc[0], bs));
        csum[i][1] = _mm512_add_epi32(csum[i][1], _mm512_mullo_epi32(sc[1], bs));
      }
    }
#pragma GCC unroll 2
    for (int u = 0; u < 2; ++u) {
      const __m512 cscale = _mm512_mul_ps(dd[u], _mm512_set1_ps(-32.0f));
#pragma GCC unroll 8
      for (int i = 0; i < NX; ++i) {
        sb[i][u] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(csum[i][u]), cscale, sb[i][u]);
        acc[i][u] = _mm512_fmadd_ps(sb[i][u], _mm512_set1_ps(x[i].d[b]), acc[i][u]);
      }
    }
  }
  const __mmask16 mask = Mask16(nrows_b);
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i) {
    _mm512_storeu_ps(y + i * ldy, acc[i][0]);
    _mm512_mask_storeu_ps(y + i * ldy + kPackRows, mask, acc[i][1]);
  }
}

using Tile2Fn = void (*)(int64_t, const uint8_t*, size_t, const uint8_t*, size_t, float*,
                         int64_t, int);
// nx activation rows in passes of at most two.
template <Tile2Fn K1, Tile2Fn K2>
void KTile2(int64_t k, const uint8_t* ta, size_t tile_bytes, const uint8_t* act, size_t stride,
            int nx, float* y, int64_t ldy, int nrows_b) {
  for (int i = 0; i < nx; i += 2) {
    const uint8_t* a = act + static_cast<size_t>(i) * stride;
    if (nx - i >= 2) {
      K2(k, ta, tile_bytes, a, stride, y + i * ldy, ldy, nrows_b);
    } else {
      K1(k, ta, tile_bytes, a, stride, y + i * ldy, ldy, nrows_b);
    }
  }
}

template <int NX>
struct Q4KK {
  static void Run(int64_t k, const uint8_t* t, const uint8_t* a, size_t s, float* y, int64_t l,
                  int n) {
    Q4KTileN<NX>(k, t, a, s, y, l, n);
  }
};
template <int NX>
struct Q6KK {
  static void Run(int64_t k, const uint8_t* t, const uint8_t* a, size_t s, float* y, int64_t l,
                  int n) {
    Q6KTileN<NX>(k, t, a, s, y, l, n);
  }
};

// Q6_K: the two-tile kernel pays off at one activation row (decode: broadcasts halve); with
// more rows the one-tile kernel, which shares each tile's code rebuild over 4 rows, is faster.
void Q6KTile2(int64_t k, const uint8_t* ta, size_t tile_bytes, const uint8_t* act,
              size_t stride, int nx, float* y, int64_t ldy, int nrows_b) {
  if (nx == 1) return Q6KTile2N<1>(k, ta, tile_bytes, act, stride, y, ldy, nrows_b);
  PackedByNx<Q6KK>(k, ta, act, stride, nx, y, ldy, static_cast<int>(kPackRows));
  PackedByNx<Q6KK>(k, ta + tile_bytes, act, stride, nx, y + kPackRows, ldy, nrows_b);
}

}  // namespace

Packed2Fn Packed2Avx512(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
      return Tile2<4, 8>;
    case GgmlType::kQ4_1:
      return Tile2<4, 0>;
    case GgmlType::kQ5_0:
      return Tile2<4, 16, true>;
    case GgmlType::kQ5_1:
      return Tile2<4, 0, true>;
    case GgmlType::kQ8_0:
      return Tile2<8, 128>;
    case GgmlType::kQ4_K:
      return KTile2<Q4KTile2N<1>, Q4KTile2N<2>>;
    case GgmlType::kQ6_K:
      return Q6KTile2;
    default:
      return nullptr;
  }
}

PackedFn PackedAvx512(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
      return Tile<4, 8>;
    case GgmlType::kQ4_1:
      return Tile<4, 0>;
    case GgmlType::kQ5_0:
      return Tile<4, 16, true>;
    case GgmlType::kQ5_1:
      return Tile<4, 0, true>;
    case GgmlType::kQ8_0:
      return Tile<8, 128>;
    case GgmlType::kQ4_K:
      return PackedByNx<Q4KK>;
    case GgmlType::kQ6_K:
      return PackedByNx<Q6KK>;
    default:
      return PackedFloatAvx512(type);  // F16 / BF16, or null
  }
}

}  // namespace tachyon::kernels::internal
