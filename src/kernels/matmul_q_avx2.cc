// AVX2 kernels for the block formats (Q4_0 .. Q8_0 against kQ8_32, Q2_K .. Q6_K against
// kQ8_256). Same arithmetic as the AVX-512 kernels with 32-byte vectors: codes are unsigned
// bytes (Q8_0 uses |w| and sign-adjusted activations), vpmaddubsw + vpmaddwd form exact int32
// sums (no int16 saturation: at most 63 * 127 * 2 per int16 lane).
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "kernels/matmul_internal.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"

namespace tachyon::kernels::internal {
namespace {

inline float HSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline __m256i LoadY(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// Bit i of the 32-bit v -> 0x10 in byte i.
inline __m256i HighBits(uint32_t v) {
  const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101,
                                         0x0000000000000000);
  __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(v)), shuf);
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  b = _mm256_cmpeq_epi8(_mm256_and_si256(b, bit), bit);
  return _mm256_and_si256(b, _mm256_set1_epi8(0x10));
}
inline __m128i Load16B(const void* p) {
  return _mm_loadu_si128(static_cast<const __m128i*>(p));
}
inline uint32_t Load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline float H(uint16_t h) {
  return _cvtsh_ss(h);
}

// A pair of blocks (0, 1): lo = elements 0..15 of block 0 | of block 1, hi = elements
// 16..31; codes unsigned except Q8_0 (signed, handled with the sign trick).
struct PairU {
  __m256i lo, hi;
  __m256 dw, c;
};
inline __m256 Pair(float a, float b) {
  return _mm256_set_m128(_mm_set1_ps(b), _mm_set1_ps(a));
}

template <GgmlType kType>
PairU UnpackPair(const uint8_t* p0, const uint8_t* p1) {
  PairU u;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  if constexpr (kType == GgmlType::kQ8_0) {
    const auto* a = reinterpret_cast<const BlockQ8_0*>(p0);
    const auto* b = reinterpret_cast<const BlockQ8_0*>(p1);
    u.lo = _mm256_set_m128i(Load16B(b->qs), Load16B(a->qs));
    u.hi = _mm256_set_m128i(Load16B(b->qs + 16), Load16B(a->qs + 16));
    u.dw = Pair(H(a->d), H(b->d));
    u.c = _mm256_setzero_ps();
  } else {
    using Block = std::conditional_t<
        kType == GgmlType::kQ4_0, BlockQ4_0,
        std::conditional_t<kType == GgmlType::kQ4_1, BlockQ4_1,
                           std::conditional_t<kType == GgmlType::kQ5_0, BlockQ5_0, BlockQ5_1>>>;
    const auto* a = reinterpret_cast<const Block*>(p0);
    const auto* b = reinterpret_cast<const Block*>(p1);
    const __m256i v = _mm256_set_m128i(Load16B(b->qs), Load16B(a->qs));
    u.lo = _mm256_and_si256(v, m4);
    u.hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    if constexpr (kType == GgmlType::kQ5_0 || kType == GgmlType::kQ5_1) {
      const uint32_t ha = Load32(a->qh), hb = Load32(b->qh);
      u.lo = _mm256_or_si256(u.lo, HighBits((ha & 0xFFFFu) | (hb << 16)));
      u.hi = _mm256_or_si256(u.hi, HighBits((ha >> 16) | (hb & 0xFFFF0000u)));
    }
    u.dw = Pair(H(a->d), H(b->d));
    if constexpr (kType == GgmlType::kQ4_1 || kType == GgmlType::kQ5_1) {
      u.c = Pair(H(a->m), H(b->m));
    } else {
      u.c = _mm256_mul_ps(u.dw, _mm256_set1_ps(kType == GgmlType::kQ4_0 ? -8.0f : -16.0f));
    }
  }
  return u;
}

// Unsigned codes . signed activations -> 8 int32 lanes (4 per 16 bytes).
inline __m256i DotU8(__m256i q, __m256i x) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(q, x), _mm256_set1_epi16(1));
}

template <GgmlType kType, int NX>
void Dot32N(int64_t k, const void* w, const uint8_t* act, size_t stride, float* y, int64_t ldy) {
  const auto* base = static_cast<const uint8_t*>(w);
  const size_t bsize = RowBytes(kType, 32);
  const int64_t nb = k / 32;
  Q8Row32 x[NX];
  __m256 acc[NX], accc[NX];
#pragma GCC unroll 8
  for (int r = 0; r < NX; ++r) {
    x[r] = ViewQ8Row32(act + r * stride, k);
    acc[r] = accc[r] = _mm256_setzero_ps();
  }
  alignas(32) uint8_t pad[64] = {};
  for (int64_t b = 0; b < nb; b += 2) {
    const uint8_t* p1 = b + 1 < nb ? base + (b + 1) * bsize : pad;
    const PairU u = UnpackPair<kType>(base + b * bsize, p1);
    const int64_t g = b / 4, off = 16 * (b % 4);  // byte offset of the pair in its group
#pragma GCC unroll 8
    for (int r = 0; r < NX; ++r) {
      const int8_t* xq = x[r].qs + 128 * g + off;
      __m256i xl = LoadY(xq), xh = LoadY(xq + 64);
      __m256i dot;
      if constexpr (kType == GgmlType::kQ8_0) {
        xl = _mm256_sign_epi8(xl, u.lo);
        xh = _mm256_sign_epi8(xh, u.hi);
        dot = _mm256_add_epi32(DotU8(_mm256_sign_epi8(u.lo, u.lo), xl),
                               DotU8(_mm256_sign_epi8(u.hi, u.hi), xh));
      } else {
        dot = _mm256_add_epi32(DotU8(u.lo, xl), DotU8(u.hi, xh));
      }
      const __m256 scale = _mm256_mul_ps(u.dw, _mm256_loadu_ps(x[r].d4 + 4 * b));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc[r]);
      if constexpr (kType != GgmlType::kQ8_0) {
        accc[r] = _mm256_fmadd_ps(u.c, _mm256_loadu_ps(x[r].s4 + 4 * b), accc[r]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < NX; ++r) y[r * ldy] = HSum(_mm256_add_ps(acc[r], accc[r]));
}

// K-quants: 8 chunks of 32 codes with int16 scale patterns (16 lanes: first 8 lanes scale
// the chunk's first 16 elements' pairs, last 8 the second 16).
struct SuperK {
  __m256i q[8];
  __m256i sp[8];
  __m256i min16;
  float d, dmin;
};

inline __m256i Pattern(int a, int b) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(b)),
                          _mm_set1_epi16(static_cast<short>(a)));
}

template <GgmlType kType>
void UnpackK(const uint8_t* p, SuperK* s) {
  if constexpr (kType == GgmlType::kQ4_K || kType == GgmlType::kQ5_K) {
    const uint8_t* scales;
    const uint8_t* qs;
    const uint8_t* qh = nullptr;
    uint16_t d, dmin;
    if constexpr (kType == GgmlType::kQ4_K) {
      const auto* b = reinterpret_cast<const BlockQ4_K*>(p);
      scales = b->scales, qs = b->qs, d = b->d, dmin = b->dmin;
    } else {
      const auto* b = reinterpret_cast<const BlockQ5_K*>(p);
      scales = b->scales, qs = b->qs, qh = b->qh, d = b->d, dmin = b->dmin;
    }
    alignas(16) int16_t mn16[16];
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, mn;
      UnpackScaleMinK4(scales, j, &sc, &mn);
      s->sp[j] = _mm256_set1_epi16(sc);
      mn16[2 * j] = mn16[2 * j + 1] = mn;
    }
    s->min16 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(mn16));
    s->d = H(d);
    s->dmin = H(dmin);
    const __m256i h = qh ? LoadY(qh) : _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int c = 0; c < 4; ++c) {
      const __m256i t = LoadY(qs + 32 * c);
      s->q[2 * c] = _mm256_and_si256(t, _mm256_set1_epi8(0x0F));
      s->q[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(t, 4), _mm256_set1_epi8(0x0F));
      if (qh) {
#pragma GCC unroll 8
        for (int e = 0; e < 2; ++e) {
          const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << (2 * c + e)));
          const __m256i m = _mm256_cmpeq_epi8(_mm256_and_si256(h, bit), bit);
          s->q[2 * c + e] =
              _mm256_or_si256(s->q[2 * c + e], _mm256_and_si256(m, _mm256_set1_epi8(16)));
        }
      }
    }
  } else if constexpr (kType == GgmlType::kQ6_K) {
    const auto* b = reinterpret_cast<const BlockQ6_K*>(p);
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) s->sp[c] = Pattern(b->scales[2 * c], b->scales[2 * c + 1]);
    s->min16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales)));
    s->d = H(b->d);
    s->dmin = 32.0f * s->d;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3);
#pragma GCC unroll 8
    for (int h = 0; h < 2; ++h) {
      const __m256i qh = LoadY(b->qh + 32 * h);
      const __m256i l0 = LoadY(b->ql + 64 * h), l1 = LoadY(b->ql + 64 * h + 32);
#pragma GCC unroll 8
      for (int g = 0; g < 4; ++g) {  // element group 32 g + l of this half
        const __m256i lq = (g & 1) ? l1 : l0;
        const __m256i lo = _mm256_and_si256(g < 2 ? lq : _mm256_srli_epi16(lq, 4), m4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * g), m2);
        s->q[4 * h + g] = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
      }
    }
  } else {  // Q2_K / Q3_K
    const uint8_t* qs;
    const __m256i* hm = nullptr;
    if constexpr (kType == GgmlType::kQ3_K) {
      const auto* b = reinterpret_cast<const BlockQ3_K*>(p);
      int8_t sc[16];
      UnpackScalesQ3K(b->scales, sc);
#pragma GCC unroll 8
      for (int c = 0; c < 8; ++c) s->sp[c] = Pattern(sc[2 * c], sc[2 * c + 1]);
      s->min16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)));
      s->d = H(b->d);
      s->dmin = 4.0f * s->d;
      qs = b->qs;
      hm = reinterpret_cast<const __m256i*>(b->hmask);
    } else {
      const auto* b = reinterpret_cast<const BlockQ2_K*>(p);
#pragma GCC unroll 8
      for (int c = 0; c < 8; ++c)
        s->sp[c] = Pattern(b->scales[2 * c] & 15, b->scales[2 * c + 1] & 15);
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales));
      s->min16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(0x0F)));
      s->d = H(b->d);
      s->dmin = H(b->dmin);
      qs = b->qs;
    }
    const __m256i hmv = hm ? _mm256_loadu_si256(hm) : _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      const int h = c / 4, g = c % 4;
      const __m256i t = LoadY(qs + 32 * h);
      __m256i q = _mm256_and_si256(_mm256_srli_epi16(t, 2 * g), _mm256_set1_epi8(3));
      if (hm) {
        const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << (4 * h + g)));
        const __m256i m = _mm256_cmpeq_epi8(_mm256_and_si256(hmv, bit), bit);
        q = _mm256_or_si256(q, _mm256_and_si256(m, _mm256_set1_epi8(4)));
      }
      s->q[c] = q;
    }
  }
}

template <GgmlType kType, int NX>
void DotKN(int64_t k, const void* w, const uint8_t* act, size_t stride, float* y, int64_t ldy) {
  const auto* base = static_cast<const uint8_t*>(w);
  const size_t bsize = RowBytes(kType, 256);
  Q8Row256 x[NX];
  __m256 acc[NX], accm[NX];
#pragma GCC unroll 8
  for (int r = 0; r < NX; ++r) {
    x[r] = ViewQ8Row256(act + r * stride, k);
    acc[r] = accm[r] = _mm256_setzero_ps();
  }
  SuperK s;
  for (int64_t i = 0; i < k / 256; ++i) {
    UnpackK<kType>(base + i * bsize, &s);
#pragma GCC unroll 8
    for (int r = 0; r < NX; ++r) {
      const int8_t* xq = x[r].qs + 256 * i;
      __m256i isum = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int c = 0; c < 8; ++c) {
        const __m256i p16 = _mm256_maddubs_epi16(s.q[c], LoadY(xq + 32 * c));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p16, s.sp[c]));
      }
      const __m256i mins = _mm256_madd_epi16(s.min16, LoadY(x[r].bsums + 16 * i));
      const float dx = x[r].d[i];
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(s.d * dx), acc[r]);
      accm[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_set1_ps(s.dmin * dx), accm[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < NX; ++r) y[r * ldy] = HSum(acc[r]) - HSum(accm[r]);
}

template <template <GgmlType, int> class K, GgmlType kType>
void ByRows(int64_t k, const void* w, const uint8_t* act, size_t stride, int nx, float* y,
            int64_t ldy) {
  switch (nx) {
    case 1:
      return K<kType, 1>::Run(k, w, act, stride, y, ldy);
    case 2:
      return K<kType, 2>::Run(k, w, act, stride, y, ldy);
    case 3:
      return K<kType, 3>::Run(k, w, act, stride, y, ldy);
    default:
      return K<kType, 4>::Run(k, w, act, stride, y, ldy);
  }
}
template <GgmlType T, int NX>
struct K32 {
  static void Run(int64_t k, const void* w, const uint8_t* a, size_t s, float* y, int64_t l) {
    Dot32N<T, NX>(k, w, a, s, y, l);
  }
};
template <GgmlType T, int NX>
struct KK {
  static void Run(int64_t k, const void* w, const uint8_t* a, size_t s, float* y, int64_t l) {
    DotKN<T, NX>(k, w, a, s, y, l);
  }
};

}  // namespace

DotFn DotAvx2Quant(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
      return ByRows<K32, GgmlType::kQ4_0>;
    case GgmlType::kQ4_1:
      return ByRows<K32, GgmlType::kQ4_1>;
    case GgmlType::kQ5_0:
      return ByRows<K32, GgmlType::kQ5_0>;
    case GgmlType::kQ5_1:
      return ByRows<K32, GgmlType::kQ5_1>;
    case GgmlType::kQ8_0:
      return ByRows<K32, GgmlType::kQ8_0>;
    case GgmlType::kQ2_K:
      return ByRows<KK, GgmlType::kQ2_K>;
    case GgmlType::kQ3_K:
      return ByRows<KK, GgmlType::kQ3_K>;
    case GgmlType::kQ4_K:
      return ByRows<KK, GgmlType::kQ4_K>;
    case GgmlType::kQ5_K:
      return ByRows<KK, GgmlType::kQ5_K>;
    case GgmlType::kQ6_K:
      return ByRows<KK, GgmlType::kQ6_K>;
    default:
      return nullptr;
  }
}

}  // namespace tachyon::kernels::internal
