// AVX2 int8 peak loop without VNNI (kernels/peak.h): vpmaddubsw (u8 x s8 pairs -> s16) then
// vpmaddwd against ones (-> s32) and vpaddd, the sequence int8 kernels use on such CPUs.
#include <immintrin.h>

#include <cstdint>

#include "kernels/peak.h"

namespace tachyon::kernels::internal {

int PeakInt8Avx2(int64_t iters) {
  // 6 chains (16 ymm registers: 6 accumulators, 6 operands, 2 constants); each operand is
  // marked as changed every iteration so the products are not computed once and reused.
  __m256i acc[6], a[6];
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) {
    acc[i] = _mm256_set1_epi32(i);
    a[i] = _mm256_set1_epi8(static_cast<char>(3 + i));
  }
  const __m256i b = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 6
    for (int i = 0; i < 6; ++i) {
      asm volatile("" : "+x"(a[i]));
      const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(a[i], b), ones);
      acc[i] = _mm256_add_epi32(acc[i], p);
    }
  }
  __m256i s = acc[0];
#pragma GCC unroll 5
  for (int i = 1; i < 6; ++i) s = _mm256_add_epi32(s, acc[i]);
  alignas(32) int32_t out[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(out), s);
  return out[0] + out[7];
}

}  // namespace tachyon::kernels::internal
