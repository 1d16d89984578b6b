// Paged attention, AVX2 + FMA + F16C variant (compiled with AVX2 flags; called only after
// run-time dispatch): the tile kernel of attention_tile.h over AVX2 row ops, and the KV row
// conversions.
#include "kernels/ops_avx2.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/attention_decode.h"
#include "kernels/attention_tile.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"

namespace tachyon::kernels {
namespace {

using internal::DecodePrefetch;
using internal::HMax;
using internal::HSum;

// n elements (n % 32 == 0) of q4_0 / q4_1 blocks as floats: x = d * q + m per block (q4_0:
// m = -8 d), the reference's values exactly (see kBlockParams in attention_decode.h).
template <KvDtype D>
inline void DequantQ4Row(const uint8_t* src, float* out, int64_t n) {
  using Block = std::conditional_t<D == KvDtype::kQ4_0, BlockQ4_0, BlockQ4_1>;
  const auto* b = reinterpret_cast<const Block*>(src);
  for (int64_t i = 0; i < n / kQK4; ++i) {
    float p[2];
    internal::BlockParamsOf<D>(src, i, p);
    const __m256 d = _mm256_set1_ps(p[0]), m = _mm256_set1_ps(p[1]);
    for (int c = 0; c < 2; ++c) {
      const __m256i w =
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[i].qs + 8 * c)));
      const __m256 lo = _mm256_cvtepi32_ps(_mm256_and_si256(w, _mm256_set1_epi32(0xF)));
      const __m256 hi = _mm256_cvtepi32_ps(_mm256_srli_epi32(w, 4));
      _mm256_storeu_ps(out + i * kQK4 + 8 * c, _mm256_fmadd_ps(lo, d, m));
      _mm256_storeu_ps(out + i * kQK4 + 16 + 8 * c, _mm256_fmadd_ps(hi, d, m));
    }
  }
}

struct Avx2Isa {
  static const float* LoadRow(KvDtype dtype, const uint8_t* src, float* buf, int64_t n) {
    switch (dtype) {
      case KvDtype::kF32:
        return reinterpret_cast<const float*>(src);
      case KvDtype::kF16: {
        const auto* h = reinterpret_cast<const uint16_t*>(src);
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) {
          _mm256_storeu_ps(
              buf + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
        }
        for (; i < n; ++i) buf[i] = Fp16ToF32(h[i]);
        return buf;
      }
      case KvDtype::kBf16: {
        const auto* h = reinterpret_cast<const uint16_t*>(src);
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) {
          const __m256i w =
              _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i)));
          _mm256_storeu_ps(buf + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
        }
        for (; i < n; ++i) buf[i] = Bf16ToF32(h[i]);
        return buf;
      }
      case KvDtype::kQ8_0: {
        const auto* b = reinterpret_cast<const BlockQ8_0*>(src);
        for (int64_t i = 0; i < n / kQK4; ++i) {
          const __m256 d = _mm256_set1_ps(Fp16ToF32(b[i].d));
          for (int c = 0; c < 4; ++c) {
            const __m128i q8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[i].qs + 8 * c));
            const __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8));
            _mm256_storeu_ps(buf + i * kQK4 + 8 * c, _mm256_mul_ps(f, d));
          }
        }
        return buf;
      }
      case KvDtype::kQ4_0:
        DequantQ4Row<KvDtype::kQ4_0>(src, buf, n);
        return buf;
      case KvDtype::kQ4_1:
        DequantQ4Row<KvDtype::kQ4_1>(src, buf, n);
        return buf;
    }
    return buf;
  }

  static float Dot(const float* a, const float* b, int64_t n) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
      acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    }
    for (; i + 8 <= n; i += 8) {
      acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    }
    float sum = HSum(_mm256_add_ps(acc0, acc1));
    for (; i < n; ++i) sum += a[i] * b[i];
    return sum;
  }

  static void Scores(const float* q, const float* const* rows, int64_t n_rows, int64_t hd,
                     float scale, float* s) {
    for (int64_t j = 0; j < n_rows; ++j) s[j] = Dot(q, rows[j], hd) * scale;
  }

  static void Scores2(const float* q0, const float* q1, const float* const* rows, int64_t n_rows,
                      int64_t hd, float scale, float* s0, float* s1) {
    Scores(q0, rows, n_rows, hd, scale, s0);
    Scores(q1, rows, n_rows, hd, scale, s1);
  }
  static float Max(const float* s, int64_t n) {
    __m256 mx = _mm256_set1_ps(s[0]);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(s + i));
    float r = HMax(mx);
    for (; i < n; ++i) r = std::max(r, s[i]);
    return r;
  }
  static float ExpSub(float* s, int64_t n, float m) {
    const __m256 vm = _mm256_set1_ps(m);
    __m256 sum = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m256 e = internal::Exp(_mm256_sub_ps(_mm256_loadu_ps(s + i), vm));
      _mm256_storeu_ps(s + i, e);
      sum = _mm256_add_ps(sum, e);
    }
    float total = HSum(sum);
    for (; i < n; ++i) total += (s[i] = std::exp(s[i] - m));
    return total;
  }

  static void Scale(float* y, float a, int64_t n) {
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), va));
    for (; i < n; ++i) y[i] *= a;
  }

  // 32 output floats at a time stay in four registers across all rows; scalar tail.
  static void Accumulate(const float* p, const float* const* rows, int64_t n_rows, float* acc,
                         int64_t hd) {
    int64_t d = 0;
    for (; d + 32 <= hd; d += 32) {
      __m256 a0 = _mm256_loadu_ps(acc + d), a1 = _mm256_loadu_ps(acc + d + 8),
             a2 = _mm256_loadu_ps(acc + d + 16), a3 = _mm256_loadu_ps(acc + d + 24);
      for (int64_t j = 0; j < n_rows; ++j) {
        const __m256 w = _mm256_set1_ps(p[j]);
        const float* r = rows[j] + d;
        a0 = _mm256_fmadd_ps(w, _mm256_loadu_ps(r), a0);
        a1 = _mm256_fmadd_ps(w, _mm256_loadu_ps(r + 8), a1);
        a2 = _mm256_fmadd_ps(w, _mm256_loadu_ps(r + 16), a2);
        a3 = _mm256_fmadd_ps(w, _mm256_loadu_ps(r + 24), a3);
      }
      _mm256_storeu_ps(acc + d, a0);
      _mm256_storeu_ps(acc + d + 8, a1);
      _mm256_storeu_ps(acc + d + 16, a2);
      _mm256_storeu_ps(acc + d + 24, a3);
    }
    for (; d + 8 <= hd; d += 8) {
      __m256 a = _mm256_loadu_ps(acc + d);
      for (int64_t j = 0; j < n_rows; ++j) {
        a = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), _mm256_loadu_ps(rows[j] + d), a);
      }
      _mm256_storeu_ps(acc + d, a);
    }
    for (; d < hd; ++d) {
      float a = acc[d];
      for (int64_t j = 0; j < n_rows; ++j) a += p[j] * rows[j][d];
      acc[d] = a;
    }
  }
};

// ---- Decode kernel (jobs of <= kDecodeMaxQueries query vectors, head_dim % 8 == 0) ----
//
// The AVX-512 decode kernel (attention_avx512.cc) with 8-wide vectors: K/V converted in
// registers where they are used; scores of 4 slots x 2 keys (2 x 4, 1 x 8) per pass with one
// joint 8-way reduction; P·V with 8 accumulator registers (4 slots x 16 floats, 2 x 32, or one
// slot x 32 floats); 128-key tiles; K rows prefetched 32 keys ahead.

// 8 elements at element d (d % 8 == 0) of a KV row of dtype D; q8_0 takes the row's block
// scales as floats from `scales`, q4_0 / q4_1 their (d, m) pairs (8 bytes widened, the low or
// high nibbles, one FMA).
template <KvDtype D>
inline __m256 LoadKv8(const uint8_t* row, const float* scales, int64_t d) {
  if constexpr (D == KvDtype::kF32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + d);
  } else if constexpr (D == KvDtype::kF16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(
        reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(row) + d)));
  } else if constexpr (D == KvDtype::kBf16) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(
        reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(row) + d)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  } else if constexpr (D == KvDtype::kQ4_0 || D == KvDtype::kQ4_1) {
    using Block = std::conditional_t<D == KvDtype::kQ4_0, BlockQ4_0, BlockQ4_1>;
    const Block* b = reinterpret_cast<const Block*>(row) + d / kQK4;
    const __m256i w =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b->qs + d % 16)));
    const __m256i q =
        (d & 16) ? _mm256_srli_epi32(w, 4) : _mm256_and_si256(w, _mm256_set1_epi32(0xF));
    const float* pm = scales + 2 * (d / kQK4);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(q), _mm256_set1_ps(pm[0]), _mm256_set1_ps(pm[1]));
  } else {
    const BlockQ8_0* b = reinterpret_cast<const BlockQ8_0*>(row) + d / kQK4;
    const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b->qs + d % kQK4));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)),
                         _mm256_set1_ps(scales[d / kQK4]));
  }
}

// Lane sums of 8 vectors as one vector: result[t] = sum of a[t]'s 8 lanes.
inline __m256 Reduce8(const __m256* a) {
  const __m256 h01 = _mm256_hadd_ps(a[0], a[1]), h23 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 h45 = _mm256_hadd_ps(a[4], a[5]), h67 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 x = _mm256_hadd_ps(h01, h23), y = _mm256_hadd_ps(h45, h67);
  return _mm256_add_ps(_mm256_permute2f128_ps(x, y, 0x20), _mm256_permute2f128_ps(x, y, 0x31));
}

// s[h][j..] = scale * q[h] · K[j] for H slots, keys [0, n), n % (8 / H) == 0.
template <KvDtype D, int H>
inline void DecodeScores8(const float* const* q, const uint8_t* const* rows, const float* scales,
                          int64_t n, int64_t hd, float scale, float* const* s,
                          const DecodePrefetch* pf) {
  constexpr int T = 8 / H;
  const int64_t nb = internal::KvParamStride<D>(hd);
  const __m256 vscale = _mm256_set1_ps(scale);
  for (int64_t j = 0; j < n; j += T) {
    if (pf) {
      for (int64_t t = j; t < j + T; ++t) pf->Key(t);
    }
    __m256 a[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) a[i] = _mm256_setzero_ps();
    for (int64_t d = 0; d < hd; d += 8) {
      __m256 kv[T];
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) kv[t] = LoadKv8<D>(rows[j + t], scales + (j + t) * nb, d);
#pragma GCC unroll 4
      for (int h = 0; h < H; ++h) {
        const __m256 x = _mm256_loadu_ps(q[h] + d);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) a[h * T + t] = _mm256_fmadd_ps(x, kv[t], a[h * T + t]);
      }
    }
    alignas(32) float r[8];
    _mm256_store_ps(r, _mm256_mul_ps(Reduce8(a), vscale));
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h) {
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) s[h][j + t] = r[h * T + t];
    }
  }
}

// acc[h][d0, d0 + 8C) = alpha[h] * acc[h] + sum_{j < n} p[h][j] * V[j] for H slots, each
// output float one chain over the keys in order whatever H (batch invariance, as the AVX-512
// kernel).
template <KvDtype D, int H, int C>
inline void DecodeAccumulatePass8(const float* const* p, const float* alpha,
                                  const uint8_t* const* rows, const float* scales, int64_t n,
                                  int64_t nb, int64_t d0, float* const* acc) {
  __m256 a[H][C];
#pragma GCC unroll 4
  for (int h = 0; h < H; ++h) {
    const __m256 al = _mm256_set1_ps(alpha[h]);
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) a[h][c] = _mm256_mul_ps(_mm256_loadu_ps(acc[h] + d0 + 8 * c), al);
  }
  for (int64_t j = 0; j < n; ++j) {
    __m256 v[C];
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) v[c] = LoadKv8<D>(rows[j], scales + j * nb, d0 + 8 * c);
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h) {
      const __m256 w = _mm256_set1_ps(p[h][j]);
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) a[h][c] = _mm256_fmadd_ps(w, v[c], a[h][c]);
    }
  }
#pragma GCC unroll 4
  for (int h = 0; h < H; ++h) {
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) _mm256_storeu_ps(acc[h] + d0 + 8 * c, a[h][c]);
  }
}

// P·V of H slots over all of head_dim (hd % 8 == 0): passes of 8 accumulator registers, the
// chunks left over one at a time.
template <KvDtype D, int H>
inline void DecodeAccumulate8(const float* const* p, const float* alpha, const uint8_t* const* rows,
                              const float* scales, int64_t n, int64_t hd, float* const* acc) {
  constexpr int C = H == 4 ? 2 : 4;
  const int64_t nb = internal::KvParamStride<D>(hd);
  int64_t d0 = 0;
  for (; d0 + 8 * C <= hd; d0 += 8 * C) {
    DecodeAccumulatePass8<D, H, C>(p, alpha, rows, scales, n, nb, d0, acc);
  }
  for (; d0 < hd; d0 += 8) DecodeAccumulatePass8<D, H, 1>(p, alpha, rows, scales, n, nb, d0, acc);
}

// The 8-wide policy of the decode driver (attention_decode.h).
struct Avx2Decode {
  static constexpr int64_t kKeyGroup = 8;
  static constexpr int kMaxSlotGroup = 4;
  static constexpr int64_t kConvertMinSlots = 17;

  template <KvDtype D>
  static void ConvertRows(const uint8_t* const* rows, const float* scales, int64_t n, int64_t hd,
                          float* out) {
    const int64_t nb = internal::KvParamStride<D>(hd);
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t d = 0; d < hd; d += 8) {
        _mm256_storeu_ps(out + j * hd + d, LoadKv8<D>(rows[j], scales + j * nb, d));
      }
    }
  }

  template <KvDtype D>
  static const float* Query(const float* q, int64_t, float*) {
    return q;
  }

  template <KvDtype D, int H>
  static void Scores(const float* const* q, const uint8_t* const* rows, const float* scales,
                     int64_t n, int64_t hd, float scale, float* const* s,
                     const DecodePrefetch* pf) {
    DecodeScores8<D, H>(q, rows, scales, n, hd, scale, s, pf);
  }

  template <KvDtype D, int H>
  static void Accumulate(const float* const* p, const float* alpha, const uint8_t* const* rows,
                         const float* scales, int64_t n, int64_t hd, float* const* acc) {
    DecodeAccumulate8<D, H>(p, alpha, rows, scales, n, hd, acc);
  }

  static void Softmax(float* si, int64_t n_pad, int64_t vlo, int64_t vhi, float& m, float& l,
                      float& alpha) {
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
    const __m256i vlo_v = _mm256_set1_epi32(static_cast<int>(vlo) - 1);
    const __m256i vhi_v = _mm256_set1_epi32(static_cast<int>(vhi));
    __m256 vis[internal::kDecodeKvTile / 8];
    __m256 mx = neg_inf;
    for (int64_t c = 0; c < n_pad / 8; ++c) {
      const __m256i idx = _mm256_add_epi32(iota, _mm256_set1_epi32(static_cast<int>(8 * c)));
      // vlo <= idx < vhi
      vis[c] = _mm256_castsi256_ps(
          _mm256_and_si256(_mm256_cmpgt_epi32(idx, vlo_v), _mm256_cmpgt_epi32(vhi_v, idx)));
      mx = _mm256_max_ps(mx, _mm256_blendv_ps(neg_inf, _mm256_loadu_ps(si + 8 * c), vis[c]));
    }
    const float m_new = std::max(m, HMax(mx));
    alpha = m == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp(m - m_new);
    m = m_new;
    const __m256 vm = _mm256_set1_ps(m_new);
    __m256 sum = _mm256_setzero_ps();
    for (int64_t c = 0; c < n_pad / 8; ++c) {
      const __m256 e =
          _mm256_and_ps(vis[c], internal::Exp(_mm256_sub_ps(_mm256_loadu_ps(si + 8 * c), vm)));
      _mm256_storeu_ps(si + 8 * c, e);
      sum = _mm256_add_ps(sum, e);
    }
    l = l * alpha + HSum(sum);
  }

  template <KvDtype D>
  static void Output(float* out, const float* acc, float inv_l, int64_t hd) {
    const __m256 inv = _mm256_set1_ps(inv_l);
    for (int64_t d = 0; d < hd; d += 8) {
      _mm256_storeu_ps(out + d, _mm256_mul_ps(_mm256_loadu_ps(acc + d), inv));
    }
  }
};

void AttendDecodeAvx2(const PagedKv& kv, const TileJob& job, const TileParams& p,
                      const internal::DecodePart* part, float* scratch) {
  switch (kv.dtype) {
    case KvDtype::kF32:
      return internal::AttendDecodeImpl<Avx2Decode, KvDtype::kF32>(kv, job, p, part, scratch);
    case KvDtype::kF16:
      return internal::AttendDecodeImpl<Avx2Decode, KvDtype::kF16>(kv, job, p, part, scratch);
    case KvDtype::kBf16:
      return internal::AttendDecodeImpl<Avx2Decode, KvDtype::kBf16>(kv, job, p, part, scratch);
    case KvDtype::kQ8_0:
      return internal::AttendDecodeImpl<Avx2Decode, KvDtype::kQ8_0>(kv, job, p, part, scratch);
    case KvDtype::kQ4_0:
      return internal::AttendDecodeImpl<Avx2Decode, KvDtype::kQ4_0>(kv, job, p, part, scratch);
    case KvDtype::kQ4_1:
      return internal::AttendDecodeImpl<Avx2Decode, KvDtype::kQ4_1>(kv, job, p, part, scratch);
  }
}

}  // namespace

void AttendTileAvx2(const PagedKv& kv, const TileJob& job, const TileParams& p, float* scratch) {
  if (internal::Avx2DecodeTakes(kv.head_dim, job.n_rows * p.n_group)) {
    return AttendDecodeAvx2(kv, job, p, nullptr, scratch);
  }
  internal::AttendTileImpl<Avx2Isa>(kv, job, p, scratch);
}

namespace internal {

void AttendDecodePartAvx2(const PagedKv& kv, const TileJob& job, const TileParams& p,
                          const DecodePart& part, float* scratch) {
  AttendDecodeAvx2(kv, job, p, &part, scratch);
}

// F16 through F16C (round to nearest even, like F32ToFp16); the others as the reference.
void StoreKvRowAvx2(KvDtype dtype, const float* x, void* dst, int64_t n) {
  if (dtype != KvDtype::kF16) return StoreKvRowReference(dtype, x, dst, n);
  auto* h = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i v =
        _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i), v);
  }
  for (; i < n; ++i) h[i] = F32ToFp16(x[i]);
}

}  // namespace internal
}  // namespace tachyon::kernels
