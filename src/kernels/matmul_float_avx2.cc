// AVX2 kernels for float weights (F32, F16 with float activations; BF16 widened to float)
// and the activation converters.
#include <immintrin.h>

#include "kernels/matmul_internal.h"

namespace tachyon::kernels::internal {
namespace {

float HSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

struct F32W {
  using X = float;
  static __m256 W(const void* w, int64_t i) {
    return _mm256_loadu_ps(static_cast<const float*>(w) + i);
  }
  static float WS(const void* w, int64_t i) { return static_cast<const float*>(w)[i]; }
  static __m256 Xv(const uint8_t* a, int64_t i) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(a) + i);
  }
  static float XS(const uint8_t* a, int64_t i) { return reinterpret_cast<const float*>(a)[i]; }
};
struct F16W : F32W {
  static __m256 W(const void* w, int64_t i) {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(w) + i)));
  }
  static float WS(const void* w, int64_t i) {
    return _cvtsh_ss(static_cast<const uint16_t*>(w)[i]);
  }
};
inline __m256 Bf16x8(const uint16_t* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
}
inline float Bf16S(uint16_t v) {
  uint32_t u = static_cast<uint32_t>(v) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}
struct BF16W {
  static __m256 W(const void* w, int64_t i) { return Bf16x8(static_cast<const uint16_t*>(w) + i); }
  static float WS(const void* w, int64_t i) { return Bf16S(static_cast<const uint16_t*>(w)[i]); }
  static __m256 Xv(const uint8_t* a, int64_t i) {
    return Bf16x8(reinterpret_cast<const uint16_t*>(a) + i);
  }
  static float XS(const uint8_t* a, int64_t i) {
    return Bf16S(reinterpret_cast<const uint16_t*>(a)[i]);
  }
};

template <typename L, int NX>
void DotN(int64_t k, const void* w, const uint8_t* act, size_t stride, float* y, int64_t ldy) {
  __m256 acc[NX], acc2[NX];
#pragma GCC unroll 8
  for (int r = 0; r < NX; ++r) acc[r] = acc2[r] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    const __m256 w0 = L::W(w, i), w1 = L::W(w, i + 8);
#pragma GCC unroll 8
    for (int r = 0; r < NX; ++r) {
      acc[r] = _mm256_fmadd_ps(w0, L::Xv(act + r * stride, i), acc[r]);
      acc2[r] = _mm256_fmadd_ps(w1, L::Xv(act + r * stride, i + 8), acc2[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < NX; ++r) {
    float s = HSum(_mm256_add_ps(acc[r], acc2[r]));
    for (int64_t j = i; j < k; ++j) s += L::WS(w, j) * L::XS(act + r * stride, j);
    y[r * ldy] = s;
  }
}

template <typename L>
void ByRows(int64_t k, const void* w, const uint8_t* act, size_t stride, int nx, float* y,
            int64_t ldy) {
  switch (nx) {
    case 1:
      return DotN<L, 1>(k, w, act, stride, y, ldy);
    case 2:
      return DotN<L, 2>(k, w, act, stride, y, ldy);
    case 3:
      return DotN<L, 3>(k, w, act, stride, y, ldy);
    default:
      return DotN<L, 4>(k, w, act, stride, y, ldy);
  }
}

inline float AbsMax(const float* x, int n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8)
    m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Quantizes 16 floats to int8 (round to nearest even), stores them, returns their sum.
inline int Q16(const float* x, __m256 id, int8_t* out) {
  const __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), id));
  const __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), id));
  const __m256i p16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xD8);  // in order
  const __m128i p8 = _mm_packs_epi16(_mm256_castsi256_si128(p16), _mm256_extracti128_si256(p16, 1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), p8);
  __m256i s = _mm256_add_epi32(a, b);
  __m128i t = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
  t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1));
  return _mm_cvtsi128_si32(t);
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
    const float amax = AbsMax(x + 32 * b, 32);
    const __m256 id = _mm256_set1_ps(amax != 0 ? 127.0f / amax : 0.0f);
    const int sum = Q16(x + 32 * b, id, lo) + Q16(x + 32 * b + 16, id, lo + 64);
    const float db = amax / 127.0f;
    _mm_storeu_ps(d4 + 4 * b, _mm_set1_ps(db));
    _mm_storeu_ps(s4 + 4 * b, _mm_set1_ps(db * static_cast<float>(sum) * 0.25f));
    sums[b] = sum;
  }
}

void ActQ8_256(const float* x, int64_t k, uint8_t* out) {
  auto* qs = reinterpret_cast<int8_t*>(out);
  auto* d = reinterpret_cast<float*>(out + k);
  auto* bsums = reinterpret_cast<int16_t*>(d + k / 256);
  for (int64_t b = 0; b < k / 256; ++b) {
    const float amax = AbsMax(x + 256 * b, 256);
    const __m256 id = _mm256_set1_ps(amax != 0 ? 127.0f / amax : 0.0f);
    d[b] = amax / 127.0f;
    for (int g = 0; g < 16; ++g) {
      bsums[16 * b + g] =
          static_cast<int16_t>(Q16(x + 256 * b + 16 * g, id, qs + 256 * b + 16 * g));
    }
  }
}

void ActBf16(const float* x, int64_t k, uint8_t* out) {
  auto* o = reinterpret_cast<uint16_t*>(out);
  int64_t i = 0;
  const __m256i bias = _mm256_set1_epi32(0x7FFF), one = _mm256_set1_epi32(1);
  for (; i + 8 <= k; i += 8) {
    const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(x + i));
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, bias), lsb), 16);
    // NaN: keep quiet NaN.
    const __m256 isnan =
        _mm256_cmp_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(x + i), _CMP_UNORD_Q);
    const __m256i nanv = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    r = _mm256_blendv_epi8(r, nanv, _mm256_castps_si256(isnan));
    const __m128i p = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o + i), p);
  }
  for (; i < k; ++i) {
    uint32_t u;
    __builtin_memcpy(&u, x + i, 4);
    o[i] = (u & 0x7FFFFFFFu) > 0x7F800000u
               ? static_cast<uint16_t>((u >> 16) | 0x40u)
               : static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
  }
}

}  // namespace

DotFn DotAvx2Float(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
      return ByRows<F32W>;
    case GgmlType::kF16:
      return ByRows<F16W>;
    case GgmlType::kBF16:
      return ByRows<BF16W>;
    default:
      return nullptr;
  }
}

QuantizeActFn QuantizeActAvx2(ActFormat f) {
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
