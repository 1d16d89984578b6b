// Paged attention on Intel AMX (compiled with the AMX flags; called only after run-time
// dispatch): the flash-style tile kernel with Q·Kᵀ and P·V as bf16 tile multiplies
// (TDPBF16PS, f32 accumulation) and the online softmax in AVX-512.
//
// Precision: every operand is split into two bf16 parts, x = hi + lo (hi = bf16(x), lo =
// bf16(x - hi), together good to ~2^-16 relative), and each product takes hi·hi + lo·hi +
// hi·lo, so the result is close to f32 attention (bound: attention_test.cc). One bf16 part
// alone (2^-8) moves logits of the reference models by 1e-3 .. 1e-2, outside the tests'
// tolerances; bf16 K/V are exact in one part, so their low-part products are skipped.
//
// One call handles the nq = n_rows * n_group query vectors of a tile job (row qi = r * n_group
// + g), padded to a multiple of 32 and to head_dim hdp = round_up(head_dim, 32) with zeros:
//
//   qb, ql  [nqp][hdp] bf16      c * q (c = scale * log2 e: scores in log2 units), A operand
//   kb, kl  [hdp/32][4] B tiles  K of a 64-key KV tile: tile (kk, nb) row i, column n holds the
//                                pair (K[16 nb + n][32 kk + 2i], K[..][32 kk + 2i + 1])
//   vb, vl  [2][hdp/16] B tiles  V of the KV tile: tile (kk, nb) row i, column n holds the pair
//                                (V[32 kk + 2i][16 nb + n], V[32 kk + 2i + 1][16 nb + n])
//   s       [nqp][64] f32        scores of the query vectors x the KV tile
//   pb, pl  [nqp][64] bf16       2^(s - m), the A operand of P·V
//   acc     [nqp][hdp] f32       unnormalised outputs, accumulated by the tiles in place
//   m, l    [nqp], [nqp][16] f32 running maximum, running sum (16 lanes)
//
// (x, xl: the hi and lo parts.) K and V of each KV tile are converted once from the cache dtype
// and reused by every pass of 32 query vectors. A pass is 2 x 2 tile blocks (two 16-row query
// blocks x two 16-key or 16-column blocks), so the eight tile registers hold 4 accumulators and
// 2 + 2 operands.
//
// Online softmax with a lazy maximum: a row's reference maximum m only moves (and acc and the
// running sum l are rescaled by 2^(m_old - m_new)) when a KV tile's maximum exceeds it by more
// than kLazyMax; otherwise 2^(s - m) <= 2^kLazyMax, harmless in f32. Most KV tiles then
// accumulate straight into acc. The test is a lane compare of the tile's maxima against
// m + kLazyMax (a horizontal maximum only when m moves), and l is kept as 16 partial sums per
// row, reduced once at the end: no horizontal reduction per row and KV tile.
#include "kernels/ops_avx512.h"  // first: see simd_avx512.h

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/amx.h"
#include "kernels/attention_tile.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"

namespace tachyon::kernels {
namespace {

using internal::HAdd;
using internal::HMax;
using internal::kAmxKvTile;
using internal::kAmxPassRows;
using internal::Mask16;
using internal::Mask32;

constexpr float kLazyMax = 8.0f;
constexpr int64_t kTileElems = 512;  // bf16 elements of one 16 x 64-byte tile

// The 2 x 2 block of tile products every pass uses: C tiles 0..3 += A tiles 4, 5 x B tiles
// 6, 7 (bf16 pairs, f32 accumulation).
inline void Tile2x2() {
  _tile_dpbf16ps(0, 4, 6);
  _tile_dpbf16ps(1, 4, 7);
  _tile_dpbf16ps(2, 5, 6);
  _tile_dpbf16ps(3, 5, 7);
}

inline __mmask16 MaskOrZero(int64_t n) {
  return n <= 0 ? 0 : Mask16(n);
}

// 32 floats (lo = the first 16) rounded to bf16 (nearest even) as one vector of 32 bf16.
inline __m512i PackBf16(__m512 lo, __m512 hi) {
  const __m512bh b = _mm512_cvtne2ps_pbh(hi, lo);
  __m512i r;
  std::memcpy(&r, &b, sizeof r);
  return r;
}

// Back to f32: the first (lo) or last (hi) 16 of 32 packed bf16.
inline __m512 Bf16Lo(__m512i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(h)), 16));
}
inline __m512 Bf16Hi(__m512i h) {
  return _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(h, 1)), 16));
}

// 32 finite floats (a = the first 16) as bf16 parts hi (rounded to nearest, ties away from
// zero: add half an ulp to the magnitude bits and cut) and lo = bf16(x - hi), stored to hi[0,
// 32) and lo[0, 32). Integer rounding and a word permute instead of a second conversion.
inline void SplitToBf16(__m512 a, __m512 b, uint16_t* hi, uint16_t* lo) {
  const __m512i half = _mm512_set1_epi32(0x8000), top = _mm512_set1_epi32(-65536);
  const __m512i ha = _mm512_and_si512(_mm512_add_epi32(_mm512_castps_si512(a), half), top);
  const __m512i hb = _mm512_and_si512(_mm512_add_epi32(_mm512_castps_si512(b), half), top);
  // The upper words of ha's lanes, then of hb's.
  const __m512i odd = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37,
                                       35, 33, 31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7,
                                       5, 3, 1);
  _mm512_storeu_si512(hi, _mm512_permutex2var_epi16(ha, odd, hb));
  _mm512_storeu_si512(lo, PackBf16(_mm512_sub_ps(a, _mm512_castsi512_ps(ha)),
                                   _mm512_sub_ps(b, _mm512_castsi512_ps(hb))));
}

// Elements [i, i + 32) of a KV row of n elements as two f32 vectors (zero past n).
template <KvDtype D>
inline void Load32(const uint8_t* src, int64_t n, int64_t i, __m512* a, __m512* b) {
  if constexpr (D == KvDtype::kF32) {
    const auto* f = reinterpret_cast<const float*>(src);
    *a = _mm512_maskz_loadu_ps(MaskOrZero(n - i), f + i);
    *b = _mm512_maskz_loadu_ps(MaskOrZero(n - i - 16), f + i + 16);
  } else if constexpr (D == KvDtype::kF16) {
    const auto* h = reinterpret_cast<const uint16_t*>(src);
    *a = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(MaskOrZero(n - i), h + i));
    *b = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(MaskOrZero(n - i - 16), h + i + 16));
  } else if constexpr (D == KvDtype::kQ4_0 || D == KvDtype::kQ4_1) {  // n % 32 == 0, i < n
    // x = d * q + m (q4_0: m = -8 d): exactly the reference's values (one FMA, see
    // kBlockParams in attention_decode.h).
    float d, m;
    const uint8_t* qs;
    if constexpr (D == KvDtype::kQ4_0) {
      const auto& blk = reinterpret_cast<const BlockQ4_0*>(src)[i / kQK4];
      d = Fp16ToF32(blk.d);
      m = -8.0f * d;
      qs = blk.qs;
    } else {
      const auto& blk = reinterpret_cast<const BlockQ4_1*>(src)[i / kQK4];
      d = Fp16ToF32(blk.d);
      m = Fp16ToF32(blk.m);
      qs = blk.qs;
    }
    const __m512i w = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
    const __m512 vd = _mm512_set1_ps(d), vm = _mm512_set1_ps(m);
    *a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_and_si512(w, _mm512_set1_epi32(0xF))), vd, vm);
    *b = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(w, 4)), vd, vm);
  } else {  // q8_0: n % 32 == 0 and i < n
    static_assert(D == KvDtype::kQ8_0);
    const auto& blk = reinterpret_cast<const BlockQ8_0*>(src)[i / kQK4];
    const __m512 d = _mm512_set1_ps(Fp16ToF32(blk.d));
    const __m128i* qs = reinterpret_cast<const __m128i*>(blk.qs);
    *a = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(qs))), d);
    *b = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(qs + 1))), d);
  }
}

// One KV row as hdp bf16 values hi (zero past n) and, when lo is not null, the bf16 rounding
// of what hi leaves out (x - hi).
template <KvDtype D>
inline void RowToBf16(const uint8_t* src, int64_t n, int64_t hdp, uint16_t* hi, uint16_t* lo) {
  for (int64_t i = 0; i < hdp; i += 32) {
    if constexpr (D == KvDtype::kBf16) {
      const auto* h = reinterpret_cast<const uint16_t*>(src);
      const __mmask32 k = n - i <= 0 ? 0 : Mask32(n - i);
      _mm512_storeu_si512(hi + i, _mm512_maskz_loadu_epi16(k, h + i));
      if (lo) _mm512_storeu_si512(lo + i, _mm512_setzero_si512());
    } else {
      __m512 a, b;
      Load32<D>(src, n, i, &a, &b);
      const __m512i h = PackBf16(a, b);
      _mm512_storeu_si512(hi + i, h);
      if (lo) {
        _mm512_storeu_si512(
            lo + i, PackBf16(_mm512_sub_ps(a, Bf16Lo(h)), _mm512_sub_ps(b, Bf16Hi(h))));
      }
    }
  }
}

// In-place transpose of a 16 x 16 matrix of 32-bit elements (r[i] is row i).
inline void Transpose16x16(__m512i* r) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {  // per 128-bit lane: (r_i[0] r_i+1[0] r_i[1] r_i+1[1]), ...
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int g = 0; g < 4; ++g) {  // u[4g + e], lane L: element 4L + e of rows 4g .. 4g + 3
    u[4 * g + 0] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  for (int e = 0; e < 4; ++e) {
    const __m512i a0 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0x88);       // lanes 0, 2
    const __m512i a1 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0x88);  // lanes 0, 2
    const __m512i b0 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0xDD);       // lanes 1, 3
    const __m512i b1 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0xDD);  // lanes 1, 3
    r[e] = _mm512_shuffle_i32x4(a0, a1, 0x88);
    r[8 + e] = _mm512_shuffle_i32x4(a0, a1, 0xDD);
    r[4 + e] = _mm512_shuffle_i32x4(b0, b1, 0x88);
    r[12 + e] = _mm512_shuffle_i32x4(b0, b1, 0xDD);
  }
}

// Positions of one KV tile and where its converted rows go.
struct KvTile {
  int64_t t0 = 0;  // first position
  int64_t nk = 0;  // valid keys, 1..kAmxKvTile
};

// 16 x 32 bf16 (rows of 64 bytes at stride hdp) transposed in 32-bit pairs into one B tile.
inline void TransposeToTile(const uint16_t* rows, int64_t hdp, uint16_t* tile) {
  __m512i r[16];
  for (int n = 0; n < 16; ++n) r[n] = _mm512_loadu_si512(rows + n * hdp);
  Transpose16x16(r);
  for (int i = 0; i < 16; ++i) _mm512_storeu_si512(tile + i * 32, r[i]);
}

// The B tiles of K for keys [t0, t0 + nk) (zero past nk, up to a multiple of 32 keys), and of
// K's low parts when kl is not null. rows, rows_lo: scratch of 16 * hdp bf16 each.
template <KvDtype D>
void BuildKPanel(const PagedKv& kv, const TileJob& job, const KvTile& kt, int64_t hdp,
                 uint16_t* rows, uint16_t* rows_lo, uint16_t* kb, uint16_t* kl) {
  const int64_t n_blocks = (kt.nk + 31) / 32 * 2;
  for (int64_t nb = 0; nb < n_blocks; ++nb) {
    for (int64_t n = 0; n < 16; ++n) {
      const int64_t j = nb * 16 + n;
      if (j < kt.nk) {
        RowToBf16<D>(kv.Row(kv.k, job.block_table, kt.t0 + j, job.kv_head), kv.head_dim, hdp,
                     rows + n * hdp, kl ? rows_lo + n * hdp : nullptr);
      } else {
        std::memset(rows + n * hdp, 0, static_cast<size_t>(hdp) * 2);
        if (kl) std::memset(rows_lo + n * hdp, 0, static_cast<size_t>(hdp) * 2);
      }
    }
    for (int64_t kk = 0; kk < hdp / 32; ++kk) {
      TransposeToTile(rows + kk * 32, hdp, kb + (kk * 4 + nb) * kTileElems);
      if (kl) TransposeToTile(rows_lo + kk * 32, hdp, kl + (kk * 4 + nb) * kTileElems);
    }
  }
}

// Interleaves key rows a and b (hdp bf16 each) into row i of the V tiles (kk, 0 .. n_cols).
inline void InterleaveV(const uint16_t* a, const uint16_t* b, int64_t n_cols, uint16_t* dst) {
  for (int64_t nb = 0; nb < n_cols; ++nb) {
    const __m512i x = _mm512_cvtepu16_epi32(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + nb * 16)));
    const __m512i y = _mm512_cvtepu16_epi32(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + nb * 16)));
    _mm512_storeu_si512(dst + nb * kTileElems, _mm512_or_si512(x, _mm512_slli_epi32(y, 16)));
  }
}

// The B tiles of V for keys [t0, t0 + nk) (zero past nk, up to a multiple of 32 keys), and of
// V's low parts when vl is not null. rows, rows_lo: scratch of 2 * hdp bf16 each.
template <KvDtype D>
void BuildVPanel(const PagedKv& kv, const TileJob& job, const KvTile& kt, int64_t hdp,
                 uint16_t* rows, uint16_t* rows_lo, uint16_t* vb, uint16_t* vl) {
  const int64_t n_pairs = (kt.nk + 31) / 32 * 16, n_cols = hdp / 16;
  for (int64_t pr = 0; pr < n_pairs; ++pr) {
    for (int64_t e = 0; e < 2; ++e) {
      const int64_t j = 2 * pr + e;
      if (j < kt.nk) {
        RowToBf16<D>(kv.Row(kv.v, job.block_table, kt.t0 + j, job.kv_head), kv.head_dim, hdp,
                     rows + e * hdp, vl ? rows_lo + e * hdp : nullptr);
      } else {
        std::memset(rows + e * hdp, 0, static_cast<size_t>(hdp) * 2);
        if (vl) std::memset(rows_lo + e * hdp, 0, static_cast<size_t>(hdp) * 2);
      }
    }
    const int64_t at = (pr / 16) * n_cols * kTileElems + (pr % 16) * 32;
    InterleaveV(rows, rows + hdp, n_cols, vb + at);
    if (vl) InterleaveV(rows_lo, rows_lo + hdp, n_cols, vl + at);
  }
}

// s[32][64] = (qa + ql)[32 rows][hdp] · (K + K_lo) panels for the key halves [0, n_halves)
// (32 keys each), as qa · K + ql · K (+ qa · K_lo with kKLo): the product of the low parts is
// left out.
template <bool kKLo>
void ScorePass(const uint16_t* qa, const uint16_t* ql, int64_t hdp, const uint16_t* kb,
               const uint16_t* kl, int64_t n_halves, float* s) {
  const int64_t qstride = hdp * 2;
  for (int64_t kp = 0; kp < n_halves; ++kp) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t kk = 0; kk < hdp / 32; ++kk) {
      const uint16_t* b0 = kb + (kk * 4 + 2 * kp) * kTileElems;
      _tile_loadd(4, qa + kk * 32, qstride);
      _tile_loadd(5, qa + 16 * hdp + kk * 32, qstride);
      _tile_loadd(6, b0, 64);
      _tile_loadd(7, b0 + kTileElems, 64);
      Tile2x2();
      if constexpr (kKLo) {
        const uint16_t* l0 = kl + (kk * 4 + 2 * kp) * kTileElems;
        _tile_loadd(6, l0, 64);
        _tile_loadd(7, l0 + kTileElems, 64);
        Tile2x2();
        _tile_loadd(6, b0, 64);
        _tile_loadd(7, b0 + kTileElems, 64);
      }
      _tile_loadd(4, ql + kk * 32, qstride);
      _tile_loadd(5, ql + 16 * hdp + kk * 32, qstride);
      Tile2x2();
    }
    _tile_stored(0, s + kp * 32, kAmxKvTile * 4);
    _tile_stored(1, s + kp * 32 + 16, kAmxKvTile * 4);
    _tile_stored(2, s + 16 * kAmxKvTile + kp * 32, kAmxKvTile * 4);
    _tile_stored(3, s + 16 * kAmxKvTile + kp * 32 + 16, kAmxKvTile * 4);
  }
}

// acc[32 rows][hdp] += (pb + pl)[32][64] · (V + V_lo) panels over the key halves
// [0, n_halves), as pb · V + pl · V (+ pb · V_lo with kVLo).
template <bool kVLo>
void AccumulatePass(const uint16_t* pb, const uint16_t* pl, const uint16_t* vb,
                    const uint16_t* vl, int64_t n_halves, int64_t hdp, float* acc) {
  const int64_t astride = hdp * 4, n_cols = hdp / 16;
  for (int64_t cp = 0; cp < hdp / 32; ++cp) {
    float* a = acc + cp * 32;
    _tile_loadd(0, a, astride);
    _tile_loadd(1, a + 16, astride);
    _tile_loadd(2, a + 16 * hdp, astride);
    _tile_loadd(3, a + 16 * hdp + 16, astride);
    for (int64_t kk = 0; kk < n_halves; ++kk) {
      const uint16_t* b0 = vb + (kk * n_cols + 2 * cp) * kTileElems;
      _tile_loadd(4, pb + kk * 32, kAmxKvTile * 2);
      _tile_loadd(5, pb + 16 * kAmxKvTile + kk * 32, kAmxKvTile * 2);
      _tile_loadd(6, b0, 64);
      _tile_loadd(7, b0 + kTileElems, 64);
      Tile2x2();
      if constexpr (kVLo) {
        const uint16_t* l0 = vl + (kk * n_cols + 2 * cp) * kTileElems;
        _tile_loadd(6, l0, 64);
        _tile_loadd(7, l0 + kTileElems, 64);
        Tile2x2();
        _tile_loadd(6, b0, 64);
        _tile_loadd(7, b0 + kTileElems, 64);
      }
      _tile_loadd(4, pl + kk * 32, kAmxKvTile * 2);
      _tile_loadd(5, pl + 16 * kAmxKvTile + kk * 32, kAmxKvTile * 2);
      Tile2x2();
    }
    _tile_stored(0, a, astride);
    _tile_stored(1, a + 16, astride);
    _tile_stored(2, a + 16 * hdp, astride);
    _tile_stored(3, a + 16 * hdp + 16, astride);
  }
}

inline void ScaleRow(float* y, float a, int64_t n) {  // n % 16 == 0
  const __m512 va = _mm512_set1_ps(a);
  for (int64_t i = 0; i < n; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(y + i), va));
}

// 2^x on the lanes of k (0 elsewhere), for x <= ~128: 2^n * p(f), n = round(x), f = x - n in
// [-1/2, 1/2], p the degree-5 Taylor polynomial of e^(f ln 2) (relative error < 4e-6). x below
// -126 gives 2^-126 (or 0 off k): weights that small vanish next to the row's maximum 1.
inline __m512 Exp2(__m512 x, __mmask16 k) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-126.0f));
  const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(x, n);
  __m512 p = _mm512_set1_ps(1.3333558146428443e-3f);         // ln2^5 / 120
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.618129107628477e-3f));  // ln2^4 / 24
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550410866482158e-2f));  // ln2^3 / 6
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402265069591007e-1f));  // ln2^2 / 2
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931471805599453e-1f));  // ln2
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  return _mm512_maskz_scalef_ps(k, p, n);
}

// Rounds p up to the next multiple of 16 floats (64 bytes).
inline float* Align64(float* p) {
  const auto u = reinterpret_cast<uintptr_t>(p);
  return reinterpret_cast<float*>((u + 63) & ~uintptr_t{63});
}

template <KvDtype D>
void AttendTileAmxImpl(const PagedKv& kv, const TileJob& job, const TileParams& p,
                       float* scratch) {
  constexpr bool kLo = internal::AmxKvHasLowPart(D);
  const int64_t hd = kv.head_dim, n_group = p.n_group, n_rows = job.n_rows;
  const int64_t hdp = internal::AmxHeadDim(hd), nq = n_rows * n_group;
  const int64_t nqp = (nq + kAmxPassRows - 1) / kAmxPassRows * kAmxPassRows;
  const internal::AmxScratchLayout lay(hd, n_rows, n_group);
  float* base = Align64(scratch);
  auto* qb = reinterpret_cast<uint16_t*>(base + lay.qb);
  auto* ql = reinterpret_cast<uint16_t*>(base + lay.ql);
  auto* kb = reinterpret_cast<uint16_t*>(base + lay.kb);
  auto* kl = reinterpret_cast<uint16_t*>(base + lay.kl);
  auto* vb = reinterpret_cast<uint16_t*>(base + lay.vb);
  auto* rows = reinterpret_cast<uint16_t*>(base + lay.rows);
  auto* rows_lo = reinterpret_cast<uint16_t*>(base + lay.rows_lo);
  float* s = base + lay.s;
  auto* pb = reinterpret_cast<uint16_t*>(base + lay.pb);
  auto* pl = reinterpret_cast<uint16_t*>(base + lay.pl);
  auto* vl = reinterpret_cast<uint16_t*>(base + lay.vl);
  float* acc = base + lay.acc;
  float* m = base + lay.m;
  float* l = base + lay.l;

  // Q as bf16(c * q) (and the low parts), zero-padded; c = scale * log2(e).
  const __m512 vscale = _mm512_set1_ps(internal::AmxQueryScale(p.scale));
  for (int64_t qi = 0; qi < nqp; ++qi) {
    uint16_t* dst = qb + qi * hdp;
    uint16_t* dst_lo = ql + qi * hdp;
    if (qi >= nq) {
      std::memset(dst, 0, static_cast<size_t>(hdp) * 2);
      std::memset(dst_lo, 0, static_cast<size_t>(hdp) * 2);
      continue;
    }
    const float* q = job.q + (qi / n_group) * job.row_stride + (qi % n_group) * hd;
    for (int64_t i = 0; i < hdp; i += 32) {
      const __m512 a = _mm512_mul_ps(_mm512_maskz_loadu_ps(MaskOrZero(hd - i), q + i), vscale);
      const __m512 b =
          _mm512_mul_ps(_mm512_maskz_loadu_ps(MaskOrZero(hd - i - 16), q + i + 16), vscale);
      const __m512i h = PackBf16(a, b);
      _mm512_storeu_si512(dst + i, h);
      _mm512_storeu_si512(dst_lo + i,
                          PackBf16(_mm512_sub_ps(a, Bf16Lo(h)), _mm512_sub_ps(b, Bf16Hi(h))));
    }
  }
  std::fill(acc, acc + nqp * hdp, 0.0f);
  std::fill(m, m + nq, -std::numeric_limits<float>::infinity());
  std::fill(l, l + nq * 16, 0.0f);

  const int64_t window = p.sliding_window;
  const int64_t first = job.pos_start, end = job.pos_start + n_rows;  // query positions
  const int64_t lo = window > 0 ? std::max<int64_t>(0, first + 1 - window) : 0;
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  // out = acc / l for the query vectors of pass ps.
  auto finish = [&](int64_t ps) {
    for (int64_t qi = ps * kAmxPassRows; qi < std::min((ps + 1) * kAmxPassRows, nq); ++qi) {
      float* out = job.out + (qi / n_group) * job.row_stride + (qi % n_group) * hd;
      const __m512 inv = _mm512_set1_ps(1.0f / HAdd(_mm512_loadu_ps(l + qi * 16)));
      const float* a = acc + qi * hdp;
      for (int64_t i = 0; i < hd; i += 16) {
        const __mmask16 km = Mask16(hd - i);
        _mm512_mask_storeu_ps(out + i, km, _mm512_mul_ps(_mm512_maskz_loadu_ps(km, a + i), inv));
      }
    }
  };
  for (int64_t t0 = lo; t0 < end; t0 += kAmxKvTile) {
    const KvTile kt{t0, std::min(kAmxKvTile, end - t0)};
    const int64_t t1 = t0 + kt.nk, n_halves = (kt.nk + 31) / 32;
    BuildKPanel<D>(kv, job, kt, hdp, rows, rows_lo, kb, kLo ? kl : nullptr);
    BuildVPanel<D>(kv, job, kt, hdp, rows, rows_lo, vb, kLo ? vl : nullptr);
    // The next KV tile's K and V rows, fetched while this one is multiplied (a job's rows of a
    // KV head come from L3 when other heads' jobs ran in between).
    const size_t row_bytes = kv.row_bytes();
    for (int64_t t = t1; t < std::min(t1 + kAmxKvTile, end); ++t) {
      const uint8_t* kr = kv.Row(kv.k, job.block_table, t, job.kv_head);
      const uint8_t* vr = kv.Row(kv.v, job.block_table, t, job.kv_head);
      for (size_t off = 0; off < row_bytes; off += 64) {
        __builtin_prefetch(kr + off);
        __builtin_prefetch(vr + off);
      }
    }
    // Passes that see this KV tile: [pass_lo, pass_hi).
    int64_t pass_lo = nqp / kAmxPassRows, pass_hi = 0;
    for (int64_t ps = 0; ps * kAmxPassRows < nq; ++ps) {
      const int64_t q0 = ps * kAmxPassRows, q1 = std::min(q0 + kAmxPassRows, nq);
      const int64_t pos_lo = first + q0 / n_group, pos_hi = first + (q1 - 1) / n_group;
      if (pos_hi < t0 || (window > 0 && pos_lo + 1 - window >= t1)) continue;
      pass_lo = std::min(pass_lo, ps);
      pass_hi = ps + 1;
    }
    // All score passes first: the softmax then reads scores stored a pass earlier (AVX-512
    // loads of data a tile store just wrote wait for it to complete).
    for (int64_t ps = pass_lo; ps < pass_hi; ++ps) {
      const int64_t q0 = ps * kAmxPassRows;
      ScorePass<kLo>(qb + q0 * hdp, ql + q0 * hdp, hdp, kb, kl, n_halves, s + q0 * kAmxKvTile);
    }
    for (int64_t qi = pass_lo * kAmxPassRows; qi < pass_hi * kAmxPassRows; ++qi) {
      uint16_t* prow = pb + qi * kAmxKvTile;
      uint16_t* prow_lo = pl + qi * kAmxKvTile;
      const int64_t pos = first + qi / n_group;
      const int64_t jlo = (window > 0 ? std::max(t0, pos + 1 - window) : t0) - t0;
      const int64_t jhi = std::min(t1, pos + 1) - t0;
      if (qi >= nq || jlo >= jhi) {  // padding, or a row that sees none of the tile
        const __m512i z = _mm512_setzero_si512();
        _mm512_storeu_si512(prow, z);
        _mm512_storeu_si512(prow + 32, z);
        _mm512_storeu_si512(prow_lo, z);
        _mm512_storeu_si512(prow_lo + 32, z);
        continue;
      }
      const uint64_t bits =
          (jhi >= 64 ? ~uint64_t{0} : (uint64_t{1} << jhi) - 1) & ~((uint64_t{1} << jlo) - 1);
      const float* srow = s + qi * kAmxKvTile;
      const auto k0 = static_cast<__mmask16>(bits), k1 = static_cast<__mmask16>(bits >> 16),
                 k2 = static_cast<__mmask16>(bits >> 32), k3 = static_cast<__mmask16>(bits >> 48);
      __m512 x0 = _mm512_mask_loadu_ps(neg_inf, k0, srow);
      __m512 x1 = _mm512_mask_loadu_ps(neg_inf, k1, srow + 16);
      __m512 x2 = _mm512_mask_loadu_ps(neg_inf, k2, srow + 32);
      __m512 x3 = _mm512_mask_loadu_ps(neg_inf, k3, srow + 48);
      // The lazy maximum needs no horizontal reduction unless it moves: a lane compare.
      const __m512 vmx = _mm512_max_ps(_mm512_max_ps(x0, x1), _mm512_max_ps(x2, x3));
      float mi = m[qi];
      float* lrow = l + qi * 16;
      if (_mm512_cmp_ps_mask(vmx, _mm512_set1_ps(mi + kLazyMax), _CMP_GT_OQ) != 0) {
        const float mx = HMax(vmx);  // also when m is still -inf
        if (mi != -std::numeric_limits<float>::infinity()) {
          const float alpha = std::exp2(mi - mx);
          ScaleRow(lrow, alpha, 16);
          ScaleRow(acc + qi * hdp, alpha, hdp);
        }
        m[qi] = mi = mx;
      }
      const __m512 vm = _mm512_set1_ps(mi);
      x0 = Exp2(_mm512_sub_ps(x0, vm), k0);
      x1 = Exp2(_mm512_sub_ps(x1, vm), k1);
      x2 = Exp2(_mm512_sub_ps(x2, vm), k2);
      x3 = Exp2(_mm512_sub_ps(x3, vm), k3);
      // The running sum stays a vector of 16 partial sums (reduced once, in finish).
      _mm512_storeu_ps(lrow, _mm512_add_ps(_mm512_loadu_ps(lrow), _mm512_add_ps(
                                                _mm512_add_ps(x0, x1), _mm512_add_ps(x2, x3))));
      SplitToBf16(x0, x1, prow, prow_lo);
      SplitToBf16(x2, x3, prow + 32, prow_lo + 32);
    }
    // In the last KV tile, a pass's outputs are written while the next pass multiplies, so the
    // loads wait less for the tile stores.
    const bool last = t1 >= end;
    for (int64_t ps = pass_lo; ps < pass_hi; ++ps) {
      const int64_t q0 = ps * kAmxPassRows;
      AccumulatePass<kLo>(pb + q0 * kAmxKvTile, pl + q0 * kAmxKvTile, vb, vl, n_halves, hdp,
                          acc + q0 * hdp);
      if (last && ps > pass_lo) finish(ps - 1);
    }
    if (last) {
      for (int64_t ps = 0; ps < pass_lo; ++ps) finish(ps);
      for (int64_t ps = std::max<int64_t>(pass_lo, pass_hi - 1); ps * kAmxPassRows < nq; ++ps) {
        finish(ps);
      }
    }
  }
}

}  // namespace

void AttendTileAmx(const PagedKv& kv, const TileJob& job, const TileParams& p, float* scratch) {
  static const TileConfig cfg = [] {
    TileConfig c;
    for (int t = 0; t < kAmxTiles; ++t) c.Set(t, 16, 64);
    return c;
  }();
  LoadTileConfig(cfg);
  switch (kv.dtype) {
    case KvDtype::kF32:
      return AttendTileAmxImpl<KvDtype::kF32>(kv, job, p, scratch);
    case KvDtype::kF16:
      return AttendTileAmxImpl<KvDtype::kF16>(kv, job, p, scratch);
    case KvDtype::kBf16:
      return AttendTileAmxImpl<KvDtype::kBf16>(kv, job, p, scratch);
    case KvDtype::kQ8_0:
      return AttendTileAmxImpl<KvDtype::kQ8_0>(kv, job, p, scratch);
    case KvDtype::kQ4_0:
      return AttendTileAmxImpl<KvDtype::kQ4_0>(kv, job, p, scratch);
    case KvDtype::kQ4_1:
      return AttendTileAmxImpl<KvDtype::kQ4_1>(kv, job, p, scratch);
  }
}

}  // namespace tachyon::kernels
