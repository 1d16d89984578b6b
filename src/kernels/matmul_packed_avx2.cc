// AVX2 kernels for the packed 16-row layouts (kernels/pack.h). A 64-byte step is two
// 32-byte halves (rows 0..7, rows 8..15); each 32-bit lane holds 4 code bytes of one row.
//   Q4_0: vpmaddubsw(nibbles, broadcast activation bytes) for the block's 8 steps summed in
//         int16 (at most 8 * 2 * 15 * 127 = 30480, no saturation), then vpmaddwd by ones;
//         the -8 offset is applied through the activation block sum as in the scalar kernel.
//   Q8_0: codes are stored as q + 128; flipped back to signed q and multiplied with the sign
//         trick (|q| x sign(x, q), at most 2 * 128 * 127 per int16), so no offset term.
#include <immintrin.h>

#include <cstring>

#include "kernels/matmul_internal.h"
#include "kernels/pack.h"

namespace tachyon::kernels::internal {
namespace {

inline __m256i Bcast(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}
inline __m256i LoadY(const uint8_t* p) {
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
}

template <bool kQ8, int NX>
void TileN(int64_t k, const uint8_t* tile, const uint8_t* act, size_t stride, float* y,
           int64_t ldy, int nrows) {
  const int64_t nb = k / 32;
  constexpr int kSteps = kQ8 ? 8 : 4;
  constexpr int kBlockBytes = kSteps * 64;
  const auto* scales = reinterpret_cast<const uint16_t*>(tile + nb * kBlockBytes);
  Q8Row32 x[NX];
  __m256 acc[NX][2];
  for (int i = 0; i < NX; ++i) {
    x[i] = ViewQ8Row32(act + i * stride, k);
    acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  }
  const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* codes = tile + b * kBlockBytes;
    _mm_prefetch(reinterpret_cast<const char*>(codes + 1024), _MM_HINT_T0);
    const int64_t xoff = 128 * (b / 4) + 16 * (b % 4);
    for (int h = 0; h < 2; ++h) {
      const __m256 dw = _mm256_cvtph_ps(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + b * kPackRows + 8 * h)));
      __m256i u[8];
      for (int s = 0; s < kSteps; ++s) {
        const __m256i v = LoadY(codes + 64 * s + 32 * h);
        if constexpr (kQ8) {
          u[s] = _mm256_xor_si256(v, flip);  // signed q
        } else {
          u[s] = _mm256_and_si256(v, m4);
          u[s + 4] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        }
      }
      for (int i = 0; i < NX; ++i) {
        const int8_t* xb = x[i].qs + xoff;
        __m256i isum;
        if constexpr (kQ8) {
          isum = _mm256_setzero_si256();
          for (int s = 0; s < 8; ++s) {
            const __m256i xs = Bcast(xb + (s < 4 ? 4 * s : 64 + 4 * (s - 4)));
            const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(u[s]), _mm256_sign_epi8(xs, u[s]));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, ones));
          }
        } else {
          __m256i p = _mm256_maddubs_epi16(u[0], Bcast(xb));
          for (int s = 1; s < 4; ++s) p = _mm256_add_epi16(p, _mm256_maddubs_epi16(u[s], Bcast(xb + 4 * s)));
          for (int s = 0; s < 4; ++s)
            p = _mm256_add_epi16(p, _mm256_maddubs_epi16(u[s + 4], Bcast(xb + 64 + 4 * s)));
          isum = _mm256_madd_epi16(p, ones);
        }
        const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(x[i].d4[4 * b]));
        acc[i][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, acc[i][h]);
        if constexpr (!kQ8) {
          const __m256 dwc = _mm256_mul_ps(dw, _mm256_set1_ps(-32.0f));
          acc[i][h] = _mm256_fmadd_ps(dwc, _mm256_set1_ps(x[i].s4[4 * b]), acc[i][h]);
        }
      }
    }
  }
  for (int i = 0; i < NX; ++i) {
    alignas(32) float out[16];
    _mm256_store_ps(out, acc[i][0]);
    _mm256_store_ps(out + 8, acc[i][1]);
    std::memcpy(y + i * ldy, out, sizeof(float) * nrows);
  }
}

template <bool kQ8>
void Tile(int64_t k, const uint8_t* tile, const uint8_t* act, size_t stride, int nx, float* y,
          int64_t ldy, int nrows) {
  switch (nx) {
    case 1:
      return TileN<kQ8, 1>(k, tile, act, stride, y, ldy, nrows);
    case 2:
      return TileN<kQ8, 2>(k, tile, act, stride, y, ldy, nrows);
    case 3:
      return TileN<kQ8, 3>(k, tile, act, stride, y, ldy, nrows);
    default:
      return TileN<kQ8, 4>(k, tile, act, stride, y, ldy, nrows);
  }
}

}  // namespace

PackedFn PackedAvx2(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
      return Tile<false>;
    case GgmlType::kQ8_0:
      return Tile<true>;
    default:
      return PackedFloatAvx2(type);  // F16 / BF16, or null
  }
}

}  // namespace tachyon::kernels::internal
