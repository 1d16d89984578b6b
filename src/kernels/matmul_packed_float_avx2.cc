// AVX2 + F16C kernels for the packed F16 / BF16 layouts (kernels/pack.h). 64 bytes of a tile
// hold inputs 2p, 2p + 1 of all 16 rows; each 16-byte quarter (4 rows x 2 inputs) widens to
// 8 floats (vcvtph2ps for F16, zero-extend and shift for BF16) and is multiplied by the
// broadcast pair x[2p], x[2p + 1] (BF16: the bf16-rounded activations widened to float). The
// even / odd lane sums are added once per tile. At most two activation rows per pass (the
// 16 ymm registers hold 8 accumulators, 4 weight vectors and the broadcasts).
#include <immintrin.h>

#include <cstring>

#include "kernels/matmul_internal.h"
#include "kernels/pack.h"

namespace tachyon::kernels::internal {
namespace {

constexpr int kPrefetchBytes = 2048;

// Activation pair as two floats in every lane pair.
struct PairF16 {
  using T = float;
  static __m256 Pair(const float* x) {
    double d;
    std::memcpy(&d, x, 8);
    return _mm256_castpd_ps(_mm256_set1_pd(d));
  }
  static __m256 Last(const float* x) { return Pair2(x[0]); }
  static __m256 Pair2(float a) {
    const float v[2] = {a, 0.0f};
    return Pair(v);
  }
  static __m256 Weights(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p)));
  }
};
struct PairBf16 {
  using T = uint16_t;
  static __m256 FromBits(uint32_t lo, uint32_t hi) {  // bf16 bits -> float pair
    const uint64_t v = (static_cast<uint64_t>(hi) << 48) | (static_cast<uint64_t>(lo) << 16);
    return _mm256_castsi256_ps(_mm256_set1_epi64x(static_cast<long long>(v)));
  }
  static __m256 Pair(const uint16_t* x) { return FromBits(x[0], x[1]); }
  static __m256 Last(const uint16_t* x) { return FromBits(x[0], 0); }
  static __m256 Weights(const uint8_t* p) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
};

template <typename P, int NX>
void TileN(int64_t k, const uint8_t* tile, const uint8_t* act, size_t stride, float* y, int64_t ldy,
           int nrows) {
  const int64_t full = k / 2;
  const typename P::T* x[NX];
  __m256 acc[NX][4];
  for (int i = 0; i < NX; ++i) {
    x[i] = reinterpret_cast<const typename P::T*>(act + i * stride);
    for (int q = 0; q < 4; ++q) acc[i][q] = _mm256_setzero_ps();
  }
  for (int64_t p = 0; 2 * p < k; ++p) {
    const uint8_t* w = tile + 64 * p;
    _mm_prefetch(reinterpret_cast<const char*>(w + kPrefetchBytes), _MM_HINT_T0);
    __m256 wv[4];
    for (int q = 0; q < 4; ++q) wv[q] = P::Weights(w + 16 * q);
    for (int i = 0; i < NX; ++i) {
      const __m256 xp = p < full ? P::Pair(x[i] + 2 * p) : P::Last(x[i] + 2 * p);
      for (int q = 0; q < 4; ++q) acc[i][q] = _mm256_fmadd_ps(wv[q], xp, acc[i][q]);
    }
  }
  for (int i = 0; i < NX; ++i) {
    alignas(32) float lanes[32];
    for (int q = 0; q < 4; ++q) _mm256_store_ps(lanes + 8 * q, acc[i][q]);
    for (int r = 0; r < nrows; ++r) y[i * ldy + r] = lanes[2 * r] + lanes[2 * r + 1];
  }
}

template <typename P>
void Tile(int64_t k, const uint8_t* tile, const uint8_t* act, size_t stride, int nx, float* y,
          int64_t ldy, int nrows) {
  for (int i = 0; i < nx; i += 2) {
    const uint8_t* a = act + static_cast<size_t>(i) * stride;
    if (nx - i >= 2) {
      TileN<P, 2>(k, tile, a, stride, y + i * ldy, ldy, nrows);
    } else {
      TileN<P, 1>(k, tile, a, stride, y + i * ldy, ldy, nrows);
    }
  }
}

}  // namespace

PackedFn PackedFloatAvx2(GgmlType type) {
  switch (type) {
    case GgmlType::kF16:
      return Tile<PairF16>;
    case GgmlType::kBF16:
      return Tile<PairBf16>;
    default:
      return nullptr;
  }
}

}  // namespace tachyon::kernels::internal
