// AVX-512 kernels for the packed F16 / BF16 layouts (kernels/pack.h): 64 bytes of a tile hold
// inputs 2p, 2p + 1 of all 16 rows ([row][2]), so one aligned load feeds 16 rows and a tile's
// 16 outputs need no horizontal sums.
//
//   F16 (float activations): the two 256-bit halves convert (vcvtph2ps) to rows 0..7 and
//     8..15 as (input 2p, input 2p + 1) lane pairs and are multiplied by the broadcast float
//     pair x[2p], x[2p + 1]; the even / odd lanes are added once at the end.
//   BF16 (bf16 activations, as the unpacked kernel): one vdpbf16ps against the broadcast
//     bf16 pair adds both products to each row's lane.
// Weights stream from memory at m = 1, so the loop prefetches kPrefetchBytes ahead (a thread's
// tiles are contiguous, so this runs on into the next tile).
#include "kernels/simd_avx512.h"  // first: see its note

#include <cstring>

#include "kernels/matmul_internal.h"
#include "kernels/pack.h"

namespace tachyon::kernels::internal {
namespace {

constexpr int kPrefetchBytes = 2048;

inline void Prefetch(const uint8_t* p) {
  _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchBytes), _MM_HINT_T0);
}

// Two floats (x[0], x[1]) in every lane pair.
inline __m512 PairF32(const float* x) {
  double d;
  std::memcpy(&d, x, 8);
  return _mm512_castpd_ps(_mm512_set1_pd(d));
}
inline __m512 LastPairF32(float x0) {
  const float v[2] = {x0, 0.0f};
  return PairF32(v);
}
inline __m512 Lo8(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 Hi8(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p + 32)));
}

// lo: rows 0..7, hi: rows 8..15, as (even input, odd input) lane pairs -> 16 row sums.
inline __m512 PairSums(__m512 lo, __m512 hi) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  return _mm512_add_ps(_mm512_permutex2var_ps(lo, even, hi), _mm512_permutex2var_ps(lo, odd, hi));
}

template <int NX>
void F16TileN(int64_t k, const uint8_t* tile, const uint8_t* act, size_t stride, float* y,
              int64_t ldy, int nrows) {
  const int64_t full = k / 2;  // pairs with both inputs in the row
  const float* x[NX];
  __m512 acc[NX][4];
#pragma GCC unroll 4
  for (int i = 0; i < NX; ++i) {
    x[i] = reinterpret_cast<const float*>(act + i * stride);
    acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = _mm512_setzero_ps();
  }
  int64_t p = 0;
  for (; p + 2 <= full; p += 2) {
    const uint8_t* w = tile + 64 * p;
    Prefetch(w);
    Prefetch(w + 64);
    const __m512 w0l = Lo8(w), w0h = Hi8(w), w1l = Lo8(w + 64), w1h = Hi8(w + 64);
#pragma GCC unroll 4
    for (int i = 0; i < NX; ++i) {
      const __m512 xa = PairF32(x[i] + 2 * p), xb = PairF32(x[i] + 2 * p + 2);
      acc[i][0] = _mm512_fmadd_ps(w0l, xa, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(w0h, xa, acc[i][1]);
      acc[i][2] = _mm512_fmadd_ps(w1l, xb, acc[i][2]);
      acc[i][3] = _mm512_fmadd_ps(w1h, xb, acc[i][3]);
    }
  }
  for (; 2 * p < k; ++p) {  // at most two more pairs; the last may hold one input
    const uint8_t* w = tile + 64 * p;
    const __m512 wl = Lo8(w), wh = Hi8(w);
#pragma GCC unroll 4
    for (int i = 0; i < NX; ++i) {
      const __m512 xa = p < full ? PairF32(x[i] + 2 * p) : LastPairF32(x[i][2 * p]);
      acc[i][0] = _mm512_fmadd_ps(wl, xa, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(wh, xa, acc[i][1]);
    }
  }
  const __mmask16 mask = Mask16(nrows);
#pragma GCC unroll 4
  for (int i = 0; i < NX; ++i) {
    const __m512 s =
        PairSums(_mm512_add_ps(acc[i][0], acc[i][2]), _mm512_add_ps(acc[i][1], acc[i][3]));
    _mm512_mask_storeu_ps(y + i * ldy, mask, s);
  }
}

template <int NX>
void Bf16TileN(int64_t k, const uint8_t* tile, const uint8_t* act, size_t stride, float* y,
               int64_t ldy, int nrows) {
  const int64_t full = k / 2;
  const uint16_t* x[NX];
  __m512 acc[NX][2];
#pragma GCC unroll 4
  for (int i = 0; i < NX; ++i) {
    x[i] = reinterpret_cast<const uint16_t*>(act + i * stride);
    acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  }
  auto pair = [](const uint16_t* xp) {
    uint32_t v;
    std::memcpy(&v, xp, 4);
    return (__m512bh)_mm512_set1_epi32(static_cast<int>(v));
  };
  int64_t p = 0;
  for (; p + 2 <= full; p += 2) {
    const uint8_t* w = tile + 64 * p;
    Prefetch(w);
    Prefetch(w + 64);
    const __m512bh w0 = (__m512bh)_mm512_load_si512(w), w1 = (__m512bh)_mm512_load_si512(w + 64);
#pragma GCC unroll 4
    for (int i = 0; i < NX; ++i) {
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], w0, pair(x[i] + 2 * p));
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], w1, pair(x[i] + 2 * p + 2));
    }
  }
  for (; 2 * p < k; ++p) {  // at most two more pairs; the last may hold one input
    const __m512bh w = (__m512bh)_mm512_load_si512(tile + 64 * p);
#pragma GCC unroll 4
    for (int i = 0; i < NX; ++i) {
      const __m512bh xp = p < full ? pair(x[i] + 2 * p) : (__m512bh)_mm512_set1_epi32(x[i][2 * p]);
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], w, xp);
    }
  }
  const __mmask16 mask = Mask16(nrows);
#pragma GCC unroll 4
  for (int i = 0; i < NX; ++i) {
    _mm512_mask_storeu_ps(y + i * ldy, mask, _mm512_add_ps(acc[i][0], acc[i][1]));
  }
}

template <int NX>
struct F16K {
  static void Run(int64_t k, const uint8_t* t, const uint8_t* a, size_t s, float* y, int64_t l,
                  int n) {
    F16TileN<NX>(k, t, a, s, y, l, n);
  }
};
template <int NX>
struct Bf16K {
  static void Run(int64_t k, const uint8_t* t, const uint8_t* a, size_t s, float* y, int64_t l,
                  int n) {
    Bf16TileN<NX>(k, t, a, s, y, l, n);
  }
};

}  // namespace

PackedFn PackedFloatAvx512(GgmlType type) {
  switch (type) {
    case GgmlType::kF16:
      return PackedByNx<F16K>;
    case GgmlType::kBF16:
      return PackedByNx<Bf16K>;
    default:
      return nullptr;
  }
}

}  // namespace tachyon::kernels::internal
