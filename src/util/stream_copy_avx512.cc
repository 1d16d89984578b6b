// StreamCopy with 64-byte non-temporal stores (util/stream_copy.h); compiled with AVX-512 flags,
// called only on a CPU that has them.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace tachyon::stream_copy_avx512 {

void Copy(void* dst, const void* src, size_t n) {
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  size_t i = std::min(n, (64 - reinterpret_cast<uintptr_t>(d) % 64) % 64);  // to aligned stores
  std::memcpy(d, s, i);
  for (; i + 256 <= n; i += 256) {
    const __m512i a = _mm512_loadu_si512(s + i);
    const __m512i b = _mm512_loadu_si512(s + i + 64);
    const __m512i c = _mm512_loadu_si512(s + i + 128);
    const __m512i e = _mm512_loadu_si512(s + i + 192);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i), a);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i + 64), b);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i + 128), c);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i + 192), e);
  }
  for (; i + 64 <= n; i += 64) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i), _mm512_loadu_si512(s + i));
  }
  std::memcpy(d + i, s + i, n - i);
  _mm_sfence();
}

}  // namespace tachyon::stream_copy_avx512
