// Small AVX2 helpers shared by the *_avx2.cc files (include only from those files).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace tachyon::kernels::internal {

// The 4 bytes at p in every 32-bit lane.
inline __m256i Bcast32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// 8 fp16 values at p as floats.
inline __m256 LoadF16x8(const void* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(static_cast<const __m128i*>(p)));
}

// Prefetches (to L1) the kLines 64-byte cache lines from p on.
template <int kLines>
inline void PrefetchLines(const void* p) {
#pragma GCC unroll 16
  for (int l = 0; l < kLines; ++l) {
    _mm_prefetch(static_cast<const char*>(p) + 64 * l, _MM_HINT_T0);
  }
}

// Prefetches (to L1) every 64-byte line that [p, p + kBytes) touches.
template <int kBytes>
inline void PrefetchSpan(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  const char* first = reinterpret_cast<const char*>(a & ~uintptr_t{63});
  constexpr int kMaxLines = (kBytes + 63) / 64 + 1;
  const int lines = static_cast<int>(((a & 63) + kBytes + 63) / 64);
#pragma GCC unroll 16
  for (int l = 0; l < kMaxLines; ++l) {
    if (l < lines) _mm_prefetch(first + 64 * l, _MM_HINT_T0);
  }
}

// A block `ahead` blocks past the one being read, in the order a packed kernel reads them: the
// blocks of a tile one after another, then the next tile's (tiles lie tile_bytes apart). The
// block's bytes lie in several regions of its tile (codes, scales, ...), so a prefetch that
// runs a fixed distance ahead in the tile's bytes would reach a tile's scales only after the
// kernel read them; this cursor reaches every region of a block `ahead` blocks early.
class BlocksAhead {
 public:
  BlocksAhead(const uint8_t* tile, int64_t nb, size_t tile_bytes, int64_t ahead)
      : tile_(tile), nb_(nb), tile_bytes_(tile_bytes), b_(ahead) {
    while (nb_ > 0 && b_ >= nb_) {
      b_ -= nb_;
      tile_ += tile_bytes_;
    }
  }
  const uint8_t* tile() const { return tile_; }
  int64_t block() const { return b_; }
  void Next() {
    if (++b_ == nb_) {
      b_ = 0;
      tile_ += tile_bytes_;
    }
  }

 private:
  const uint8_t* tile_;
  int64_t nb_;
  size_t tile_bytes_;
  int64_t b_;
};

// The first n (0..8) floats of v to p; the rest of p[0..8) is not touched.
inline void StoreFirst(float* p, __m256 v, int n) {
  if (n >= 8) {
    _mm256_storeu_ps(p, v);
  } else if (n > 0) {
    alignas(32) float t[8];
    _mm256_store_ps(t, v);
    std::memcpy(p, t, sizeof(float) * static_cast<size_t>(n));
  }
}

// p[0..n) (0..8) as the first lanes of a vector, zeros after them.
inline __m256 LoadFirst(const float* p, int n) {
  if (n >= 8) return _mm256_loadu_ps(p);
  alignas(32) float t[8] = {};
  if (n > 0) std::memcpy(t, p, sizeof(float) * static_cast<size_t>(n));
  return _mm256_load_ps(t);
}

}  // namespace tachyon::kernels::internal
