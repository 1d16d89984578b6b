// AVX2 kernels for the packed 16-row layouts (kernels/pack.h). A 64-byte step is two
// 32-byte halves (rows 0..7, rows 8..15); each 32-bit lane holds 4 code bytes of one row.
//   Q4_0: vpmaddubsw(nibbles, broadcast activation bytes) for the block's 8 steps summed in
//         int16 (at most 8 * 2 * 15 * 127 = 30480, no saturation), then vpmaddwd by ones;
//         the -8 offset is applied through the activation block sum as in the scalar kernel.
//   Q4_1: as Q4_0, with the block's min m in place of the offset: acc += m * (4 * s4).
//   Q8_0: codes are stored as q + 128; flipped back to signed q and multiplied with the sign
//         trick (|q| x sign(x, q), at most 2 * 128 * 127 per int16), so no offset term.
//   Q4_K / Q6_K: vpmaddubsw sums per sub-block in int16, the scale applied by the vpmaddwd
//         that widens them; mins / the Q6_K offset 32 through vpmaddwd on int16 pairs of two
//         sub-blocks against the activation's sums (see Q4KTileN / Q6KTileN).
// TileN's fixed-count loops carry `#pragma GCC unroll`: at -O2 GCC left them rolled, so the
// decoded codes u[] and the accumulators went through the stack on every block (about half
// the speed at m = 1 from L2). The K-quant kernels unroll their small loops (rows, halves,
// broadcasts) the same way, but not their step / sub-block loops (fully unrolled, GCC spilled).
#include <immintrin.h>

#include <cstring>

#include "kernels/matmul_internal.h"
#include "kernels/pack.h"
#include "kernels/simd_avx2.h"

namespace tachyon::kernels::internal {
namespace {

inline __m256i LoadY(const uint8_t* p) {
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
}

// How far ahead TileN prefetches, every cache line of the tile stream in address order (codes,
// then the scales and mins): a matrix's tiles lie one after another, so this reaches into the
// next tiles (and past the matrix's end, which a prefetch may). Decode streams the weights from
// memory (a small model's 97 MB do not stay in a 32 MiB L3), and the hardware prefetchers alone
// kept one thread at about half the rate of a plain streaming read on Zen 3; one line per block
// 1 KiB ahead did not help. Prefetching only the codes left the scales and mins (a fifth of a
// Q4_1 tile) to demand misses: 12-25% slower on 576-column matrices (SmolLM2), 5-9% on
// 2048-column ones. Prefetching each block's lines in read order instead (codes, then its scale
// and min lines) was 15-25% slower than the address-order stream on 576-column matrices.
constexpr int64_t kPrefetchBytes = 8192;

// kMins (Q4_1, not with kQ8): per-row block mins after the scales (pack.cc).
template <bool kQ8, int NX, bool kMins = false>
void TileN(int64_t k, const uint8_t* tile, const uint8_t* act, size_t stride, float* y, int64_t ldy,
           int nrows) {
  static_assert(!(kQ8 && kMins));
  const int64_t nb = k / 32;
  constexpr int kSteps = kQ8 ? 8 : 4;
  constexpr int kBlockBytes = kSteps * 64;
  const auto* scales = reinterpret_cast<const uint16_t*>(tile + nb * kBlockBytes);
  const uint16_t* mins = scales + nb * kPackRows;
  Q8Row32 x[NX];
  __m256 acc[NX][2];
#pragma GCC unroll 4
  for (int i = 0; i < NX; ++i) {
    x[i] = ViewQ8Row32(act + i * stride, k);
    acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  }
  const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  // The tile's bytes per block (codes, scales and mins), prefetched as one stream.
  constexpr int kStride = kBlockBytes + 2 * kPackRows * (kMins ? 2 : 1);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* codes = tile + b * kBlockBytes;
    PrefetchLines<(kStride + 63) / 64>(tile + kPrefetchBytes + b * kStride);
    const int64_t xoff = 128 * (b / 4) + 16 * (b % 4);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256 dw = LoadF16x8(scales + b * kPackRows + 8 * h);
      // The code offset's (or the min's) factor of s4 = dx * sum(xq) / 4.
      const __m256 dwc =
          kMins ? _mm256_mul_ps(LoadF16x8(mins + b * kPackRows + 8 * h), _mm256_set1_ps(4.0f))
                : _mm256_mul_ps(dw, _mm256_set1_ps(-32.0f));
      __m256i u[8];
#pragma GCC unroll 8
      for (int s = 0; s < kSteps; ++s) {
        const __m256i v = LoadY(codes + 64 * s + 32 * h);
        if constexpr (kQ8) {
          u[s] = _mm256_xor_si256(v, flip);  // signed q
        } else {
          u[s] = _mm256_and_si256(v, m4);
          u[s + 4] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        }
      }
#pragma GCC unroll 4
      for (int i = 0; i < NX; ++i) {
        const int8_t* xb = x[i].qs + xoff;
        __m256i isum;
        if constexpr (kQ8) {
          isum = _mm256_setzero_si256();
#pragma GCC unroll 8
          for (int s = 0; s < 8; ++s) {
            const __m256i xs = Bcast32(xb + (s < 4 ? 4 * s : 64 + 4 * (s - 4)));
            const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(u[s]), _mm256_sign_epi8(xs, u[s]));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, ones));
          }
        } else {
          __m256i p = _mm256_maddubs_epi16(u[0], Bcast32(xb));
#pragma GCC unroll 4
          for (int s = 1; s < 4; ++s) {
            p = _mm256_add_epi16(p, _mm256_maddubs_epi16(u[s], Bcast32(xb + 4 * s)));
          }
#pragma GCC unroll 4
          for (int s = 0; s < 4; ++s)
            p = _mm256_add_epi16(p, _mm256_maddubs_epi16(u[s + 4], Bcast32(xb + 64 + 4 * s)));
          isum = _mm256_madd_epi16(p, ones);
        }
        const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(x[i].d4[4 * b]));
        acc[i][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, acc[i][h]);
        if constexpr (!kQ8) {
          acc[i][h] = _mm256_fmadd_ps(dwc, _mm256_set1_ps(x[i].s4[4 * b]), acc[i][h]);
        }
      }
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < NX; ++i) {
    alignas(32) float out[16];
    _mm256_store_ps(out, acc[i][0]);
    _mm256_store_ps(out + 8, acc[i][1]);
    std::memcpy(y + i * ldy, out, sizeof(float) * nrows);
  }
}

template <bool kQ8, bool kMins = false>
void Tile(int64_t k, const uint8_t* tile, const uint8_t* act, size_t stride, int nx, float* y,
          int64_t ldy, int nrows) {
  switch (nx) {
    case 1:
      return TileN<kQ8, 1, kMins>(k, tile, act, stride, y, ldy, nrows);
    case 2:
      return TileN<kQ8, 2, kMins>(k, tile, act, stride, y, ldy, nrows);
    case 3:
      return TileN<kQ8, 3, kMins>(k, tile, act, stride, y, ldy, nrows);
    default:
      return TileN<kQ8, 4, kMins>(k, tile, act, stride, y, ldy, nrows);
  }
}

// y[i * ldy + r] for r < nrows from the two 8-row halves.
template <int NX>
void StoreRows(const __m256 (&acc)[NX][2], float* y, int64_t ldy, int nrows) {
  for (int i = 0; i < NX; ++i) {
    alignas(32) float out[16];
    _mm256_store_ps(out, acc[i][0]);
    _mm256_store_ps(out + 8, acc[i][1]);
    std::memcpy(y + i * ldy, out, sizeof(float) * nrows);
  }
}

// K-quants (kQ8_256 activations), one tile as two halves of 8 rows (one 32-bit lane per row),
// both halves in the same pass so every broadcast activation word serves all 16 rows.
// vpmaddubsw multiplies the unsigned codes by the signed activation bytes into int16 pairs;
// sums stay below 2^15 (Q4_K: 8 steps of at most 2 * 15 * 127; Q6_K: 2 steps of at most
// 2 * 63 * 127), and the sub-block scale is applied by the vpmaddwd that widens them.
//
// Per-row int16 pairs (a_r, b_r) from two 16-byte rows-of-the-tile vectors (meta bytes
// [sub-block][row]): out[0] rows 0..7, out[1] rows 8..15, one 32-bit lane per row. With
// a == b these are the (sc, sc) scale pairs; with two sub-blocks, pairs for vpmaddwd against
// the activation's (sum_j, sum_j+1) words.
template <bool kSigned>
inline void RowPairs(const uint8_t* a, const uint8_t* b, __m256i (&out)[2]) {
  const __m128i va = _mm_load_si128(reinterpret_cast<const __m128i*>(a));
  const __m128i vb = _mm_load_si128(reinterpret_cast<const __m128i*>(b));
  const __m128i lo = _mm_unpacklo_epi8(va, vb), hi = _mm_unpackhi_epi8(va, vb);
  out[0] = kSigned ? _mm256_cvtepi8_epi16(lo) : _mm256_cvtepu8_epi16(lo);
  out[1] = kSigned ? _mm256_cvtepi8_epi16(hi) : _mm256_cvtepu8_epi16(hi);
}

// The K-quant kernels prefetch the next super-block (BlocksAhead: in the next tile after the
// last one) while they read one: its codes a line per step, its meta once. The meta lie after
// all of a tile's codes, so a prefetch running a fixed distance ahead in the tile's bytes would
// reach a tile's first meta only after they were read (the codes alone 2 KiB ahead: Q4_K / Q6_K
// from DRAM 3-8% slower; the hardware prefetcher alone about 1.1x slower than that).

// Q4_K: sub-blocks 2c (low nibbles) and 2c + 1 (high nibbles) of step group c summed in
// int16 over its 8 steps, widened by their scale pairs; the mins through vpmaddwd of
// (min_2p, min_2p+1) pairs against the activation's 32-element sums (bsums added in pairs,
// at most 2 * 16 * 127 each, so they fit int16).
template <int NX>
void Q4KTileN(int64_t k, const uint8_t* tile, const uint8_t* act, size_t stride, float* y,
              int64_t ldy, int nrows) {
  const int64_t nb = k / 256;
  Q8Row256 x[NX];
  __m256 acc[NX][2];
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i) {
    x[i] = ViewQ8Row256(act + i * stride, k);
    acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  }
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  BlocksAhead ahead(tile, nb, PackedTileBytes(GgmlType::kQ4_K, k), 1);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* codes = tile + b * 2048;
    const uint8_t* meta = tile + nb * 2048 + b * 320;
    // The next super-block's codes (a line per step below) and meta.
    const uint8_t* pf = ahead.tile() + ahead.block() * 2048;
    PrefetchSpan<320>(ahead.tile() + nb * 2048 + ahead.block() * 320);
    ahead.Next();
    __m256i isum[NX][2], msum[NX][2];
#pragma GCC unroll 8
    for (int i = 0; i < NX; ++i) {
      isum[i][0] = isum[i][1] = msum[i][0] = msum[i][1] = _mm256_setzero_si256();
    }
    for (int c = 0; c < 4; ++c) {
      __m256i lo[NX][2], hi[NX][2];
#pragma GCC unroll 8
      for (int i = 0; i < NX; ++i) lo[i][0] = lo[i][1] = hi[i][0] = hi[i][1] = _mm256_setzero_si256();
#pragma GCC unroll 2
      for (int t = 0; t < 8; ++t) {
        __m256i xl[NX], xh[NX];
#pragma GCC unroll 8
        for (int i = 0; i < NX; ++i) {
          const int8_t* xq = x[i].qs + 256 * b + 64 * c + 4 * t;
          xl[i] = Bcast32(xq);
          xh[i] = Bcast32(xq + 32);
        }
        PrefetchLines<1>(pf + 64 * (8 * c + t));
#pragma GCC unroll 8
        for (int h = 0; h < 2; ++h) {
          const __m256i v = LoadY(codes + 64 * (8 * c + t) + 32 * h);
          const __m256i ul = _mm256_and_si256(v, m4);
          const __m256i uh = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
#pragma GCC unroll 8
          for (int i = 0; i < NX; ++i) {
            lo[i][h] = _mm256_add_epi16(lo[i][h], _mm256_maddubs_epi16(ul, xl[i]));
            hi[i][h] = _mm256_add_epi16(hi[i][h], _mm256_maddubs_epi16(uh, xh[i]));
          }
        }
      }
      __m256i sl[2], sh[2];
      RowPairs<false>(meta + 32 * c, meta + 32 * c, sl);
      RowPairs<false>(meta + 32 * c + 16, meta + 32 * c + 16, sh);
#pragma GCC unroll 8
      for (int i = 0; i < NX; ++i) {
#pragma GCC unroll 8
        for (int h = 0; h < 2; ++h) {
          isum[i][h] = _mm256_add_epi32(isum[i][h], _mm256_add_epi32(_mm256_madd_epi16(lo[i][h], sl[h]),
                                                                     _mm256_madd_epi16(hi[i][h], sh[h])));
        }
      }
    }
    // bs[i][j] = activation sum of sub-block j (elements 32 j .. 32 j + 31).
    alignas(32) int16_t bs[NX][16];
#pragma GCC unroll 8
    for (int i = 0; i < NX; ++i) {
      const __m256i s16 =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].bsums + 16 * b));
      // Lane 0: sums of sub-blocks 0..3 (twice), lane 1: 4..7.
      _mm256_store_si256(reinterpret_cast<__m256i*>(bs[i]), _mm256_hadd_epi16(s16, s16));
    }
    for (int p = 0; p < 4; ++p) {  // sub-blocks 2p, 2p + 1
      __m256i mn[2];
      RowPairs<false>(meta + 128 + 32 * p, meta + 128 + 32 * p + 16, mn);
#pragma GCC unroll 8
      for (int i = 0; i < NX; ++i) {
        const __m256i pair = Bcast32(bs[i] + (p < 2 ? 2 * p : 8 + 2 * (p - 2)));
#pragma GCC unroll 8
        for (int h = 0; h < 2; ++h) {
          msum[i][h] = _mm256_add_epi32(msum[i][h], _mm256_madd_epi16(mn[h], pair));
        }
      }
    }
#pragma GCC unroll 8
    for (int h = 0; h < 2; ++h) {
      const __m256 d = LoadF16x8(meta + 256 + 16 * h), dmin = LoadF16x8(meta + 288 + 16 * h);
#pragma GCC unroll 8
      for (int i = 0; i < NX; ++i) {
        const __m256 dx = _mm256_set1_ps(x[i].d[b]);
        acc[i][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[i][h]), _mm256_mul_ps(d, dx), acc[i][h]);
        acc[i][h] =
            _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum[i][h]), _mm256_mul_ps(dmin, dx), acc[i][h]);
      }
    }
  }
  StoreRows<NX>(acc, y, ldy, nrows);
}

// Q6_K: per 16-element sub-block g the 6-bit codes are rebuilt from the two nibble steps and
// the high-bit step; the code offset 32 goes through sum_g sc_g * bsum_g (vpmaddwd on
// (sc_2p, sc_2p+1) pairs), subtracted 32 times at the end of the super-block.
template <int NX>
void Q6KTileN(int64_t k, const uint8_t* tile, const uint8_t* act, size_t stride, float* y,
              int64_t ldy, int nrows) {
  const int64_t nb = k / 256;
  Q8Row256 x[NX];
  __m256 acc[NX][2];
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i) {
    x[i] = ViewQ8Row256(act + i * stride, k);
    acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  }
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
  BlocksAhead ahead(tile, nb, PackedTileBytes(GgmlType::kQ6_K, k), 1);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* codes = tile + b * 3072;
    const uint8_t* meta = tile + nb * 3072 + b * 288;
    // The next super-block's codes (three lines per sub-block below) and meta.
    const uint8_t* pf = ahead.tile() + ahead.block() * 3072;
    PrefetchSpan<288>(ahead.tile() + nb * 3072 + ahead.block() * 288);
    ahead.Next();
    __m256i isum[NX][2], cs[NX][2];
#pragma GCC unroll 8
    for (int i = 0; i < NX; ++i) {
      isum[i][0] = isum[i][1] = cs[i][0] = cs[i][1] = _mm256_setzero_si256();
    }
    for (int g = 0; g < 16; ++g) {
      PrefetchLines<3>(pf + 192 * g);
      __m256i sc[2];
      RowPairs<true>(meta + 16 * g, meta + 16 * g, sc);
      __m256i xw[NX][4];
#pragma GCC unroll 8
      for (int i = 0; i < NX; ++i) {
        const int8_t* xq = x[i].qs + 256 * b + 16 * g;
#pragma GCC unroll 8
        for (int s = 0; s < 4; ++s) xw[i][s] = Bcast32(xq + 4 * s);
      }
#pragma GCC unroll 8
      for (int h = 0; h < 2; ++h) {
        const uint8_t* cg = codes + 192 * g + 32 * h;
        const __m256i n0 = LoadY(cg), n1 = LoadY(cg + 64), hb = LoadY(cg + 128);
        const __m256i qa = _mm256_or_si256(_mm256_and_si256(n0, m4),
                                           _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30));
        const __m256i qb = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(n0, 4), m4),
                                           _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30));
        const __m256i qc = _mm256_or_si256(_mm256_and_si256(n1, m4), _mm256_and_si256(hb, m30));
        const __m256i qd = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(n1, 4), m4),
                                           _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30));
#pragma GCC unroll 8
        for (int i = 0; i < NX; ++i) {
          const __m256i p0 = _mm256_add_epi16(_mm256_maddubs_epi16(qa, xw[i][0]),
                                              _mm256_maddubs_epi16(qb, xw[i][1]));
          const __m256i p1 = _mm256_add_epi16(_mm256_maddubs_epi16(qc, xw[i][2]),
                                              _mm256_maddubs_epi16(qd, xw[i][3]));
          isum[i][h] = _mm256_add_epi32(isum[i][h], _mm256_add_epi32(_mm256_madd_epi16(p0, sc[h]),
                                                                     _mm256_madd_epi16(p1, sc[h])));
        }
      }
    }
    for (int p = 0; p < 8; ++p) {  // sub-blocks 2p, 2p + 1
      __m256i pair[2];
      RowPairs<true>(meta + 32 * p, meta + 32 * p + 16, pair);
#pragma GCC unroll 8
      for (int i = 0; i < NX; ++i) {
        const __m256i bsum = Bcast32(x[i].bsums + 16 * b + 2 * p);
#pragma GCC unroll 8
        for (int h = 0; h < 2; ++h) {
          cs[i][h] = _mm256_add_epi32(cs[i][h], _mm256_madd_epi16(pair[h], bsum));
        }
      }
    }
#pragma GCC unroll 8
    for (int h = 0; h < 2; ++h) {
      const __m256 d = LoadF16x8(meta + 256 + 16 * h);
#pragma GCC unroll 8
      for (int i = 0; i < NX; ++i) {
        const __m256i tot = _mm256_sub_epi32(isum[i][h], _mm256_slli_epi32(cs[i][h], 5));
        acc[i][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot),
                                    _mm256_mul_ps(d, _mm256_set1_ps(x[i].d[b])), acc[i][h]);
      }
    }
  }
  StoreRows<NX>(acc, y, ldy, nrows);
}

// nx activation rows in passes of at most two.
template <template <int> class K>
void KPairs(int64_t k, const uint8_t* tile, const uint8_t* act, size_t stride, int nx, float* y,
            int64_t ldy, int nrows) {
  for (int i = 0; i < nx; i += 2) {
    const uint8_t* a = act + static_cast<size_t>(i) * stride;
    if (nx - i >= 2) {
      K<2>::Run(k, tile, a, stride, y + i * ldy, ldy, nrows);
    } else {
      K<1>::Run(k, tile, a, stride, y + i * ldy, ldy, nrows);
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

}  // namespace

PackedFn PackedAvx2(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
      return Tile<false>;
    case GgmlType::kQ4_1:
      return Tile<false, true>;
    case GgmlType::kQ8_0:
      return Tile<true>;
    case GgmlType::kQ4_K:
      return KPairs<Q4KK>;
    case GgmlType::kQ6_K:
      return KPairs<Q6KK>;
    default:
      return PackedFloatAvx2(type);  // F16 / BF16, or null
  }
}

}  // namespace tachyon::kernels::internal
