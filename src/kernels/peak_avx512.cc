// AVX-512 VNNI int8 peak loop (kernels/peak.h).
#include <immintrin.h>

#include <cstdint>

#include "kernels/peak.h"

namespace tachyon::kernels::internal {

int PeakInt8Avx512(int64_t iters) {
  __m512i acc[12];
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_epi32(i);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) {
      acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
      asm volatile("" : "+v"(acc[i]));  // keep the 12 chains independent and in registers
    }
  }
  __m512i s = acc[0];
#pragma GCC unroll 11
  for (int i = 1; i < 12; ++i) s = _mm512_add_epi32(s, acc[i]);
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, s);
  uint32_t total = 0;  // wraps: the value only keeps the loop from being optimised away
  for (int32_t v : lanes) total += static_cast<uint32_t>(v);
  return static_cast<int>(total);
}

}  // namespace tachyon::kernels::internal
