// AVX-512 VNNI kernels for the K-quants (Q2_K .. Q6_K) against kQ8_256 activations.
//
// A super-block (256 elements) is unpacked once into four chunks of 64 unsigned codes in
// element order plus, per chunk, the sub-block scales spread over the int32 lanes that
// vpdpbusd fills from that sub-block (low 16 bits; high 16 bits zero). Per activation row:
//   isum = sum_c vpdpwssd(vpdpbusd(0, q_c, x_c), scale_c)             (exact int32)
//   y   += dx * (d * sum(isum) - dmin * sum(min16 * bsums16))
// where min16 holds, per 16-element group, the min code (Q2_K, Q4_K, Q5_K) or offset-scaled
// scale (Q3_K: 4 * scale, Q6_K: 32 * scale; folded as dmin = 4 d / 32 d, min16 = scale).
// Lane dot values stay below 2^15 (<= 63 * 127 * 4), so the int16 view in vpdpwssd is exact.
#include "kernels/simd_avx512.h"  // first: see its note

#include <cstring>

#include "kernels/matmul_internal.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"

namespace tachyon::kernels::internal {
namespace {

struct Super {
  __m512i q[4];
  __m512i sp[4];
  __m256i min16;
  float d, dmin;
};

inline __m512i Load32x2(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}
inline __m256i LoadY(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
// Scale lanes for sub-blocks of 32: chunk c uses scales 2c (lanes 0..7), 2c+1 (8..15).
inline void Spread32(__m512i sc32, __m512i* sp) {
#pragma GCC unroll 8
  for (int c = 0; c < 4; ++c) {
    const __m512i idx = _mm512_set_epi32(2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1,
                                         2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c, 2 * c, 2 * c,
                                         2 * c, 2 * c, 2 * c, 2 * c, 2 * c);
    sp[c] = _mm512_permutexvar_epi32(idx, sc32);
  }
}
// Sub-blocks of 16: chunk c uses scales 4c..4c+3, four lanes each.
inline void Spread16(__m512i sc32, __m512i* sp) {
#pragma GCC unroll 8
  for (int c = 0; c < 4; ++c) {
    const int a = 4 * c;
    const __m512i idx = _mm512_set_epi32(a + 3, a + 3, a + 3, a + 3, a + 2, a + 2, a + 2, a + 2,
                                         a + 1, a + 1, a + 1, a + 1, a, a, a, a);
    sp[c] = _mm512_permutexvar_epi32(idx, sc32);
  }
}

// Q4_K / Q5_K 6-bit scales and mins -> 8 bytes each (as uint64).
inline void ScalesK4(const uint8_t* s, uint64_t* sc, uint64_t* mn) {
  uint32_t a0, a1, a2;
  std::memcpy(&a0, s, 4);
  std::memcpy(&a1, s + 4, 4);
  std::memcpy(&a2, s + 8, 4);
  const uint32_t sc_lo = a0 & 0x3F3F3F3Fu, mn_lo = a1 & 0x3F3F3F3Fu;
  const uint32_t sc_hi = (a2 & 0x0F0F0F0Fu) | (((a0 >> 6) & 0x03030303u) << 4);
  const uint32_t mn_hi = ((a2 >> 4) & 0x0F0F0F0Fu) | (((a1 >> 6) & 0x03030303u) << 4);
  *sc = sc_lo | (static_cast<uint64_t>(sc_hi) << 32);
  *mn = mn_lo | (static_cast<uint64_t>(mn_hi) << 32);
}

inline void K4Common(const uint8_t* scales, uint16_t d, uint16_t dmin, Super* s) {
  uint64_t sc, mn;
  ScalesK4(scales, &sc, &mn);
  Spread32(_mm512_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(sc))), s->sp);
  const __m128i m = _mm_cvtsi64_si128(static_cast<long long>(mn));
  s->min16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m, m));  // each min covers 2 bsums
  s->d = _cvtsh_ss(d);
  s->dmin = _cvtsh_ss(dmin);
}

inline __m512i Nib64(const uint8_t* qs) {
  const __m256i t = LoadY(qs);
  return _mm512_and_si512(Load32x2(t, _mm256_srli_epi16(t, 4)), _mm512_set1_epi8(0x0F));
}

struct Q4KT {
  using Block = BlockQ4_K;
  static void Unpack(const Block& b, Super* s) {
    K4Common(b.scales, b.d, b.dmin, s);
#pragma GCC unroll 8
    for (int c = 0; c < 4; ++c) s->q[c] = Nib64(b.qs + 32 * c);
  }
};

struct Q5KT {
  using Block = BlockQ5_K;
  static void Unpack(const Block& b, Super* s) {
    K4Common(b.scales, b.d, b.dmin, s);
    const __m256i qh = LoadY(b.qh);
#pragma GCC unroll 8
    for (int c = 0; c < 4; ++c) {
      const uint64_t lo =
          _mm256_test_epi8_mask(qh, _mm256_set1_epi8(static_cast<char>(1 << (2 * c))));
      const uint64_t hi =
          _mm256_test_epi8_mask(qh, _mm256_set1_epi8(static_cast<char>(1 << (2 * c + 1))));
      const __m512i q = Nib64(b.qs + 32 * c);
      s->q[c] = _mm512_mask_add_epi8(q, lo | (hi << 32), q, _mm512_set1_epi8(16));
    }
  }
};

// Signed scales of 16-element sub-blocks: lanes with low 16 bits = scale, high bits zero.
inline void SignedScales16(const int8_t* sc, Super* s) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sc));
  Spread16(_mm512_and_si512(_mm512_cvtepi8_epi32(v), _mm512_set1_epi32(0xFFFF)), s->sp);
  s->min16 = _mm256_cvtepi8_epi16(v);
}

struct Q6KT {
  using Block = BlockQ6_K;
  static void Unpack(const Block& b, Super* s) {
    SignedScales16(b.scales, s);
    s->d = _cvtsh_ss(b.d);
    s->dmin = 32.0f * s->d;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(3);
#pragma GCC unroll 8
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = _mm512_loadu_si512(b.ql + 64 * h);
      const __m256i qh = LoadY(b.qh + 32 * h);
      const __m512i qhx = Load32x2(qh, _mm256_srli_epi16(qh, 2));
      const __m512i hi0 = _mm512_slli_epi16(_mm512_and_si512(qhx, m2), 4);
      const __m512i hi1 = _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qhx, 4), m2), 4);
      s->q[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4), hi0);
      s->q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), hi1);
    }
  }
};

struct Q3KT {
  using Block = BlockQ3_K;
  static void Unpack(const Block& b, Super* s) {
    int8_t sc[16];
    UnpackScalesQ3K(b.scales, sc);
    SignedScales16(sc, s);
    s->d = _cvtsh_ss(b.d);
    s->dmin = 4.0f * s->d;
    const __m256i hm = LoadY(b.hmask);
#pragma GCC unroll 8
    for (int c = 0; c < 4; ++c) {
      const int h = c / 2, p = c % 2;
      const __m256i t = LoadY(b.qs + 32 * h);
      const __m256i lo = _mm256_srli_epi16(t, 4 * p), hi = _mm256_srli_epi16(t, 4 * p + 2);
      const __m512i q = _mm512_and_si512(Load32x2(lo, hi), _mm512_set1_epi8(3));
      const uint64_t mlo =
          _mm256_test_epi8_mask(hm, _mm256_set1_epi8(static_cast<char>(1 << (4 * h + 2 * p))));
      const uint64_t mhi =
          _mm256_test_epi8_mask(hm, _mm256_set1_epi8(static_cast<char>(1 << (4 * h + 2 * p + 1))));
      s->q[c] = _mm512_mask_add_epi8(q, mlo | (mhi << 32), q, _mm512_set1_epi8(4));
    }
  }
};

struct Q2KT {
  using Block = BlockQ2_K;
  static void Unpack(const Block& b, Super* s) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    Spread16(_mm512_cvtepu8_epi32(_mm_and_si128(v, _mm_set1_epi8(0x0F))), s->sp);
    s->min16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(0x0F)));
    s->d = _cvtsh_ss(b.d);
    s->dmin = _cvtsh_ss(b.dmin);
#pragma GCC unroll 8
    for (int c = 0; c < 4; ++c) {
      const int h = c / 2, p = c % 2;
      const __m256i t = LoadY(b.qs + 32 * h);
      const __m256i lo = _mm256_srli_epi16(t, 4 * p), hi = _mm256_srli_epi16(t, 4 * p + 2);
      s->q[c] = _mm512_and_si512(Load32x2(lo, hi), _mm512_set1_epi8(3));
    }
  }
};

template <typename T, int NX>
void DotN(int64_t k, const void* w, const uint8_t* act, size_t stride, float* y, int64_t ldy) {
  const auto* blk = static_cast<const typename T::Block*>(w);
  Q8Row256 x[NX];
  __m512 acc[NX];
  __m256 accm[NX];
#pragma GCC unroll 8
  for (int r = 0; r < NX; ++r) {
    x[r] = ViewQ8Row256(act + r * stride, k);
    acc[r] = _mm512_setzero_ps();
    accm[r] = _mm256_setzero_ps();
  }
  Super s;
  for (int64_t i = 0; i < k / 256; ++i) {
    T::Unpack(blk[i], &s);
#pragma GCC unroll 8
    for (int r = 0; r < NX; ++r) {
      const int8_t* xq = x[r].qs + 256 * i;
      // Two chains keep the dpwssd dependency short.
      __m512i isum0 = _mm512_setzero_si512(), isum1 = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int c = 0; c < 4; c += 2) {
        const __m512i d0 =
            _mm512_dpbusd_epi32(_mm512_setzero_si512(), s.q[c], _mm512_loadu_si512(xq + 64 * c));
        const __m512i d1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), s.q[c + 1],
                                               _mm512_loadu_si512(xq + 64 * c + 64));
        isum0 = _mm512_dpwssd_epi32(isum0, d0, s.sp[c]);
        isum1 = _mm512_dpwssd_epi32(isum1, d1, s.sp[c + 1]);
      }
      const __m512i isum = _mm512_add_epi32(isum0, isum1);
      const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[r].bsums + 16 * i));
      const __m256i mins = _mm256_madd_epi16(s.min16, bs);
      const float dx = x[r].d[i];
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(s.d * dx), acc[r]);
      accm[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_set1_ps(s.dmin * dx), accm[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < NX; ++r) {
    y[r * ldy] = HAdd(acc[r]) - HAdd(_mm512_zextps256_ps512(accm[r]));
  }
}

template <typename T>
void ByRows(int64_t k, const void* w, const uint8_t* act, size_t stride, int nx, float* y,
            int64_t ldy) {
  switch (nx) {
    case 1:
      return DotN<T, 1>(k, w, act, stride, y, ldy);
    case 2:
      return DotN<T, 2>(k, w, act, stride, y, ldy);
    case 3:
      return DotN<T, 3>(k, w, act, stride, y, ldy);
    default:
      return DotN<T, 4>(k, w, act, stride, y, ldy);
  }
}

}  // namespace

DotFn DotAvx512K(GgmlType type) {
  switch (type) {
    case GgmlType::kQ2_K:
      return ByRows<Q2KT>;
    case GgmlType::kQ3_K:
      return ByRows<Q3KT>;
    case GgmlType::kQ4_K:
      return ByRows<Q4KT>;
    case GgmlType::kQ5_K:
      return ByRows<Q5KT>;
    case GgmlType::kQ6_K:
      return ByRows<Q6KT>;
    default:
      return nullptr;
  }
}

}  // namespace tachyon::kernels::internal
