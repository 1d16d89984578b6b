// Small AVX-512 helpers shared by the *_avx512.cc files (include only from those files).
// Include it first: GCC 12's AVX-512 headers use self-initialised "undefined" vectors that
// trip -Wuninitialized when inlined, so those two warnings are off for the including file.
#pragma once

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

namespace tachyon::kernels::internal {

inline __mmask16 Mask16(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
}
inline __mmask32 Mask32(int64_t n) {
  return n >= 32 ? static_cast<__mmask32>(0xFFFFFFFFu) : static_cast<__mmask32>((1u << n) - 1u);
}

// Horizontal reductions (GCC 12's _mm512_reduce_* trip -Wuninitialized, so these are ours).
inline float HAdd(__m512 v) {
  const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float HMax(__m512 v) {
  const __m256 a = _mm256_max_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline int HAddI(__m512i v) {
  const __m256i a = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// Broadcasts a to lanes 0..7 and b to lanes 8..15.
inline __m512 Halves(float a, float b) {
  return _mm512_insertf32x8(_mm512_set1_ps(a), _mm256_set1_ps(b), 1);
}

// Stores acc[i] reduced for i < NX: y[i * ldy] = sum of lanes.
template <int NX>
inline void StoreSums(const __m512* acc, float* y, int64_t ldy) {
  for (int i = 0; i < NX; ++i) y[i * ldy] = HAdd(acc[i]);
}

}  // namespace tachyon::kernels::internal
