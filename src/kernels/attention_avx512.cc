// Paged attention, AVX-512 variant (compiled with AVX-512 flags; called only after run-time
// dispatch): the tile kernel of attention_tile.h over AVX-512 row ops, and the KV row
// conversions (F16 via vcvtps2ph / vcvtph2ps, BF16 and Q8_0 in integer SIMD). Tails use
// masked loads, so any head_dim works.
#include "kernels/ops_avx512.h"  // first: see simd_avx512.h

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/attention_decode.h"
#include "kernels/attention_tile.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"

namespace tachyon::kernels {
namespace {

using internal::HAdd;
using internal::HMax;
using internal::DecodePrefetch;
using internal::Mask16;

inline __mmask16 MaskOrZero(int64_t n) {
  return n <= 0 ? 0 : Mask16(n);
}

inline __m512 LoadBf16(const uint16_t* p, __mmask16 k) {
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}

// Lane sums of 16 vectors as one vector: result[t] = sum of a[t]'s 16 lanes.
inline __m512 Reduce16(const __m512* a) {
  __m512 s[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {  // per 128-bit lane: [x0+x2, y0+y2, x1+x3, y1+y3]
    s[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]),
                         _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
  }
  __m512 u[4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {  // per 128-bit lane: the lane's sums of 4 consecutive keys
    const __m512d x = _mm512_castps_pd(s[2 * i]), y = _mm512_castps_pd(s[2 * i + 1]);
    u[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
  }
  const __m512 w01 = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_f32x4(u[0], u[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 w23 = _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_f32x4(u[2], u[3], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(w01, w23, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(w01, w23, _MM_SHUFFLE(3, 1, 3, 1)));
}

// n elements (n % 32 == 0) of q4_0 / q4_1 blocks as floats: x = d * q + m per block (q4_0:
// m = -8 d), the reference's values exactly (see kBlockParams in attention_decode.h).
template <class Block>
inline void DequantQ4Row(const uint8_t* src, float* out, int64_t n) {
  const auto* b = reinterpret_cast<const Block*>(src);
  for (int64_t i = 0; i < n / kQK4; ++i) {
    float p[2];
    internal::BlockParamsOf<std::is_same_v<Block, BlockQ4_0> ? KvDtype::kQ4_0 : KvDtype::kQ4_1>(
        src, i, p);
    const __m512 d = _mm512_set1_ps(p[0]), m = _mm512_set1_ps(p[1]);
    const __m512i w =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i].qs)));
    const __m512 lo = _mm512_cvtepi32_ps(_mm512_and_si512(w, _mm512_set1_epi32(0xF)));
    const __m512 hi = _mm512_cvtepi32_ps(_mm512_srli_epi32(w, 4));
    _mm512_storeu_ps(out + i * kQK4, _mm512_fmadd_ps(lo, d, m));
    _mm512_storeu_ps(out + i * kQK4 + 16, _mm512_fmadd_ps(hi, d, m));
  }
}

struct Avx512Isa {
  static const float* LoadRow(KvDtype dtype, const uint8_t* src, float* buf, int64_t n) {
    switch (dtype) {
      case KvDtype::kF32:
        return reinterpret_cast<const float*>(src);
      case KvDtype::kF16: {
        const auto* h = reinterpret_cast<const uint16_t*>(src);
        for (int64_t i = 0; i < n; i += 16) {
          const __mmask16 k = Mask16(n - i);
          _mm512_mask_storeu_ps(buf + i, k, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, h + i)));
        }
        return buf;
      }
      case KvDtype::kBf16: {
        const auto* h = reinterpret_cast<const uint16_t*>(src);
        for (int64_t i = 0; i < n; i += 16) {
          const __mmask16 k = Mask16(n - i);
          _mm512_mask_storeu_ps(buf + i, k, LoadBf16(h + i, k));
        }
        return buf;
      }
      case KvDtype::kQ8_0: {
        const auto* b = reinterpret_cast<const BlockQ8_0*>(src);
        for (int64_t i = 0; i < n / kQK4; ++i) {
          const __m512 d = _mm512_set1_ps(Fp16ToF32(b[i].d));
          const __m128i* qs = reinterpret_cast<const __m128i*>(b[i].qs);
          const __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(qs)));
          const __m512 hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(qs + 1)));
          _mm512_storeu_ps(buf + i * kQK4, _mm512_mul_ps(lo, d));
          _mm512_storeu_ps(buf + i * kQK4 + 16, _mm512_mul_ps(hi, d));
        }
        return buf;
      }
      case KvDtype::kQ4_0:
        DequantQ4Row<BlockQ4_0>(src, buf, n);
        return buf;
      case KvDtype::kQ4_1:
        DequantQ4Row<BlockQ4_1>(src, buf, n);
        return buf;
    }
    return buf;
  }

  // Sixteen keys per pass: each chunk of q is loaded once for 16 dot products, and the 16
  // accumulators are reduced together into one vector of scores.
  static void Scores(const float* q, const float* const* rows, int64_t n_rows, int64_t hd,
                     float scale, float* s) {
    int64_t j = 0;
    const __m512 vscale = _mm512_set1_ps(scale);
    for (; j + 16 <= n_rows; j += 16) {
      __m512 a[16];
#pragma GCC unroll 16
      for (int t = 0; t < 16; ++t) a[t] = _mm512_setzero_ps();
      for (int64_t d = 0; d < hd; d += 16) {
        const __mmask16 k = Mask16(hd - d);
        const __m512 qv = _mm512_maskz_loadu_ps(k, q + d);
#pragma GCC unroll 16
        for (int t = 0; t < 16; ++t) {
          a[t] = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(k, rows[j + t] + d), a[t]);
        }
      }
      _mm512_storeu_ps(s + j, _mm512_mul_ps(Reduce16(a), vscale));
    }
    for (; j + 4 <= n_rows; j += 4) {
      __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(),
             a3 = _mm512_setzero_ps();
      const float *r0 = rows[j], *r1 = rows[j + 1], *r2 = rows[j + 2], *r3 = rows[j + 3];
      for (int64_t d = 0; d < hd; d += 16) {
        const __mmask16 k = Mask16(hd - d);
        const __m512 qv = _mm512_maskz_loadu_ps(k, q + d);
        a0 = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(k, r0 + d), a0);
        a1 = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(k, r1 + d), a1);
        a2 = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(k, r2 + d), a2);
        a3 = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(k, r3 + d), a3);
      }
      s[j] = HAdd(a0) * scale;
      s[j + 1] = HAdd(a1) * scale;
      s[j + 2] = HAdd(a2) * scale;
      s[j + 3] = HAdd(a3) * scale;
    }
    for (; j < n_rows; ++j) {
      __m512 a = _mm512_setzero_ps();
      for (int64_t d = 0; d < hd; d += 16) {
        const __mmask16 k = Mask16(hd - d);
        a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, q + d), _mm512_maskz_loadu_ps(k, rows[j] + d),
                            a);
      }
      s[j] = HAdd(a) * scale;
    }
  }

  // Two query heads x 8 keys per pass: each K chunk load feeds two FMAs; lanes 0-7 of the
  // joint reduction are q0's scores, lanes 8-15 q1's.
  static void Scores2(const float* q0, const float* q1, const float* const* rows, int64_t n_rows,
                      int64_t hd, float scale, float* s0, float* s1) {
    int64_t j = 0;
    const __m512 vscale = _mm512_set1_ps(scale);
    for (; j + 8 <= n_rows; j += 8) {
      __m512 a[16];
#pragma GCC unroll 16
      for (int t = 0; t < 16; ++t) a[t] = _mm512_setzero_ps();
      for (int64_t d = 0; d < hd; d += 16) {
        const __mmask16 k = Mask16(hd - d);
        const __m512 x0 = _mm512_maskz_loadu_ps(k, q0 + d), x1 = _mm512_maskz_loadu_ps(k, q1 + d);
#pragma GCC unroll 8
        for (int t = 0; t < 8; ++t) {
          const __m512 kr = _mm512_maskz_loadu_ps(k, rows[j + t] + d);
          a[t] = _mm512_fmadd_ps(x0, kr, a[t]);
          a[8 + t] = _mm512_fmadd_ps(x1, kr, a[8 + t]);
        }
      }
      const __m512 r = _mm512_mul_ps(Reduce16(a), vscale);
      _mm256_storeu_ps(s0 + j, _mm512_castps512_ps256(r));
      _mm256_storeu_ps(s1 + j, _mm512_extractf32x8_ps(r, 1));
    }
    if (j < n_rows) {
      Scores(q0, rows + j, n_rows - j, hd, scale, s0 + j);
      Scores(q1, rows + j, n_rows - j, hd, scale, s1 + j);
    }
  }

  // Four query heads x 4 keys per pass: each K chunk load feeds four FMAs; lanes 4h..4h+3 of
  // the joint reduction are head h's scores. hd % 16 == 0.
  static void Scores4(const float* q, int64_t hd, const float* const* rows, int64_t n_rows,
                      float scale, float* s0, float* s1, float* s2, float* s3) {
    float* s[4] = {s0, s1, s2, s3};
    const __m512 vscale = _mm512_set1_ps(scale);
    int64_t j = 0;
    for (; j + 4 <= n_rows; j += 4) {
      __m512 a[16];
#pragma GCC unroll 16
      for (int t = 0; t < 16; ++t) a[t] = _mm512_setzero_ps();
      for (int64_t d = 0; d < hd; d += 16) {
        __m512 k[4];
#pragma GCC unroll 4
        for (int t = 0; t < 4; ++t) k[t] = _mm512_loadu_ps(rows[j + t] + d);
#pragma GCC unroll 4
        for (int h = 0; h < 4; ++h) {
          const __m512 x = _mm512_loadu_ps(q + h * hd + d);
#pragma GCC unroll 4
          for (int t = 0; t < 4; ++t) a[4 * h + t] = _mm512_fmadd_ps(x, k[t], a[4 * h + t]);
        }
      }
      const __m512 r = _mm512_mul_ps(Reduce16(a), vscale);
      _mm_storeu_ps(s0 + j, _mm512_extractf32x4_ps(r, 0));
      _mm_storeu_ps(s1 + j, _mm512_extractf32x4_ps(r, 1));
      _mm_storeu_ps(s2 + j, _mm512_extractf32x4_ps(r, 2));
      _mm_storeu_ps(s3 + j, _mm512_extractf32x4_ps(r, 3));
    }
    if (j < n_rows) {
      for (int h = 0; h < 4; ++h) Scores(q + h * hd, rows + j, n_rows - j, hd, scale, s[h] + j);
    }
  }

  // Four heads' outputs, 64 floats each at a time (16 registers): each V chunk load feeds four
  // FMAs. hd % 64 == 0.
  static void Accumulate4(const float* const p[4], const float* const* rows, int64_t n_rows,
                          float* const acc[4], int64_t hd) {
    for (int64_t d = 0; d < hd; d += 64) {
      __m512 a[4][4];
#pragma GCC unroll 4
      for (int h = 0; h < 4; ++h) {
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) a[h][c] = _mm512_loadu_ps(acc[h] + d + 16 * c);
      }
      for (int64_t j = 0; j < n_rows; ++j) {
        const float* r = rows[j] + d;
        const __m512 v0 = _mm512_loadu_ps(r), v1 = _mm512_loadu_ps(r + 16),
                     v2 = _mm512_loadu_ps(r + 32), v3 = _mm512_loadu_ps(r + 48);
#pragma GCC unroll 4
        for (int h = 0; h < 4; ++h) {
          const __m512 w = _mm512_set1_ps(p[h][j]);
          a[h][0] = _mm512_fmadd_ps(w, v0, a[h][0]);
          a[h][1] = _mm512_fmadd_ps(w, v1, a[h][1]);
          a[h][2] = _mm512_fmadd_ps(w, v2, a[h][2]);
          a[h][3] = _mm512_fmadd_ps(w, v3, a[h][3]);
        }
      }
#pragma GCC unroll 4
      for (int h = 0; h < 4; ++h) {
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) _mm512_storeu_ps(acc[h] + d + 16 * c, a[h][c]);
      }
    }
  }

  static float Max(const float* s, int64_t n) {
    __m512 mx = _mm512_set1_ps(s[0]);
    for (int64_t i = 0; i < n; i += 16) {
      mx = _mm512_mask_max_ps(mx, Mask16(n - i), mx, _mm512_maskz_loadu_ps(Mask16(n - i), s + i));
    }
    return HMax(mx);
  }
  static float ExpSub(float* s, int64_t n, float m) {
    const __m512 vm = _mm512_set1_ps(m);
    __m512 sum = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 k = Mask16(n - i);
      const __m512 e = internal::Exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + i), vm));
      _mm512_mask_storeu_ps(s + i, k, e);
      sum = _mm512_mask_add_ps(sum, k, sum, e);
    }
    return HAdd(sum);
  }

  static void Scale(float* y, float a, int64_t n) {
    const __m512 va = _mm512_set1_ps(a);
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 k = Mask16(n - i);
      _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, y + i), va));
    }
  }

  // 64 output floats at a time stay in four registers across all rows.
  static void Accumulate(const float* p, const float* const* rows, int64_t n_rows, float* acc,
                         int64_t hd) {
    int64_t d = 0;
    for (; d + 64 <= hd; d += 64) {  // whole chunks: no masks, no per-row tests
      __m512 a0 = _mm512_loadu_ps(acc + d), a1 = _mm512_loadu_ps(acc + d + 16),
             a2 = _mm512_loadu_ps(acc + d + 32), a3 = _mm512_loadu_ps(acc + d + 48);
      for (int64_t j = 0; j < n_rows; ++j) {
        const __m512 w = _mm512_set1_ps(p[j]);
        const float* r = rows[j] + d;
        a0 = _mm512_fmadd_ps(w, _mm512_loadu_ps(r), a0);
        a1 = _mm512_fmadd_ps(w, _mm512_loadu_ps(r + 16), a1);
        a2 = _mm512_fmadd_ps(w, _mm512_loadu_ps(r + 32), a2);
        a3 = _mm512_fmadd_ps(w, _mm512_loadu_ps(r + 48), a3);
      }
      _mm512_storeu_ps(acc + d, a0);
      _mm512_storeu_ps(acc + d + 16, a1);
      _mm512_storeu_ps(acc + d + 32, a2);
      _mm512_storeu_ps(acc + d + 48, a3);
    }
    for (; d < hd; d += 64) {
      const __mmask16 k0 = MaskOrZero(hd - d), k1 = MaskOrZero(hd - d - 16),
                      k2 = MaskOrZero(hd - d - 32), k3 = MaskOrZero(hd - d - 48);
      __m512 a0 = _mm512_maskz_loadu_ps(k0, acc + d);
      __m512 a1 = hd - d > 16 ? _mm512_maskz_loadu_ps(k1, acc + d + 16) : _mm512_setzero_ps();
      __m512 a2 = hd - d > 32 ? _mm512_maskz_loadu_ps(k2, acc + d + 32) : _mm512_setzero_ps();
      __m512 a3 = hd - d > 48 ? _mm512_maskz_loadu_ps(k3, acc + d + 48) : _mm512_setzero_ps();
      for (int64_t j = 0; j < n_rows; ++j) {
        const __m512 w = _mm512_set1_ps(p[j]);
        const float* r = rows[j] + d;
        a0 = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(k0, r), a0);
        if (hd - d > 16) a1 = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(k1, r + 16), a1);
        if (hd - d > 32) a2 = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(k2, r + 32), a2);
        if (hd - d > 48) a3 = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(k3, r + 48), a3);
      }
      _mm512_mask_storeu_ps(acc + d, k0, a0);
      if (hd - d > 16) _mm512_mask_storeu_ps(acc + d + 16, k1, a1);
      if (hd - d > 32) _mm512_mask_storeu_ps(acc + d + 32, k2, a2);
      if (hd - d > 48) _mm512_mask_storeu_ps(acc + d + 48, k3, a3);
    }
  }
};

// ---- Decode kernel: few query vectors per KV head (decode, speculative verify) ----
//
// Each K/V chunk of 16 elements is converted from the cache dtype in registers right where it
// is used (no f32 scratch copy) and feeds the FMAs of a group of query vectors. Per tile of
// kDecodeKvTile keys: the scores of every query slot (Reduce16 over 8 slots x 2 keys, 4 x 4,
// 2 x 8 or 1 x 16), one vectorised max / exp pass per slot, then P·V with the accumulators in
// registers (rescaled by the slot's alpha as they are loaded). Each query vector's arithmetic
// is the same whichever slot group it falls in and however many vectors share the job, so the
// kernel serves every job of PagedAttention (up to kDecodeMaxQueries vectors) and a row's
// output does not depend on the rows computed beside it.

// 16 elements at element d (d % 16 == 0) of a KV row of dtype D as floats; lanes off in k
// read as 0 (nothing outside them is touched).
// kMasked false: all 16 lanes (k unused). q8_0 takes the row's block scales as floats from
// `scales` (converted once per tile: a broadcast from memory here, no f16 conversion per chunk);
// q4_0 / q4_1 their (d, m) pairs (kBlockParams): the block's 16 bytes widened, the low nibbles
// (chunk at d % 32 == 0) or the high ones, then one FMA.
// bf16 rows read as pairs (head_dim % 32 == 0): the 32-bit word i of a 32-element block holds
// elements 2i (low half) and 2i + 1 (high half), so one shift (even elements) or one AND (odd
// elements) turns 16 of them into floats, where the plain bf16 path widens and shifts. The
// kernel then works in a permuted element order, "virtual" chunk d (d % 16 == 0) being the
// even (d % 32 == 0) or odd elements of the block at d / 32 * 32: the queries are permuted to
// match and the outputs permuted back. An internal template tag, not a KvDtype value.
constexpr KvDtype kBf16Pairs = static_cast<KvDtype>(0x82);

template <KvDtype D, bool kMasked>
inline __m512 LoadKv(const uint8_t* row, const float* scales, int64_t d, __mmask16 k) {
  if constexpr (D == kBf16Pairs) {  // whole 32-element blocks: k is all or nothing
    if (kMasked && k == 0) return _mm512_setzero_ps();
    const __m512i w = _mm512_loadu_si512(reinterpret_cast<const uint16_t*>(row) + d / 32 * 32);
    return _mm512_castsi512_ps((d & 16) ? _mm512_and_si512(w, _mm512_set1_epi32(~0xFFFF))
                                        : _mm512_slli_epi32(w, 16));
  } else if constexpr (D == KvDtype::kF32) {
    const float* x = reinterpret_cast<const float*>(row) + d;
    return kMasked ? _mm512_maskz_loadu_ps(k, x) : _mm512_loadu_ps(x);
  } else if constexpr (D == KvDtype::kF16) {
    const uint16_t* x = reinterpret_cast<const uint16_t*>(row) + d;
    return _mm512_cvtph_ps(kMasked ? _mm256_maskz_loadu_epi16(k, x)
                                   : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
  } else if constexpr (D == KvDtype::kBf16) {
    const uint16_t* x = reinterpret_cast<const uint16_t*>(row) + d;
    const __m256i h = kMasked ? _mm256_maskz_loadu_epi16(k, x)
                              : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else if constexpr (D == KvDtype::kQ4_0 || D == KvDtype::kQ4_1) {  // as q8_0: k all or none
    if (kMasked && k == 0) return _mm512_setzero_ps();
    using Block = std::conditional_t<D == KvDtype::kQ4_0, BlockQ4_0, BlockQ4_1>;
    const Block* b = reinterpret_cast<const Block*>(row) + d / kQK4;
    const __m512i w =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qs)));
    const __m512i q =
        (d & 16) ? _mm512_srli_epi32(w, 4) : _mm512_and_si512(w, _mm512_set1_epi32(0xF));
    const float* pm = scales + 2 * (d / kQK4);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(q), _mm512_set1_ps(pm[0]), _mm512_set1_ps(pm[1]));
  } else {  // q8_0: head_dim % 32 == 0, so a chunk is all in (k full) or all out (k == 0)
    if (kMasked && k == 0) return _mm512_setzero_ps();
    const BlockQ8_0* b = reinterpret_cast<const BlockQ8_0*>(row) + d / kQK4;
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qs + d % kQK4));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)),
                         _mm512_set1_ps(scales[d / kQK4]));
  }
}

// s[h][j..] = scale * q[h] · K[j] for H query slots and keys j in [0, n), n % (16 / H) == 0:
// 16 / H keys x H slots per pass, one joint 16-way reduction (lane h * T + t: slot h, key t).
// pf (may be null) is told each key as its pass starts.
template <KvDtype D, int H>
inline void DecodeScores(const float* const* q, const uint8_t* const* rows, const float* scales,
                         int64_t n, int64_t hd, float scale, float* const* s,
                         const DecodePrefetch* pf) {
  const int64_t nb = internal::KvParamStride<D>(hd);  // block parameters per row
  constexpr int T = 16 / H;
  const __m512 vscale = _mm512_set1_ps(scale);
  const int64_t hd_full = hd / 16 * 16;
  const __mmask16 k_tail = Mask16(hd - hd_full);
  __m512 a[16];
  // One 16-element chunk at d of T keys x H slots.
  auto chunk = [&](int64_t j, int64_t d, auto masked) {
    constexpr bool kMasked = decltype(masked)::value;
    __m512 kv[T];
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t)
      kv[t] = LoadKv<D, kMasked>(rows[j + t], scales + (j + t) * nb, d, k_tail);
#pragma GCC unroll 8
    for (int h = 0; h < H; ++h) {
      const __m512 x =
          kMasked ? _mm512_maskz_loadu_ps(k_tail, q[h] + d) : _mm512_loadu_ps(q[h] + d);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) a[h * T + t] = _mm512_fmadd_ps(x, kv[t], a[h * T + t]);
    }
  };
  for (int64_t j = 0; j < n; j += T) {
    if (pf) {
      for (int64_t t = j; t < j + T; ++t) pf->Key(t);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) a[i] = _mm512_setzero_ps();
    for (int64_t d = 0; d < hd_full; d += 16) chunk(j, d, std::false_type());
    if (hd_full < hd) chunk(j, hd_full, std::true_type());
    const __m512 r = _mm512_mul_ps(Reduce16(a), vscale);
    if constexpr (H == 1) {
      _mm512_storeu_ps(s[0] + j, r);
    } else if constexpr (H == 2) {
      _mm256_storeu_ps(s[0] + j, _mm512_castps512_ps256(r));
      _mm256_storeu_ps(s[1] + j, _mm512_extractf32x8_ps(r, 1));
    } else if constexpr (H == 4) {
      _mm_storeu_ps(s[0] + j, _mm512_extractf32x4_ps(r, 0));
      _mm_storeu_ps(s[1] + j, _mm512_extractf32x4_ps(r, 1));
      _mm_storeu_ps(s[2] + j, _mm512_extractf32x4_ps(r, 2));
      _mm_storeu_ps(s[3] + j, _mm512_extractf32x4_ps(r, 3));
    } else {  // H == 8: two keys per slot
      const __m128 x[4] = {_mm512_extractf32x4_ps(r, 0), _mm512_extractf32x4_ps(r, 1),
                           _mm512_extractf32x4_ps(r, 2), _mm512_extractf32x4_ps(r, 3)};
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        _mm_storel_pi(reinterpret_cast<__m64*>(s[2 * c] + j), x[c]);
        _mm_storeh_pi(reinterpret_cast<__m64*>(s[2 * c + 1] + j), x[c]);
      }
    }
  }
}

// acc[h] = alpha[h] * acc[h] + sum_{j < n} p[h][j] * V[j] for H slots, 16 C output floats at
// a time in registers (C = 4 chunks x H slots, C = 2 for 8 slots). Every output float is one
// chain over the keys in order, whatever H: a query's result must not depend on how many other
// query vectors share its job (batch invariance: a prompt's rows give the same outputs in a
// step of 1 row as in a step of 64).
template <KvDtype D, int H>
inline void DecodeAccumulate(const float* const* p, const float* alpha, const uint8_t* const* rows,
                             const float* scales, int64_t n, int64_t hd, float* const* acc) {
  const int64_t nb = internal::KvParamStride<D>(hd);
  constexpr int C = H == 8 ? 2 : 4;
  // The 16 C floats at d0 (kMasked: the chunks' masks k, the last pass of a head_dim that is
  // not a multiple of 16 C).
  auto pass = [&](int64_t d0, const __mmask16* k, auto masked) {
    constexpr bool kMasked = decltype(masked)::value;
    __m512 a[H][C];
#pragma GCC unroll 8
    for (int h = 0; h < H; ++h) {
      const __m512 al = _mm512_set1_ps(alpha[h]);
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) {
        const float* x = acc[h] + d0 + 16 * c;
        a[h][c] = _mm512_mul_ps(kMasked ? _mm512_maskz_loadu_ps(k[c], x) : _mm512_loadu_ps(x), al);
      }
    }
    for (int64_t j = 0; j < n; ++j) {
      __m512 v[C];
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c)
        v[c] = LoadKv<D, kMasked>(rows[j], scales + j * nb, d0 + 16 * c, k[c]);
#pragma GCC unroll 8
      for (int h = 0; h < H; ++h) {
        const __m512 w = _mm512_set1_ps(p[h][j]);
#pragma GCC unroll 4
        for (int c = 0; c < C; ++c) a[h][c] = _mm512_fmadd_ps(w, v[c], a[h][c]);
      }
    }
#pragma GCC unroll 8
    for (int h = 0; h < H; ++h) {
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) {
        float* y = acc[h] + d0 + 16 * c;
        if constexpr (kMasked) {
          _mm512_mask_storeu_ps(y, k[c], a[h][c]);
        } else {
          _mm512_storeu_ps(y, a[h][c]);
        }
      }
    }
  };
  int64_t d0 = 0;
  __mmask16 all[C];
  for (int c = 0; c < C; ++c) all[c] = 0xFFFF;
  for (; d0 + 16 * C <= hd; d0 += 16 * C) pass(d0, all, std::false_type());
  if (d0 < hd) {
    __mmask16 k[C];
    for (int c = 0; c < C; ++c) k[c] = MaskOrZero(hd - d0 - 16 * c);
    pass(d0, k, std::true_type());
  }
}

// The 16-wide policy of the decode driver (attention_decode.h).
struct Avx512Decode {
  static constexpr int64_t kKeyGroup = 16;
  // Groups of 4 slots (4 keys per score pass; 4 V chunks per key in P·V): with 64-vector
  // prefill jobs, groups of 8 (2 keys per pass, 8 query loads per 2 K loads) measured ~8%
  // slower (attention_bench Prefill/f16/avx512), decode the same. Kernels for H = 8 remain
  // (the policy supports it).
  static constexpr int kMaxSlotGroup = 4;
  // Converting each tile's K / V to f32 once per job is measured at the AVX2 level only.
  static constexpr int64_t kConvertMinSlots = 0;

  // bf16 pairs: the query in the virtual (even / odd) element order; else q itself.
  template <KvDtype D>
  static const float* Query(const float* q, int64_t hd, float* buf) {
    if constexpr (D != kBf16Pairs) {
      return q;
    } else {
      const __m512i even =
          _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
      const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
      for (int64_t d = 0; d < hd; d += 32) {
        const __m512 x0 = _mm512_loadu_ps(q + d), x1 = _mm512_loadu_ps(q + d + 16);
        _mm512_storeu_ps(buf + d, _mm512_permutex2var_ps(x0, even, x1));
        _mm512_storeu_ps(buf + d + 16, _mm512_permutex2var_ps(x0, odd, x1));
      }
      return buf;
    }
  }

  template <KvDtype D, int H>
  static void Scores(const float* const* q, const uint8_t* const* rows, const float* scales,
                     int64_t n, int64_t hd, float scale, float* const* s,
                     const DecodePrefetch* pf) {
    DecodeScores<D, H>(q, rows, scales, n, hd, scale, s, pf);
  }

  template <KvDtype D, int H>
  static void Accumulate(const float* const* p, const float* alpha, const uint8_t* const* rows,
                         const float* scales, int64_t n, int64_t hd, float* const* acc) {
    DecodeAccumulate<D, H>(p, alpha, rows, scales, n, hd, acc);
  }

  static void Softmax(float* si, int64_t n_pad, int64_t vlo, int64_t vhi, float& m, float& l,
                      float& alpha) {
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i vlo_v = _mm512_set1_epi32(static_cast<int>(vlo));
    const __m512i vhi_v = _mm512_set1_epi32(static_cast<int>(vhi));
    __mmask16 vis[internal::kDecodeKvTile / 16];
    __m512 mx = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    for (int64_t c = 0; c < n_pad / 16; ++c) {
      const __m512i idx = _mm512_add_epi32(iota, _mm512_set1_epi32(static_cast<int>(16 * c)));
      vis[c] = _mm512_cmpge_epi32_mask(idx, vlo_v) & _mm512_cmplt_epi32_mask(idx, vhi_v);
      mx = _mm512_mask_max_ps(mx, vis[c], mx, _mm512_loadu_ps(si + 16 * c));
    }
    const float m_new = std::max(m, HMax(mx));
    alpha = m == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp(m - m_new);
    m = m_new;
    const __m512 vm = _mm512_set1_ps(m_new);
    __m512 sum = _mm512_setzero_ps();
    for (int64_t c = 0; c < n_pad / 16; ++c) {
      const __m512 e = _mm512_maskz_mov_ps(
          vis[c], internal::Exp(_mm512_sub_ps(_mm512_loadu_ps(si + 16 * c), vm)));
      _mm512_storeu_ps(si + 16 * c, e);
      sum = _mm512_add_ps(sum, e);
    }
    l = l * alpha + HAdd(sum);
  }

  template <KvDtype D>
  static void Output(float* out, const float* acc, float inv_l, int64_t hd) {
    const __m512 inv = _mm512_set1_ps(inv_l);
    if constexpr (D == kBf16Pairs) {  // back from the virtual order: interleave even / odd
      const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
      const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(8));
      for (int64_t d = 0; d < hd; d += 32) {
        const __m512 e = _mm512_mul_ps(_mm512_loadu_ps(acc + d), inv);
        const __m512 o = _mm512_mul_ps(_mm512_loadu_ps(acc + d + 16), inv);
        _mm512_storeu_ps(out + d, _mm512_permutex2var_ps(e, lo, o));
        _mm512_storeu_ps(out + d + 16, _mm512_permutex2var_ps(e, hi, o));
      }
    } else {
      for (int64_t d = 0; d < hd; d += 16) {
        const __mmask16 k = Mask16(hd - d);
        _mm512_mask_storeu_ps(out + d, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, acc + d), inv));
      }
    }
  }
};

void AttendDecodeAvx512(const PagedKv& kv, const TileJob& job, const TileParams& p,
                        const internal::DecodePart* part, float* scratch) {
  switch (kv.dtype) {
    case KvDtype::kF32:
      return internal::AttendDecodeImpl<Avx512Decode, KvDtype::kF32>(kv, job, p, part, scratch);
    case KvDtype::kF16:
      return internal::AttendDecodeImpl<Avx512Decode, KvDtype::kF16>(kv, job, p, part, scratch);
    case KvDtype::kBf16:
      if (kv.head_dim % 32 == 0)
        return internal::AttendDecodeImpl<Avx512Decode, kBf16Pairs>(kv, job, p, part, scratch);
      return internal::AttendDecodeImpl<Avx512Decode, KvDtype::kBf16>(kv, job, p, part, scratch);
    case KvDtype::kQ8_0:
      return internal::AttendDecodeImpl<Avx512Decode, KvDtype::kQ8_0>(kv, job, p, part, scratch);
    case KvDtype::kQ4_0:
      return internal::AttendDecodeImpl<Avx512Decode, KvDtype::kQ4_0>(kv, job, p, part, scratch);
    case KvDtype::kQ4_1:
      return internal::AttendDecodeImpl<Avx512Decode, KvDtype::kQ4_1>(kv, job, p, part, scratch);
  }
}

// Round-to-nearest-even f32 -> bf16 in integer SIMD (exactly as F32ToBf16, NaN included).
inline __m256i ToBf16(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r =
      _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), lsb)), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)),
                                                _mm512_set1_epi32(0x7F800000));
  r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(r);
}

// One Q8_0 block as the reference quantizer: d = amax / 127, q = lround(x / d).
inline void QuantQ8(const float* x, BlockQ8_0* b) {
  const __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
  const __m512 amax = _mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1));
  const float d = HMax(amax) / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  const __m512 vid = _mm512_set1_ps(id);
  for (int h = 0; h < 2; ++h) {
    const __m512 v = _mm512_mul_ps(h ? x1 : x0, vid);
    // lround: round half away from zero = trunc(v) + (|v - trunc(v)| >= 0.5 ? sign : 0).
    const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __mmask16 up =
        _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(v, t)), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    const __m512 sgn = _mm512_or_ps(_mm512_set1_ps(1.0f), _mm512_and_ps(v, _mm512_set1_ps(-0.0f)));
    const __m512 r = _mm512_mask_add_ps(t, up, t, sgn);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(b->qs + 16 * h),
                     _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(r)));
  }
  b->d = F32ToFp16(d);
}

}  // namespace

void AttendTileAvx512(const PagedKv& kv, const TileJob& job, const TileParams& p, float* scratch) {
  if (internal::Avx512DecodeTakes(job.n_rows * p.n_group)) {
    return AttendDecodeAvx512(kv, job, p, nullptr, scratch);
  }
  internal::AttendTileImpl<Avx512Isa>(kv, job, p, scratch);
}

namespace internal {

void AttendDecodePartAvx512(const PagedKv& kv, const TileJob& job, const TileParams& p,
                            const DecodePart& part, float* scratch) {
  AttendDecodeAvx512(kv, job, p, &part, scratch);
}

void StoreKvRowAvx512(KvDtype dtype, const float* x, void* dst, int64_t n) {
  switch (dtype) {
    case KvDtype::kF32:
      for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = Mask16(n - i);
        _mm512_mask_storeu_ps(static_cast<float*>(dst) + i, k, _mm512_maskz_loadu_ps(k, x + i));
      }
      return;
    case KvDtype::kF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = Mask16(n - i);
        const __m256i v = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(k, x + i),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_mask_storeu_epi16(h + i, k, v);
      }
      return;
    }
    case KvDtype::kBf16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = Mask16(n - i);
        _mm256_mask_storeu_epi16(h + i, k, ToBf16(_mm512_maskz_loadu_ps(k, x + i)));
      }
      return;
    }
    case KvDtype::kQ8_0: {
      auto* b = static_cast<BlockQ8_0*>(dst);
      for (int64_t i = 0; i < n / kQK4; ++i) QuantQ8(x + i * kQK4, b + i);
      return;
    }
    case KvDtype::kQ4_0:
    case KvDtype::kQ4_1:  // the scalar quantizer: a small cost next to the step (attention.md)
      return StoreKvRowReference(dtype, x, dst, n);
  }
}

}  // namespace internal
}  // namespace tachyon::kernels
