// AVX-512 kernels for float weights (F32, F16 with float activations, BF16 with bf16
// activations via vdpbf16ps) and the activation converters.
#include "kernels/simd_avx512.h"  // first: see its note

#include "kernels/matmul_internal.h"

namespace tachyon::kernels::internal {
namespace {

// W element loaders: 16 floats from element offset i (masked).
struct LoadF32 {
  static __m512 Load(const void* w, int64_t i, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, static_cast<const float*>(w) + i);
  }
};
struct LoadF16 {
  static __m512 Load(const void* w, int64_t i, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(w) + i));
  }
};

template <typename L, int NX>
void DotFloatN(int64_t k, const void* w, const uint8_t* act, size_t stride, float* y, int64_t ldy) {
  __m512 acc[NX], acc2[NX];
#pragma GCC unroll 8
  for (int r = 0; r < NX; ++r) acc[r] = acc2[r] = _mm512_setzero_ps();
  const float* x[NX];
#pragma GCC unroll 8
  for (int r = 0; r < NX; ++r) x[r] = reinterpret_cast<const float*>(act + r * stride);
  int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    const __m512 w0 = L::Load(w, i, 0xFFFF), w1 = L::Load(w, i + 16, 0xFFFF);
#pragma GCC unroll 8
    for (int r = 0; r < NX; ++r) {
      acc[r] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x[r] + i), acc[r]);
      acc2[r] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x[r] + i + 16), acc2[r]);
    }
  }
  for (; i < k; i += 16) {
    const __mmask16 m = Mask16(k - i);
    const __m512 w0 = L::Load(w, i, m);
#pragma GCC unroll 8
    for (int r = 0; r < NX; ++r)
      acc[r] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(m, x[r] + i), acc[r]);
  }
#pragma GCC unroll 8
  for (int r = 0; r < NX; ++r) acc[r] = _mm512_add_ps(acc[r], acc2[r]);
  StoreSums<NX>(acc, y, ldy);
}

template <int NX>
void DotBf16N(int64_t k, const void* w, const uint8_t* act, size_t stride, float* y, int64_t ldy) {
  __m512 acc[NX];
#pragma GCC unroll 8
  for (int r = 0; r < NX; ++r) acc[r] = _mm512_setzero_ps();
  const auto* wp = static_cast<const uint16_t*>(w);
  for (int64_t i = 0; i < k; i += 32) {
    const __mmask32 m = Mask32(k - i);
    const __m512bh wv = (__m512bh)_mm512_maskz_loadu_epi16(m, wp + i);
#pragma GCC unroll 8
    for (int r = 0; r < NX; ++r) {
      const auto* xr = reinterpret_cast<const uint16_t*>(act + r * stride);
      acc[r] = _mm512_dpbf16_ps(acc[r], wv, (__m512bh)_mm512_maskz_loadu_epi16(m, xr + i));
    }
  }
  StoreSums<NX>(acc, y, ldy);
}

template <template <int> class K>
void ByRows(int64_t k, const void* w, const uint8_t* act, size_t stride, int nx, float* y,
            int64_t ldy) {
  switch (nx) {
    case 1:
      return K<1>::Run(k, w, act, stride, y, ldy);
    case 2:
      return K<2>::Run(k, w, act, stride, y, ldy);
    case 3:
      return K<3>::Run(k, w, act, stride, y, ldy);
    default:
      return K<4>::Run(k, w, act, stride, y, ldy);
  }
}
template <int NX>
struct KF32 {
  static void Run(int64_t k, const void* w, const uint8_t* a, size_t s, float* y, int64_t l) {
    DotFloatN<LoadF32, NX>(k, w, a, s, y, l);
  }
};
template <int NX>
struct KF16 {
  static void Run(int64_t k, const void* w, const uint8_t* a, size_t s, float* y, int64_t l) {
    DotFloatN<LoadF16, NX>(k, w, a, s, y, l);
  }
};
template <int NX>
struct KBF16 {
  static void Run(int64_t k, const void* w, const uint8_t* a, size_t s, float* y, int64_t l) {
    DotBf16N<NX>(k, w, a, s, y, l);
  }
};

void ActBf16(const float* x, int64_t k, uint8_t* out) {
  auto* o = reinterpret_cast<uint16_t*>(out);
  for (int64_t i = 0; i < k; i += 16) {
    const __mmask16 m = Mask16(k - i);
    const __m256bh v = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + i));
    _mm256_mask_storeu_epi16(o + i, m, (__m256i)v);
  }
}

// Quantizes 16 floats with multiplier id to int32 (round to nearest even).
inline __m512i Q16(const float* x, __m512 id) {
  return _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x), id));
}
inline float AbsMax(const float* x, int n) {
  __m512 m = _mm512_setzero_ps();
  for (int i = 0; i < n; i += 16) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
  return HMax(m);
}

void ActQ8_32(const float* x, int64_t k, uint8_t* out) {
  const int64_t nb = k / 32, ng = Q8Groups(k);
  auto* qs = reinterpret_cast<int8_t*>(out);
  auto* d4 = reinterpret_cast<float*>(out + 128 * ng);
  float* s4 = d4 + 16 * ng;
  auto* sums = reinterpret_cast<int32_t*>(out + 256 * ng);
  for (int64_t b = 0; b < 4 * ng; ++b) {
    int8_t* lo = qs + 128 * (b / 4) + 16 * (b % 4);
    if (b >= nb) {  // padding block
      _mm_storeu_si128(reinterpret_cast<__m128i*>(lo), _mm_setzero_si128());
      _mm_storeu_si128(reinterpret_cast<__m128i*>(lo + 64), _mm_setzero_si128());
      _mm_storeu_ps(d4 + 4 * b, _mm_setzero_ps());
      _mm_storeu_ps(s4 + 4 * b, _mm_setzero_ps());
      sums[b] = 0;
      continue;
    }
    const float* xb = x + 32 * b;
    const float amax = AbsMax(xb, 32);
    const __m512 id = _mm512_set1_ps(amax != 0 ? 127.0f / amax : 0.0f);
    const __m512i q0 = Q16(xb, id), q1 = Q16(xb + 16, id);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(lo), _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(lo + 64), _mm512_cvtepi32_epi8(q1));
    const float db = amax / 127.0f;
    const int sum = HAddI(_mm512_add_epi32(q0, q1));
    const float sb = db * static_cast<float>(sum) * 0.25f;
    _mm_storeu_ps(d4 + 4 * b, _mm_set1_ps(db));
    _mm_storeu_ps(s4 + 4 * b, _mm_set1_ps(sb));
    sums[b] = sum;
  }
}

void ActQ8_256(const float* x, int64_t k, uint8_t* out) {
  auto* qs = reinterpret_cast<int8_t*>(out);
  auto* d = reinterpret_cast<float*>(out + k);
  auto* bsums = reinterpret_cast<int16_t*>(d + k / 256);
  for (int64_t b = 0; b < k / 256; ++b) {
    const float* xb = x + 256 * b;
    const float amax = AbsMax(xb, 256);
    const __m512 id = _mm512_set1_ps(amax != 0 ? 127.0f / amax : 0.0f);
    d[b] = amax / 127.0f;
    for (int g = 0; g < 16; ++g) {
      const __m512i q = Q16(xb + 16 * g, id);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 256 * b + 16 * g), _mm512_cvtepi32_epi8(q));
      bsums[16 * b + g] = static_cast<int16_t>(HAddI(q));
    }
  }
}

}  // namespace

DotFn DotAvx512Float(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
      return ByRows<KF32>;
    case GgmlType::kF16:
      return ByRows<KF16>;
    case GgmlType::kBF16:
      return ByRows<KBF16>;
    default:
      return nullptr;
  }
}

QuantizeActFn QuantizeActAvx512(ActFormat f) {
  switch (f) {
    case ActFormat::kBF16:
      return ActBf16;
    case ActFormat::kQ8_32:
      return ActQ8_32;
    case ActFormat::kQ8_256:
      return ActQ8_256;
    case ActFormat::kF32:
      return nullptr;
  }
  return nullptr;
}

}  // namespace tachyon::kernels::internal
