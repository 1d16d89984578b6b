// AVX-512 VNNI kernels for the 32-element block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0)
// against kQ8_32 activations.
//
// Two weight blocks (64 elements) are unpacked per step into 64 unsigned bytes in element
// order (Q4: 0..15, Q5: 0..31, Q8_0: q + 128), then vpdpbusd with the signed activation
// bytes gives 16 int32 lanes (8 per block). Per lane:
//   acc += dot * (dw * dx) + c * s8,  c = -offset * dw (symmetric types) or m (Q4_1/Q5_1),
// where dx / s8 are the activation's per-lane copies of d and d * sum(q) / 8. Each unpacked
// weight pair is used for up to kMaxRows activation rows.
#include "kernels/simd_avx512.h"  // first: see its note

#include <cstring>

#include "kernels/matmul_internal.h"
#include "tensor/quant_blocks.h"

namespace tachyon::kernels::internal {
namespace {

// Two fp16 values -> [a x8, b x8].
inline __m512 HalvesFp16(uint16_t a, uint16_t b) {
  const __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(a | (static_cast<uint32_t>(b) << 16))));
  const __m512i idx = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(f));
}

// Nibbles of two 16-byte qs arrays -> [b0 lo, b0 hi, b1 lo, b1 hi] (element order).
inline __m512i Nibbles(const uint8_t* qs0, const uint8_t* qs1) {
  const __m256i t = _mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs0))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs1)), 1);
  __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(t), _mm256_srli_epi16(t, 4), 1);
  z = _mm512_and_si512(z, _mm512_set1_epi8(0x0F));
  return _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));
}

inline uint64_t HighBits(const uint8_t* qh0, const uint8_t* qh1) {
  uint32_t a, b;
  std::memcpy(&a, qh0, 4);
  std::memcpy(&b, qh1, 4);
  return a | (static_cast<uint64_t>(b) << 32);
}

// Unpacked weights of a block pair: codes, dw per lane, c per lane.
struct Pair {
  __m512i q;
  __m512 dw;
  __m512 c;
};

// For a trailing single block, `b1` aliases `b0` and its lanes are masked off by the caller
// (activation loads are zero there).
struct Q4_0T {
  using Block = BlockQ4_0;
  static Pair Unpack(const Block& b0, const Block& b1) {
    const __m512 dw = HalvesFp16(b0.d, b1.d);
    return {Nibbles(b0.qs, b1.qs), dw, _mm512_mul_ps(dw, _mm512_set1_ps(-8.0f))};
  }
};
struct Q4_1T {
  using Block = BlockQ4_1;
  static Pair Unpack(const Block& b0, const Block& b1) {
    return {Nibbles(b0.qs, b1.qs), HalvesFp16(b0.d, b1.d), HalvesFp16(b0.m, b1.m)};
  }
};
struct Q5_0T {
  using Block = BlockQ5_0;
  static Pair Unpack(const Block& b0, const Block& b1) {
    __m512i q = Nibbles(b0.qs, b1.qs);
    q = _mm512_mask_add_epi8(q, HighBits(b0.qh, b1.qh), q, _mm512_set1_epi8(16));
    const __m512 dw = HalvesFp16(b0.d, b1.d);
    return {q, dw, _mm512_mul_ps(dw, _mm512_set1_ps(-16.0f))};
  }
};
struct Q5_1T {
  using Block = BlockQ5_1;
  static Pair Unpack(const Block& b0, const Block& b1) {
    __m512i q = Nibbles(b0.qs, b1.qs);
    q = _mm512_mask_add_epi8(q, HighBits(b0.qh, b1.qh), q, _mm512_set1_epi8(16));
    return {q, HalvesFp16(b0.d, b1.d), HalvesFp16(b0.m, b1.m)};
  }
};
struct Q8_0T {
  using Block = BlockQ8_0;
  static Pair Unpack(const Block& b0, const Block& b1) {
    const __m512i q = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0.qs))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b1.qs)), 1);
    const __m512 dw = HalvesFp16(b0.d, b1.d);
    return {_mm512_xor_si512(q, _mm512_set1_epi8(static_cast<char>(0x80))), dw,
            _mm512_mul_ps(dw, _mm512_set1_ps(-128.0f))};
  }
};

// One block pair for NX rows into accumulator set `acc` (dot terms) / `accc` (offset terms).
template <typename T, int NX>
inline __attribute__((always_inline)) void Step(const typename T::Block* blk, int64_t b, int64_t nb,
                                                const Q8Row32* x, __m512* acc, __m512* accc) {
  const bool two = b + 1 < nb;
  const Pair p = T::Unpack(blk[b], blk[two ? b + 1 : b]);
  const __mmask64 qm = two ? ~__mmask64{0} : __mmask64{0xFFFFFFFFu};
  const __mmask16 fm = two ? 0xFFFF : 0x00FF;
#pragma GCC unroll 8
  for (int r = 0; r < NX; ++r) {
    const __m512i xq = _mm512_maskz_loadu_epi8(qm, x[r].qs + 32 * b);
    const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), p.q, xq);
    const __m512 dx = _mm512_maskz_loadu_ps(fm, x[r].d8 + 8 * b);
    const __m512 s8 = _mm512_maskz_loadu_ps(fm, x[r].s8 + 8 * b);
    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(p.dw, dx), acc[r]);
    accc[r] = _mm512_fmadd_ps(p.c, s8, accc[r]);
  }
}

template <typename T, int NX>
void DotN(int64_t k, const void* w, const uint8_t* act, size_t stride, float* y, int64_t ldy) {
  const auto* blk = static_cast<const typename T::Block*>(w);
  const int64_t nb = k / 32;
  Q8Row32 x[NX];
  // Two accumulator sets (alternate block pairs) and separate offset terms keep the FMA
  // dependency chains short when NX is small.
  __m512 acc0[NX], acc1[NX], accc0[NX], accc1[NX];
#pragma GCC unroll 8
  for (int r = 0; r < NX; ++r) {
    x[r] = ViewQ8Row32(act + r * stride, k);
    acc0[r] = acc1[r] = accc0[r] = accc1[r] = _mm512_setzero_ps();
  }
  int64_t b = 0;
  for (; b + 4 <= nb; b += 4) {
    Step<T, NX>(blk, b, nb, x, acc0, accc0);
    Step<T, NX>(blk, b + 2, nb, x, acc1, accc1);
  }
  for (; b < nb; b += 2) Step<T, NX>(blk, b, nb, x, acc0, accc0);
#pragma GCC unroll 8
  for (int r = 0; r < NX; ++r) {
    acc0[r] = _mm512_add_ps(_mm512_add_ps(acc0[r], acc1[r]), _mm512_add_ps(accc0[r], accc1[r]));
  }
  StoreSums<NX>(acc0, y, ldy);
}

template <typename T>
void ByRows(int64_t k, const void* w, const uint8_t* act, size_t stride, int nx, float* y,
            int64_t ldy) {
  switch (nx) {
    case 1: return DotN<T, 1>(k, w, act, stride, y, ldy);
    case 2: return DotN<T, 2>(k, w, act, stride, y, ldy);
    case 3: return DotN<T, 3>(k, w, act, stride, y, ldy);
    default: return DotN<T, 4>(k, w, act, stride, y, ldy);
  }
}

}  // namespace

DotFn DotAvx512Block32(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0: return ByRows<Q4_0T>;
    case GgmlType::kQ4_1: return ByRows<Q4_1T>;
    case GgmlType::kQ5_0: return ByRows<Q5_0T>;
    case GgmlType::kQ5_1: return ByRows<Q5_1T>;
    case GgmlType::kQ8_0: return ByRows<Q8_0T>;
    default: return nullptr;
  }
}

}  // namespace tachyon::kernels::internal
