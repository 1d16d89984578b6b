// AVX-512 VNNI kernels for the 32-element block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0)
// against kQ8_32 activations (groups of 4 blocks, see Q8Row32).
//
// Four weight blocks are unpacked per step: `lo` holds each block's elements 0..15 as
// unsigned codes in one 128-bit lane, `hi` elements 16..31 (Q4: 0..15, Q5: 0..31, Q8_0:
// q + 128). Two vpdpbusd against the group's activation halves leave one block per four
// int32 lanes, so per lane:
//   acc  += dot * (dw * dx)        accc += c * s4
// with c = -offset * dw (symmetric types) or the block min m (Q4_1 / Q5_1). Each unpacked
// group is used for up to kMaxRows activation rows.
#include "kernels/simd_avx512.h"  // first: see its note

#include <cstring>

#include "kernels/matmul_internal.h"
#include "tensor/quant_blocks.h"

namespace tachyon::kernels::internal {
namespace {

struct Group {
  __m512i lo, hi;
  __m512 dw, c;
};

// 16 bytes from each of 4 blocks (p, p + stride, ...) -> one per 128-bit lane.
inline __m512i Lanes16(const uint8_t* p, size_t stride) {
  __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + stride)), 1);
  v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * stride)), 2);
  return _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 3 * stride)),
                            3);
}
inline uint32_t Load16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t Load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
// fp16 at p + i * stride (i < 4) -> [f0 x4, f1 x4, f2 x4, f3 x4].
inline __m512 Fp16x4(const uint8_t* p, size_t stride) {
  const uint64_t v = Load16(p) | (static_cast<uint64_t>(Load16(p + stride)) << 16) |
                     (static_cast<uint64_t>(Load16(p + 2 * stride)) << 32) |
                     (static_cast<uint64_t>(Load16(p + 3 * stride)) << 48);
  const __m128 f = _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(v)));
  const __m512i idx = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(f));
}
inline void SplitNibbles(__m512i v, Group* g) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  g->lo = _mm512_and_si512(v, m4);
  g->hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
}
// Q5 fifth bits: bit j of block i's qh -> byte 16 i + j of lo (j < 16) or hi (j >= 16).
template <typename Block>
inline void AddHighBits(const Block* b, Group* g) {
  uint64_t mlo = 0, mhi = 0;
  for (int i = 0; i < 4; ++i) {
    const uint32_t qh = Load32(b[i].qh);
    mlo |= static_cast<uint64_t>(qh & 0xFFFFu) << (16 * i);
    mhi |= static_cast<uint64_t>(qh >> 16) << (16 * i);
  }
  const __m512i bit = _mm512_set1_epi8(16);
  g->lo = _mm512_or_si512(g->lo, _mm512_maskz_mov_epi8(mlo, bit));
  g->hi = _mm512_or_si512(g->hi, _mm512_maskz_mov_epi8(mhi, bit));
}

template <typename B>
inline const uint8_t* Bytes(const B* b) {
  return reinterpret_cast<const uint8_t*>(b);
}

struct Q4_0T {
  using Block = BlockQ4_0;
  static Group Unpack(const Block* b) {
    Group g;
    SplitNibbles(Lanes16(b->qs, sizeof(Block)), &g);
    g.dw = Fp16x4(Bytes(&b->d), sizeof(Block));
    g.c = _mm512_mul_ps(g.dw, _mm512_set1_ps(-8.0f));
    return g;
  }
};
struct Q4_1T {
  using Block = BlockQ4_1;
  static Group Unpack(const Block* b) {
    Group g;
    SplitNibbles(Lanes16(b->qs, sizeof(Block)), &g);
    g.dw = Fp16x4(Bytes(&b->d), sizeof(Block));
    g.c = Fp16x4(Bytes(&b->m), sizeof(Block));
    return g;
  }
};
struct Q5_0T {
  using Block = BlockQ5_0;
  static Group Unpack(const Block* b) {
    Group g;
    SplitNibbles(Lanes16(b->qs, sizeof(Block)), &g);
    AddHighBits(b, &g);
    g.dw = Fp16x4(Bytes(&b->d), sizeof(Block));
    g.c = _mm512_mul_ps(g.dw, _mm512_set1_ps(-16.0f));
    return g;
  }
};
struct Q5_1T {
  using Block = BlockQ5_1;
  static Group Unpack(const Block* b) {
    Group g;
    SplitNibbles(Lanes16(b->qs, sizeof(Block)), &g);
    AddHighBits(b, &g);
    g.dw = Fp16x4(Bytes(&b->d), sizeof(Block));
    g.c = Fp16x4(Bytes(&b->m), sizeof(Block));
    return g;
  }
};
struct Q8_0T {
  using Block = BlockQ8_0;
  static Group Unpack(const Block* b) {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    const auto* q = reinterpret_cast<const uint8_t*>(b->qs);
    Group g;
    g.lo = _mm512_xor_si512(Lanes16(q, sizeof(Block)), flip);
    g.hi = _mm512_xor_si512(Lanes16(q + 16, sizeof(Block)), flip);
    g.dw = Fp16x4(Bytes(&b->d), sizeof(Block));
    g.c = _mm512_mul_ps(g.dw, _mm512_set1_ps(-128.0f));
    return g;
  }
};

template <typename T, int NX>
inline __attribute__((always_inline)) void Step(const typename T::Block* blk, int64_t g,
                                                const Q8Row32* x, __m512* acc, __m512* accc) {
  const Group u = T::Unpack(blk);
#pragma GCC unroll 8
  for (int r = 0; r < NX; ++r) {
    const int8_t* xq = x[r].qs + 128 * g;
    __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u.lo, _mm512_loadu_si512(xq));
    dot = _mm512_dpbusd_epi32(dot, u.hi, _mm512_loadu_si512(xq + 64));
    const __m512 scale = _mm512_mul_ps(u.dw, _mm512_loadu_ps(x[r].d4 + 16 * g));
    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, acc[r]);
    accc[r] = _mm512_fmadd_ps(u.c, _mm512_loadu_ps(x[r].s4 + 16 * g), accc[r]);
  }
}

template <typename T, int NX>
void DotN(int64_t k, const void* w, const uint8_t* act, size_t stride, float* y, int64_t ldy) {
  using Block = typename T::Block;
  const auto* blk = static_cast<const Block*>(w);
  const int64_t nb = k / 32, full = nb / 4;
  Q8Row32 x[NX];
  // Two accumulator sets (alternate groups) and separate offset terms keep the FMA
  // dependency chains short when NX is small.
  __m512 acc0[NX], acc1[NX], accc0[NX], accc1[NX];
#pragma GCC unroll 8
  for (int r = 0; r < NX; ++r) {
    x[r] = ViewQ8Row32(act + r * stride, k);
    acc0[r] = acc1[r] = accc0[r] = accc1[r] = _mm512_setzero_ps();
  }
  int64_t g = 0;
  for (; g + 2 <= full; g += 2) {
    Step<T, NX>(blk + 4 * g, g, x, acc0, accc0);
    Step<T, NX>(blk + 4 * g + 4, g + 1, x, acc1, accc1);
  }
  if (g < full) {
    Step<T, NX>(blk + 4 * g, g, x, acc0, accc0);
    ++g;
  }
  if (nb % 4) {  // last partial group: missing blocks read as zero blocks
    Block tail[4];
    std::memset(tail, 0, sizeof(tail));
    std::memcpy(tail, blk + 4 * g, sizeof(Block) * (nb % 4));
    Step<T, NX>(tail, g, x, acc1, accc1);
  }
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

DotFn DotAvx512Block32(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
      return ByRows<Q4_0T>;
    case GgmlType::kQ4_1:
      return ByRows<Q4_1T>;
    case GgmlType::kQ5_0:
      return ByRows<Q5_0T>;
    case GgmlType::kQ5_1:
      return ByRows<Q5_1T>;
    case GgmlType::kQ8_0:
      return ByRows<Q8_0T>;
    default:
      return nullptr;
  }
}

}  // namespace tachyon::kernels::internal
