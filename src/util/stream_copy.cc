#include "util/stream_copy.h"

#include <emmintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "util/cpu_features.h"

namespace tachyon {

namespace stream_copy_avx512 {
void Copy(void* dst, const void* src, size_t n);
}

namespace {

constexpr size_t kMinStreamBytes = 256;

void CopySse2(void* dst, const void* src, size_t n) {
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  size_t i = std::min(n, (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16);  // to aligned stores
  std::memcpy(d, s, i);
  for (; i + 64 <= n; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  std::memcpy(d + i, s + i, n - i);
  _mm_sfence();
}

bool HasAvx512() {
  return BestSimdLevel() >= SimdLevel::kAvx512;
}

}  // namespace

void StreamCopy(void* dst, const void* src, size_t n) {
  if (n < kMinStreamBytes) {
    std::memcpy(dst, src, n);
    return;
  }
  static const bool avx512 = HasAvx512();
  if (avx512) {
    stream_copy_avx512::Copy(dst, src, n);
  } else {
    CopySse2(dst, src, n);
  }
}

bool StreamCopyWith(int level, void* dst, const void* src, size_t n) {
  if (level == 0) {
    CopySse2(dst, src, n);
    return true;
  }
  if (level == 2 && HasAvx512()) {
    stream_copy_avx512::Copy(dst, src, n);
    return true;
  }
  return false;
}

}  // namespace tachyon
