// Paged attention, AVX-512 variant (compiled with AVX-512 flags; called only after run-time
// dispatch): the tile kernel of attention_tile.h over AVX-512 row ops, and the KV row
// conversions (F16 via vcvtps2ph / vcvtph2ps, BF16 and Q8_0 in integer SIMD). Tails use
// masked loads, so any head_dim works.
#include "kernels/ops_avx512.h"  // first: see simd_avx512.h

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/attention_tile.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"

namespace tachyon::kernels {
namespace {

using internal::HAdd;
using internal::HMax;
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
// is used (no f32 scratch copy) and feeds the FMAs of up to eight query vectors. Per tile of
// kDecodeKvTile keys: the scores of every query slot (Reduce16 over 8 slots x 2 keys, 4 x 4,
// 2 x 8 or 1 x 16), one vectorised max / exp pass per slot, then P·V with the accumulators in
// registers (rescaled by the slot's alpha as they are loaded).

// Software prefetch of one KV row: a batched step sees each sequence's blocks once, in
// scattered block-sized runs too short for the hardware prefetcher.
inline void PrefetchRow(const uint8_t* row, size_t row_bytes) {
  for (size_t off = 0; off < row_bytes; off += 64)
    _mm_prefetch(reinterpret_cast<const char*>(row + off), _MM_HINT_T0);
}

// 16 elements at element d (d % 16 == 0) of a KV row of dtype D as floats; lanes off in k
// read as 0 (nothing outside them is touched).
// kMasked false: all 16 lanes (k unused). q8_0 takes the row's block scales as floats from
// `scales` (converted once per tile: a broadcast from memory here, no f16 conversion per chunk).
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
  } else {  // q8_0: head_dim % 32 == 0, so a chunk is all in (k full) or all out (k == 0)
    if (kMasked && k == 0) return _mm512_setzero_ps();
    const BlockQ8_0* b = reinterpret_cast<const BlockQ8_0*>(row) + d / kQK4;
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qs + d % kQK4));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)),
                         _mm512_set1_ps(scales[d / kQK4]));
  }
}

// Software prefetch during a tile's scores, key by key: K rows kDecodePrefetchKeys keys ahead
// (running into the next tile) and the tile's own V rows (read by P·V after all the scores).
// DRAM- or L3-resident KV (a batched step streams each sequence's blocks once, in block-sized
// runs too short for the hardware prefetcher) is then in flight long before it is used.
constexpr int64_t kDecodePrefetchKeys = 32;
struct DecodePrefetch {
  const uint8_t* const* k_cur;   // the tile's K rows [0, n)
  const uint8_t* const* v_cur;   // its V rows
  const uint8_t* const* k_next;  // the next tile's K rows [0, n_next)
  int64_t n, n_next;
  size_t row_bytes;
  void Key(int64_t j) const {
    const int64_t a = j + kDecodePrefetchKeys;
    if (a < n) {
      PrefetchRow(k_cur[a], row_bytes);
    } else if (a - n < n_next) {
      PrefetchRow(k_next[a - n], row_bytes);
    }
    if (j < n) PrefetchRow(v_cur[j], row_bytes);
  }
};

// s[h][j..] = scale * q[h] · K[j] for H query slots and keys j in [0, n), n % (16 / H) == 0:
// 16 / H keys x H slots per pass, one joint 16-way reduction (lane h * T + t: slot h, key t).
// pf (may be null) is told each key as its pass starts.
template <KvDtype D, int H>
inline void DecodeScores(const float* const* q, const uint8_t* const* rows, const float* scales,
                         int64_t n, int64_t hd, float scale, float* const* s,
                         const DecodePrefetch* pf) {
  const int64_t nb = hd / kQK4;  // q8_0 scales per row
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
// a time in registers (C = 4 chunks x H slots, C = 2 for 8 slots; a lone slot splits the keys
// over two accumulator sets so that FMA latency is covered).
template <KvDtype D, int H>
inline void DecodeAccumulate(const float* const* p, const float* alpha, const uint8_t* const* rows,
                             const float* scales, int64_t n, int64_t hd, float* const* acc) {
  const int64_t nb = hd / kQK4;
  constexpr int S = H == 1 ? 2 : 1;
  constexpr int C = H == 8 ? 2 : 4;
  // The 16 C floats at d0 (kMasked: the chunks' masks k, the last pass of a head_dim that is
  // not a multiple of 16 C).
  auto pass = [&](int64_t d0, const __mmask16* k, auto masked) {
    constexpr bool kMasked = decltype(masked)::value;
    __m512 a[S][H][C];
#pragma GCC unroll 8
    for (int h = 0; h < H; ++h) {
      const __m512 al = _mm512_set1_ps(alpha[h]);
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) {
        const float* x = acc[h] + d0 + 16 * c;
        a[0][h][c] =
            _mm512_mul_ps(kMasked ? _mm512_maskz_loadu_ps(k[c], x) : _mm512_loadu_ps(x), al);
        if constexpr (S == 2) a[1][h][c] = _mm512_setzero_ps();
      }
    }
    auto key = [&](int64_t j, int e) {
      __m512 v[C];
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c)
        v[c] = LoadKv<D, kMasked>(rows[j], scales + j * nb, d0 + 16 * c, k[c]);
#pragma GCC unroll 8
      for (int h = 0; h < H; ++h) {
        const __m512 w = _mm512_set1_ps(p[h][j]);
#pragma GCC unroll 4
        for (int c = 0; c < C; ++c) a[e][h][c] = _mm512_fmadd_ps(w, v[c], a[e][h][c]);
      }
    };
    int64_t j = 0;
    for (; j + S <= n; j += S) {
#pragma GCC unroll 2
      for (int e = 0; e < S; ++e) {
        key(j + e, e);
      }
    }
    if (j < n) key(j, 0);  // S == 2 and n odd
#pragma GCC unroll 8
    for (int h = 0; h < H; ++h) {
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) {
        __m512 x = a[0][h][c];
        if constexpr (S == 2) x = _mm512_add_ps(x, a[1][h][c]);
        float* y = acc[h] + d0 + 16 * c;
        if constexpr (kMasked) {
          _mm512_mask_storeu_ps(y, k[c], x);
        } else {
          _mm512_storeu_ps(y, x);
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

// Runs fn(integral_constant<int, H>, first_slot) over the slots [0, n_slots) in groups of 8,
// then 4, 2, 1 (groups of 8: each converted K / V chunk feeds 8 slots).
template <class Fn>
inline void ForSlotGroups(int64_t n_slots, Fn&& fn) {
  int64_t i = 0;
  for (; i + 8 <= n_slots; i += 8) fn(std::integral_constant<int, 8>(), i);
  for (; i + 4 <= n_slots; i += 4) fn(std::integral_constant<int, 4>(), i);
  if (i + 2 <= n_slots) {
    fn(std::integral_constant<int, 2>(), i);
    i += 2;
  }
  if (i < n_slots) fn(std::integral_constant<int, 1>(), i);
}

template <KvDtype D>
void AttendDecodeImpl(const PagedKv& kv, const TileJob& job, const TileParams& p, float* scratch) {
  using internal::kDecodeKvTile;
  const int64_t hd = kv.head_dim, n_group = p.n_group, nq = job.n_rows * n_group;
  const int64_t ns = internal::DecodeSlots(nq);         // a dummy slot repeats the last query
  float* const s_base = scratch;                        // [ns][kDecodeKvTile] scores, then weights
  float* const acc_base = s_base + ns * kDecodeKvTile;  // [ns][hd]
  float* const m = acc_base + ns * hd;                  // [ns] running max
  float* const l = m + ns;                              // [ns] running sum
  float* const alpha = l + ns;                          // [ns] this tile's rescale factor
  float* const ksc = alpha + ns;  // q8_0: [kDecodeKvTile][hd / 32] block scales of K
  float* const vsc = ksc + kDecodeKvTile * (hd / kQK4);    // and of V
  float* const qperm = vsc + kDecodeKvTile * (hd / kQK4);  // bf16 pairs: [ns][hd] queries
  const float* q[internal::kDecodeMaxQueries];
  float* s[internal::kDecodeMaxQueries];
  float* acc[internal::kDecodeMaxQueries];
  int64_t row_of[internal::kDecodeMaxQueries];
  for (int64_t i = 0; i < ns; ++i) {
    const int64_t qi = std::min(i, nq - 1);
    row_of[i] = qi / n_group;
    q[i] = job.q + row_of[i] * job.row_stride + (qi % n_group) * hd;
    if constexpr (D == kBf16Pairs) {  // the query in the virtual (even / odd) element order
      float* qp = qperm + i * hd;
      const __m512i even =
          _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
      const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
      for (int64_t d = 0; d < hd; d += 32) {
        const __m512 x0 = _mm512_loadu_ps(q[i] + d), x1 = _mm512_loadu_ps(q[i] + d + 16);
        _mm512_storeu_ps(qp + d, _mm512_permutex2var_ps(x0, even, x1));
        _mm512_storeu_ps(qp + d + 16, _mm512_permutex2var_ps(x0, odd, x1));
      }
      q[i] = qp;
    }
    s[i] = s_base + i * kDecodeKvTile;
    acc[i] = acc_base + i * hd;
    m[i] = -std::numeric_limits<float>::infinity();
    l[i] = 0.0f;
  }
  std::fill(acc_base, acc_base + ns * hd, 0.0f);

  const int64_t window = p.sliding_window;
  const int64_t first = job.pos_start, end = job.pos_start + job.n_rows;
  const int64_t lo = window > 0 ? std::max<int64_t>(0, first + 1 - window) : 0;
  const size_t row_bytes = kv.row_bytes();
  // Row pointers of the current tile and the next one (double-buffered, so that K rows of the
  // next tile can be prefetched while the current one is computed).
  const uint8_t* rows[2][2][kDecodeKvTile];  // [buffer][K, V][key]
  const int64_t bs = kv.block_size;
  const auto* kbase = static_cast<const uint8_t*>(kv.k);
  const auto* vbase = static_cast<const uint8_t*>(kv.v);
  auto fill_rows = [&](int64_t t0, int64_t t1, const uint8_t** kr, const uint8_t** vr) {
    int64_t b = t0 / bs, slot = t0 - b * bs;
    for (int64_t t = t0; t < t1; ++b, slot = 0) {
      const int64_t len = std::min(t1 - t, bs - slot);
      const size_t off =
          static_cast<size_t>((job.block_table[b] * kv.n_kv_heads + job.kv_head) * bs + slot) *
          row_bytes;
      for (int64_t i = 0; i < len; ++i) {
        kr[t - t0 + i] = kbase + off + i * row_bytes;
        vr[t - t0 + i] = vbase + off + i * row_bytes;
      }
      t += len;
    }
  };
  int cur = 0;
  fill_rows(lo, std::min(lo + kDecodeKvTile, end), rows[0][0], rows[0][1]);
  for (int64_t j = 0; j < std::min(kDecodePrefetchKeys, end - lo); ++j) {
    PrefetchRow(rows[0][0][j], row_bytes);
  }
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int64_t t0 = lo; t0 < end; t0 += kDecodeKvTile) {
    const int64_t t1 = std::min(t0 + kDecodeKvTile, end), n = t1 - t0;
    const int64_t n_next = std::min(t1 + kDecodeKvTile, end) - t1;
    const uint8_t** krow = rows[cur][0];
    const uint8_t** vrow = rows[cur][1];
    if (n_next > 0) fill_rows(t1, t1 + n_next, rows[cur ^ 1][0], rows[cur ^ 1][1]);
    const DecodePrefetch pf{krow, vrow, rows[cur ^ 1][0], n, n_next, row_bytes};
    // Scores of a whole number of 16-key groups: the padding keys repeat the last row and are
    // masked out below.
    const int64_t n_pad = (n + 15) / 16 * 16;
    for (int64_t j = n; j < n_pad; ++j) krow[j] = krow[n - 1];
    if constexpr (D == KvDtype::kQ8_0) {  // the tile's block scales as floats
      const int64_t nb = hd / kQK4;
      for (int64_t j = 0; j < n_pad; ++j) {
        for (int64_t b = 0; b < nb; ++b) {
          ksc[j * nb + b] = _cvtsh_ss(reinterpret_cast<const BlockQ8_0*>(krow[j])[b].d);
          if (j < n) vsc[j * nb + b] = _cvtsh_ss(reinterpret_cast<const BlockQ8_0*>(vrow[j])[b].d);
        }
      }
    }
    ForSlotGroups(ns, [&](auto h_const, int64_t i) {
      constexpr int H = decltype(h_const)::value;
      DecodeScores<D, H>(q + i, krow, ksc, n_pad, hd, p.scale, s + i, i == 0 ? &pf : nullptr);
    });
    // Online softmax per slot over the keys its row sees: [vlo, vhi) of the tile.
    for (int64_t i = 0; i < ns; ++i) {
      const int64_t pos = first + row_of[i];
      const int64_t wlo = window > 0 ? pos + 1 - window : 0;
      const int64_t vlo = std::clamp<int64_t>(wlo - t0, 0, n);
      const int64_t vhi = std::clamp<int64_t>(pos + 1 - t0, 0, n);
      float* si = s[i];
      if (vlo >= vhi) {  // nothing visible in this tile (later rows' keys, or out of window)
        alpha[i] = 1.0f;
        std::fill(si, si + n, 0.0f);
        continue;
      }
      const __m512i vlo_v = _mm512_set1_epi32(static_cast<int>(vlo));
      const __m512i vhi_v = _mm512_set1_epi32(static_cast<int>(vhi));
      __mmask16 vis[kDecodeKvTile / 16];
      __m512 mx = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
      for (int64_t c = 0; c < n_pad / 16; ++c) {
        const __m512i idx = _mm512_add_epi32(iota, _mm512_set1_epi32(static_cast<int>(16 * c)));
        vis[c] = _mm512_cmpge_epi32_mask(idx, vlo_v) & _mm512_cmplt_epi32_mask(idx, vhi_v);
        mx = _mm512_mask_max_ps(mx, vis[c], mx, _mm512_loadu_ps(si + 16 * c));
      }
      const float m_new = std::max(m[i], HMax(mx));
      alpha[i] = m[i] == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp(m[i] - m_new);
      m[i] = m_new;
      const __m512 vm = _mm512_set1_ps(m_new);
      __m512 sum = _mm512_setzero_ps();
      for (int64_t c = 0; c < n_pad / 16; ++c) {
        const __m512 e = _mm512_maskz_mov_ps(
            vis[c], internal::Exp(_mm512_sub_ps(_mm512_loadu_ps(si + 16 * c), vm)));
        _mm512_storeu_ps(si + 16 * c, e);
        sum = _mm512_add_ps(sum, e);
      }
      l[i] = l[i] * alpha[i] + HAdd(sum);
    }
    ForSlotGroups(ns, [&](auto h_const, int64_t i) {
      constexpr int H = decltype(h_const)::value;
      DecodeAccumulate<D, H>(s + i, alpha + i, vrow, vsc, n, hd, acc + i);
    });
    cur ^= 1;
  }
  for (int64_t i = 0; i < nq; ++i) {
    float* out = job.out + row_of[i] * job.row_stride + (i % n_group) * hd;
    const __m512 inv = _mm512_set1_ps(1.0f / l[i]);
    if constexpr (D == kBf16Pairs) {  // back from the virtual order: interleave even / odd
      const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
      const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(8));
      for (int64_t d = 0; d < hd; d += 32) {
        const __m512 e = _mm512_mul_ps(_mm512_loadu_ps(acc[i] + d), inv);
        const __m512 o = _mm512_mul_ps(_mm512_loadu_ps(acc[i] + d + 16), inv);
        _mm512_storeu_ps(out + d, _mm512_permutex2var_ps(e, lo, o));
        _mm512_storeu_ps(out + d + 16, _mm512_permutex2var_ps(e, hi, o));
      }
      continue;
    }
    for (int64_t d = 0; d < hd; d += 16) {
      const __mmask16 k = Mask16(hd - d);
      _mm512_mask_storeu_ps(out + d, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, acc[i] + d), inv));
    }
  }
}

void AttendDecodeAvx512(const PagedKv& kv, const TileJob& job, const TileParams& p,
                        float* scratch) {
  switch (kv.dtype) {
    case KvDtype::kF32:
      return AttendDecodeImpl<KvDtype::kF32>(kv, job, p, scratch);
    case KvDtype::kF16:
      return AttendDecodeImpl<KvDtype::kF16>(kv, job, p, scratch);
    case KvDtype::kBf16:
      if (kv.head_dim % 32 == 0) return AttendDecodeImpl<kBf16Pairs>(kv, job, p, scratch);
      return AttendDecodeImpl<KvDtype::kBf16>(kv, job, p, scratch);
    case KvDtype::kQ8_0:
      return AttendDecodeImpl<KvDtype::kQ8_0>(kv, job, p, scratch);
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
  if (job.n_rows * p.n_group <= internal::kDecodeMaxQueries) {
    return AttendDecodeAvx512(kv, job, p, scratch);
  }
  internal::AttendTileImpl<Avx512Isa>(kv, job, p, scratch);
}

namespace internal {

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
  }
}

}  // namespace internal
}  // namespace tachyon::kernels
