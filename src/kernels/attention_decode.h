// Internal to kernels/: the decode kernel's driver (jobs of at most kDecodeMaxQueries query
// vectors: decode, batched decode, speculative verify), written once over a vector policy and
// instantiated by attention_avx512.cc (16-wide) and attention_avx2.cc (8-wide). Include only
// from those files, after their intrinsics.
//
// Per tile of kDecodeKvTile keys: the scores of every query slot (Dec::Scores), an online
// softmax per slot over the keys its row sees (Dec::Softmax), then P·V into the slots'
// accumulators (Dec::Accumulate), the K/V rows converted in registers where they are used.
// The row pointers of the next tile are built while the current one runs, and its K rows
// are prefetched during the current tile's scores (DecodePrefetch).
//
// Dec provides:
//   kKeyGroup                        keys per score pass (the tile is padded to a multiple)
//   kMaxSlotGroup                    most query slots per Scores / Accumulate call (8 or 4)
//   Query<D>(q, hd, buf)             the query as the kernels read it (buf: hd floats)
//   Scores<D, H>(q, rows, scales, n, hd, scale, s, pf)   s[h][j] = scale * q[h] · K[j]
//   Softmax(s, n_pad, vlo, vhi, m, l, alpha)   one slot's online-softmax step over keys
//                                    [vlo, vhi) of the tile (the others get weight 0)
//   Accumulate<D, H>(p, alpha, rows, scales, n, hd, acc)  acc[h] = alpha[h] acc[h] + P·V
//   Output<D>(out, acc, inv, hd)     out = acc * inv in the caller's element order
//   kConvertMinSlots                 jobs of at least this many slots convert each tile's K and
//                                    V rows to f32 once (0: never), see AttendDecodeImpl
//   ConvertRows<D>(rows, scales, n, hd, out)   (when kConvertMinSlots > 0) rows [0, n) as f32
//                                    rows of hd floats, the values Scores / Accumulate compute in
//                                    registers
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/attention_tile.h"
#include "tensor/quant_blocks.h"

namespace tachyon::kernels::internal {

// Software prefetch of one KV row: a batched step sees each sequence's blocks once, in
// scattered block-sized runs too short for the hardware prefetcher.
inline void PrefetchRow(const uint8_t* row, size_t row_bytes) {
  for (size_t off = 0; off < row_bytes; off += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(row + off), _MM_HINT_T0);
  }
}

// Software prefetch during a tile's scores, key by key: K rows kDecodePrefetchKeys keys ahead
// (running into the next tile) and the tile's own V rows (read by P·V after all the scores).
// DRAM- or L3-resident KV is then in flight long before it is used.
inline constexpr int64_t kDecodePrefetchKeys = 32;
struct DecodePrefetch {
  const uint8_t* const* k_cur;   // the tile's K rows [0, n)
  const uint8_t* const* v_cur;   // its V rows
  const uint8_t* const* k_next;  // the next tile's K rows [0, n_next)
  int64_t n, n_next;
  size_t row_bytes;
  void Key(int64_t j) const {
    const int64_t a = j + kDecodePrefetchKeys;
    if (a < n) {
      PrefetchRow(k_cur[a], row_bytes);
    } else if (a - n < n_next) {
      PrefetchRow(k_next[a - n], row_bytes);
    }
    if (j < n) PrefetchRow(v_cur[j], row_bytes);
  }
};

// Runs fn(integral_constant<int, H>, first_slot) over the slots [0, n_slots) in groups of
// kMax (8 or 4), then 4, 2, 1: each converted K / V chunk feeds a whole group.
template <int kMax, class Fn>
inline void ForSlotGroups(int64_t n_slots, Fn&& fn) {
  int64_t i = 0;
  if constexpr (kMax >= 8) {
    for (; i + 8 <= n_slots; i += 8) fn(std::integral_constant<int, 8>(), i);
  }
  for (; i + 4 <= n_slots; i += 4) fn(std::integral_constant<int, 4>(), i);
  if (i + 2 <= n_slots) {
    fn(std::integral_constant<int, 2>(), i);
    i += 2;
  }
  if (i < n_slots) fn(std::integral_constant<int, 1>(), i);
}

// Block parameters as floats, kBlockParams<D> per 32-element block of a row: q8_0 its scale
// d; q4_0 / q4_1 (d, m) with x = d * q + m, q the nibble (q4_0: m = -8 d, so one FMA gives
// d * (q - 8) exactly as the reference: d has 11 significant bits, q - 8 four). The driver
// converts them once per tile key (KvParamStride<D>(hd) floats per row).
template <KvDtype D>
inline constexpr int64_t kBlockParams = D == KvDtype::kQ8_0                            ? 1
                                        : (D == KvDtype::kQ4_0 || D == KvDtype::kQ4_1) ? 2
                                                                                       : 0;
template <KvDtype D>
inline int64_t KvParamStride(int64_t hd) {
  return kBlockParams<D> * (hd / kQK4);
}
// F16C (both including files have it): one instruction per half.
template <KvDtype D>
inline void BlockParamsOf(const uint8_t* row, int64_t b, float* out) {
  if constexpr (D == KvDtype::kQ8_0) {
    out[0] = _cvtsh_ss(reinterpret_cast<const BlockQ8_0*>(row)[b].d);
  } else if constexpr (D == KvDtype::kQ4_0) {
    const float d = _cvtsh_ss(reinterpret_cast<const BlockQ4_0*>(row)[b].d);
    out[0] = d;
    out[1] = -8.0f * d;
  } else {
    static_assert(D == KvDtype::kQ4_1);
    const BlockQ4_1& blk = reinterpret_cast<const BlockQ4_1*>(row)[b];
    out[0] = _cvtsh_ss(blk.d);
    out[1] = _cvtsh_ss(blk.m);
  }
}

// part == nullptr: the whole job, normalised into job.out; else keys [part->key_lo,
// part->key_hi) only, the unnormalised state into part->acc / part->ml (DecodePart).
template <class Dec, KvDtype D>
void AttendDecodeImpl(const PagedKv& kv, const TileJob& job, const TileParams& p,
                      const DecodePart* part, float* scratch) {
  const int64_t hd = kv.head_dim, n_group = p.n_group, nq = job.n_rows * n_group;
  const int64_t ns = DecodeSlots(nq);                   // a dummy slot repeats the last query
  float* const s_base = scratch;                        // [ns][kDecodeKvTile] scores, then weights
  float* const acc_base = s_base + ns * kDecodeKvTile;  // [ns][hd]
  float* const m = acc_base + ns * hd;                  // [ns] running max
  float* const l = m + ns;                              // [ns] running sum
  float* const alpha = l + ns;                          // [ns] this tile's rescale factor
  // Blocked dtypes: [kDecodeKvTile][KvParamStride<D>(hd)] block parameters of K, then of V
  // (room for 2 per block).
  float* const ksc = alpha + ns;
  float* const vsc = ksc + 2 * kDecodeKvTile * (hd / kQK4);
  float* const qbuf = vsc + 2 * kDecodeKvTile * (hd / kQK4);  // [ns][hd] queries as Dec reads
  // Jobs of many slots (prefill rows, long verifies) of a blocked dtype convert each tile's K
  // and V rows to f32 once instead of once per slot group: the same d * q (+ m) operation, so
  // the same values and bits, with fewer conversions. (f16 and bf16 widen in one or two
  // instructions: reading converted rows back from L2 cost more than converting again.)
  constexpr bool kConvertible = 0 < kBlockParams<D> && 0 < Dec::kConvertMinSlots;
  const bool convert = kConvertible && ns >= Dec::kConvertMinSlots;
  float* const kconv = qbuf + ns * hd;              // [kDecodeKvTile][hd] converted K rows
  float* const vconv = kconv + kDecodeKvTile * hd;  // [kDecodeKvTile][hd] converted V rows
  const float* q[kDecodeMaxQueries];
  float* s[kDecodeMaxQueries];
  float* acc[kDecodeMaxQueries];
  int64_t row_of[kDecodeMaxQueries];
  for (int64_t i = 0; i < ns; ++i) {
    const int64_t qi = std::min(i, nq - 1);
    row_of[i] = qi / n_group;
    const float* qi_src = job.q + row_of[i] * job.row_stride + (qi % n_group) * hd;
    q[i] = convert ? Dec::template Query<KvDtype::kF32>(qi_src, hd, qbuf + i * hd)
                   : Dec::template Query<D>(qi_src, hd, qbuf + i * hd);
    s[i] = s_base + i * kDecodeKvTile;
    acc[i] = acc_base + i * hd;
    m[i] = -std::numeric_limits<float>::infinity();
    l[i] = 0.0f;
  }
  std::fill(acc_base, acc_base + ns * hd, 0.0f);

  const int64_t window = p.sliding_window;
  const int64_t first = job.pos_start;
  const int64_t end =
      part ? std::min(job.pos_start + job.n_rows, part->key_hi) : job.pos_start + job.n_rows;
  // Tiles start at multiples of kDecodeKvTile, so a query's tiles, and with them its rounding,
  // do not depend on the job's first row. Keys before the first row's window (`seen`) are
  // masked for every query and their blocks may already be gone from the table (a sliding
  // window's blocks are released): their row pointers repeat the row at `seen`.
  const int64_t seen = window > 0 ? std::max<int64_t>(0, first + 1 - window) : 0;
  const int64_t lo = std::max(seen / kDecodeKvTile * kDecodeKvTile, part ? part->key_lo : 0);
  const size_t row_bytes = kv.row_bytes();
  // Row pointers of the current tile and the next one (double-buffered, so that K rows of the
  // next tile can be prefetched while the current one is computed).
  const uint8_t* rows[2][2][kDecodeKvTile];  // [buffer][K, V][key]
  const int64_t bs = kv.block_size;
  const auto* kbase = static_cast<const uint8_t*>(kv.k);
  const auto* vbase = static_cast<const uint8_t*>(kv.v);
  auto fill_rows = [&](int64_t t0, int64_t t1, const uint8_t** kr, const uint8_t** vr) {
    const int64_t skip = std::clamp<int64_t>(seen - t0, 0, t1 - t0);  // < t1 - t0 if > 0
    int64_t t = t0 + skip, b = t / bs, slot = t - b * bs;
    for (; t < t1; ++b, slot = 0) {
      const int64_t len = std::min(t1 - t, bs - slot);
      const size_t off =
          static_cast<size_t>((job.block_table[b] * kv.n_kv_heads + job.kv_head) * bs + slot) *
          row_bytes;
      for (int64_t i = 0; i < len; ++i) {
        kr[t - t0 + i] = kbase + off + i * row_bytes;
        vr[t - t0 + i] = vbase + off + i * row_bytes;
      }
      t += len;
    }
    for (int64_t i = 0; i < skip; ++i) {
      kr[i] = kr[skip];
      vr[i] = vr[skip];
    }
  };
  int cur = 0;
  fill_rows(lo, std::min(lo + kDecodeKvTile, end), rows[0][0], rows[0][1]);
  for (int64_t j = 0; j < std::min(kDecodePrefetchKeys, end - lo); ++j) {
    PrefetchRow(rows[0][0][j], row_bytes);
  }
  for (int64_t t0 = lo; t0 < end; t0 += kDecodeKvTile) {
    const int64_t t1 = std::min(t0 + kDecodeKvTile, end), n = t1 - t0;
    const int64_t n_next = std::min(t1 + kDecodeKvTile, end) - t1;
    const uint8_t** krow = rows[cur][0];
    const uint8_t** vrow = rows[cur][1];
    if (n_next > 0) fill_rows(t1, t1 + n_next, rows[cur ^ 1][0], rows[cur ^ 1][1]);
    const DecodePrefetch pf{krow, vrow, rows[cur ^ 1][0], n, n_next, row_bytes};
    // Scores of a whole number of key groups: the padding keys repeat the last row and are
    // masked out by the softmax.
    const int64_t n_pad = (n + Dec::kKeyGroup - 1) / Dec::kKeyGroup * Dec::kKeyGroup;
    for (int64_t j = n; j < n_pad; ++j) krow[j] = krow[n - 1];
    if constexpr (0 < kBlockParams<D>) {  // the tile's block parameters as floats
      const int64_t nb = hd / kQK4, st = KvParamStride<D>(hd);
      for (int64_t j = 0; j < n_pad; ++j) {
        for (int64_t b = 0; b < nb; ++b) {
          BlockParamsOf<D>(krow[j], b, ksc + j * st + b * kBlockParams<D>);
          if (j < n) BlockParamsOf<D>(vrow[j], b, vsc + j * st + b * kBlockParams<D>);
        }
      }
    }
    const uint8_t* crow[kDecodeKvTile];  // converted rows (K, then V)
    if constexpr (kConvertible) {
      if (convert) {
        Dec::template ConvertRows<D>(krow, ksc, n, hd, kconv);
        for (int64_t j = 0; j < n_pad; ++j) {
          crow[j] = reinterpret_cast<const uint8_t*>(kconv + std::min(j, n - 1) * hd);
        }
      }
    }
    ForSlotGroups<Dec::kMaxSlotGroup>(ns, [&](auto h_const, int64_t i) {
      constexpr int H = decltype(h_const)::value;
      if (convert) {
        Dec::template Scores<KvDtype::kF32, H>(q + i, crow, nullptr, n_pad, hd, p.scale, s + i,
                                               i == 0 ? &pf : nullptr);
      } else {
        Dec::template Scores<D, H>(q + i, krow, ksc, n_pad, hd, p.scale, s + i,
                                   i == 0 ? &pf : nullptr);
      }
    });
    // Online softmax per slot over the keys its row sees: [vlo, vhi) of the tile.
    for (int64_t i = 0; i < ns; ++i) {
      const int64_t pos = first + row_of[i];
      const int64_t wlo = window > 0 ? pos + 1 - window : 0;
      const int64_t vlo = std::clamp<int64_t>(wlo - t0, 0, n);
      const int64_t vhi = std::clamp<int64_t>(pos + 1 - t0, 0, n);
      if (vlo >= vhi) {  // nothing visible in this tile (later rows' keys, or out of window)
        alpha[i] = 1.0f;
        std::fill(s[i], s[i] + n, 0.0f);
        continue;
      }
      Dec::Softmax(s[i], n_pad, vlo, vhi, m[i], l[i], alpha[i]);
    }
    if constexpr (kConvertible) {
      if (convert) {  // V after the scores, which prefetched its rows
        Dec::template ConvertRows<D>(vrow, vsc, n, hd, vconv);
        for (int64_t j = 0; j < n; ++j) crow[j] = reinterpret_cast<const uint8_t*>(vconv + j * hd);
      }
    }
    ForSlotGroups<Dec::kMaxSlotGroup>(ns, [&](auto h_const, int64_t i) {
      constexpr int H = decltype(h_const)::value;
      if (convert) {
        Dec::template Accumulate<KvDtype::kF32, H>(s + i, alpha + i, crow, nullptr, n, hd, acc + i);
      } else {
        Dec::template Accumulate<D, H>(s + i, alpha + i, vrow, vsc, n, hd, acc + i);
      }
    });
    cur ^= 1;
  }
  if (part) {
    for (int64_t i = 0; i < nq; ++i) {
      Dec::template Output<D>(part->acc + i * hd, acc[i], 1.0f, hd);
      part->ml[2 * i] = m[i];
      part->ml[2 * i + 1] = l[i];
    }
    return;
  }
  for (int64_t i = 0; i < nq; ++i) {
    Dec::template Output<D>(job.out + row_of[i] * job.row_stride + (i % n_group) * hd, acc[i],
                            1.0f / l[i], hd);
  }
}

}  // namespace tachyon::kernels::internal
