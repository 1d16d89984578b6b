// Internal to kernels/: the flash-style tile kernel, written once over an "Isa" policy and
// instantiated by attention.cc (scalar), attention_avx2.cc and attention_avx512.cc. Include
// only from those files, after the intrinsics the policy uses.
//
// Isa provides (all on float32):
//   const float* LoadRow(KvDtype, const uint8_t* src, float* buf, int64_t n)
//       a pointer to the n elements at `src` as floats: src itself for f32, else buf after
//       converting (n may span several contiguous rows: a multiple of head_dim).
//   void Scores(const float* q, const float* const* rows, int64_t n_rows, int64_t hd,
//               float scale, float* s)        s[j] = scale * q · rows[j]
//   void Scores2(const float* q0, const float* q1, const float* const* rows, int64_t n_rows,
//                int64_t hd, float scale, float* s0, float* s1)   Scores of two query heads
//   float Max(const float* s, int64_t n)        the largest s[j], n >= 1 (a scalar loop is one
//                                               long dependency chain of max latencies)
//   float ExpSub(float* s, int64_t n, float m)  s[j] = exp(s[j] - m); returns the sum
//   void Scale(float* y, float a, int64_t n)    y *= a
//   void Accumulate(const float* p, const float* const* rows, int64_t n_rows, float* acc,
//                   int64_t hd)                acc += sum_j p[j] * rows[j] (acc in registers)
// and optionally (used for groups of four heads when head_dim % 64 == 0):
//   void Scores4(const float* q, int64_t hd, const float* const* rows, int64_t n_rows,
//                float scale, float* s0, float* s1, float* s2, float* s3)
//       Scores of the four consecutive query heads at q (head h at q + h * hd)
//   void Accumulate4(const float* const p[4], const float* const* rows, int64_t n_rows,
//                    float* const acc[4], int64_t hd)   Accumulate of four heads
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/attention.h"

namespace tachyon::kernels::internal {

// KV positions per tile: K and V of one tile are converted to f32 once (kKvTile * head_dim
// floats each) and reused by every query row and head of the tile job.
inline constexpr int64_t kKvTile = 32;

// The decode kernels (AttendDecode*: jobs of at most kDecodeMaxQueries query vectors) convert
// K/V rows in registers where they are used and walk the context in tiles of kDecodeKvTile
// keys; query vectors are processed in groups of slots (a group of 3 gets a 4th dummy slot).
// PagedAttention's jobs (64 query vectors, attention.cc) all fit, so on the AVX2 / AVX-512
// levels decode, speculative verify and prefill rows all run this one kernel, whose per-query
// arithmetic does not depend on the job: a row's output is the same in a step of any size.
inline constexpr int64_t kDecodeKvTile = 128;
inline constexpr int64_t kDecodeMaxQueries = 64;
inline int64_t DecodeSlots(int64_t n_queries) { return n_queries + (n_queries % 4 == 3 ? 1 : 0); }
// Whether AttendTileAvx512 / AttendTileAvx2 run a job of n_queries query vectors on their decode
// kernel (else on the tile kernel).
inline bool Avx512DecodeTakes(int64_t n_queries) {
  return n_queries <= kDecodeMaxQueries;
}
inline bool Avx2DecodeTakes(int64_t head_dim, int64_t n_queries) {
  return n_queries <= kDecodeMaxQueries && head_dim % 8 == 0;
}
// Scratch of a decode job: per slot kDecodeKvTile scores, head_dim accumulators, m, l, alpha;
// then a tile's block parameters of K and V as floats (up to two per 32-element block: q8_0
// d, q4_0 / q4_1 d and m), per slot a permuted query (bf16), and a tile's K and V rows as f32
// (jobs that convert them once, Dec::kConvertMinSlots).
inline size_t DecodeScratchFloats(int64_t head_dim, int64_t n_queries) {
  return static_cast<size_t>(DecodeSlots(n_queries) * (kDecodeKvTile + 2 * head_dim + 3) +
                             4 * kDecodeKvTile * (head_dim / 32) + 2 * kDecodeKvTile * head_dim);
}

// Key parts: a decode job whose keys cross a multiple of DecodeKeySplit() is run as one part
// per DecodeKeySplit() keys (parts start at multiples of it, so a query's parts, like its
// tiles, do not depend on the job), each writing its unnormalised state, and the parts are
// merged in order (PagedAttention). Spreads a long context over threads when a step has fewer
// (sequence, KV head) jobs than threads. A multiple of kDecodeKvTile.
inline constexpr int64_t kDecodeKeySplit = 512;
int64_t DecodeKeySplit();  // kDecodeKeySplit unless SetAttentionKeySplit changed it
// One part of a decode job: keys [key_lo, key_hi) (key_lo a multiple of kDecodeKvTile). Query
// vector i = row * n_group + head of the job gets acc[i * hd, (i + 1) * hd) = sum over the
// part's visible keys of exp(s - m) V (the caller's element order) and ml[2 i] = m (its
// running max, -inf when no key is visible), ml[2 i + 1] = the sum of exp(s - m).
struct DecodePart {
  int64_t key_lo = 0, key_hi = 0;
  float* acc = nullptr;
  float* ml = nullptr;
};

inline size_t TileScratchFloatsFor(int64_t head_dim, int64_t n_rows, int64_t n_group) {
  const int64_t nq = n_rows * n_group;
  const size_t tile =
      static_cast<size_t>(2 * kKvTile * head_dim + 4 * kKvTile + nq * (head_dim + 2));
  return nq <= kDecodeMaxQueries ? std::max(tile, DecodeScratchFloats(head_dim, nq)) : tile;
}

// The AMX kernel (attention_amx.cc): keys per KV tile, query vectors per tile pass, the padded
// head_dim and the scratch layout (offsets in floats from a 64-byte aligned base; see the
// layout comment in attention_amx.cc).
inline constexpr int64_t kAmxKvTile = 64;
inline constexpr int64_t kAmxPassRows = 32;
// AttendTileAmxOrAvx512 takes AMX for jobs of at least kAmxMinQueries query vectors and
// head_dim >= kAmxMinHeadDim (measured: bench/attention_bench.cc, docs/attention.md).
inline constexpr int64_t kAmxMinQueries = 16;
// Query vectors per tile job at the kAmx level (PagedAttention).
inline constexpr int64_t kAmxQueryTile = 512;
inline constexpr int64_t kAmxMinHeadDim = 32;
inline int64_t AmxHeadDim(int64_t head_dim) { return (head_dim + 31) / 32 * 32; }

// Scores are kept in log2 units: Q is multiplied by AmxQueryScale(scale) = scale * log2(e)
// (one f32 multiply) before rounding, and the softmax uses 2^x.
inline float AmxQueryScale(float scale) { return scale * 1.44269504088896341f; }

// Each operand is a sum of two bf16 parts, x = x_hi + x_lo with x_hi = bf16(x) and x_lo =
// bf16(x - x_hi) (good to ~2^-16 relative), and each product takes the three partial products
// hi·hi + lo·hi + hi·lo. Q and P always have low parts; K and V have them unless the KV dtype
// is bf16 (exact in one part).
constexpr bool AmxKvHasLowPart(KvDtype dtype) { return dtype != KvDtype::kBf16; }

struct AmxScratchLayout {
  size_t qb = 0, ql = 0, kb = 0, kl = 0, vb = 0, vl = 0, rows = 0, rows_lo = 0, s = 0, pb = 0,
         pl = 0, acc = 0, m = 0, l = 0;
  size_t total = 0;  // floats, including 16 for aligning the base
  AmxScratchLayout(int64_t head_dim, int64_t n_rows, int64_t n_group) {
    const size_t hdp = static_cast<size_t>(AmxHeadDim(head_dim));
    const size_t nqp = static_cast<size_t>((n_rows * n_group + kAmxPassRows - 1) / kAmxPassRows *
                                           kAmxPassRows);
    size_t at = 0;
    auto take = [&at](size_t floats) {
      const size_t off = at;
      at += (floats + 15) / 16 * 16;
      return off;
    };
    qb = take(nqp * hdp / 2);            // bf16 [nqp][hdp]
    ql = take(nqp * hdp / 2);            // bf16 [nqp][hdp] low parts
    kb = take(kAmxKvTile * hdp / 2);     // bf16 B tiles of K
    kl = take(kAmxKvTile * hdp / 2);     // bf16 B tiles of K's low parts
    vb = take(kAmxKvTile * hdp / 2);     // bf16 B tiles of V
    vl = take(kAmxKvTile * hdp / 2);     // bf16 B tiles of V's low parts
    rows = take(16 * hdp / 2);           // bf16 [16][hdp] converted rows
    rows_lo = take(16 * hdp / 2);        // bf16 [16][hdp] their low parts
    s = take(nqp * kAmxKvTile);          // f32 [nqp][64]
    pb = take(nqp * kAmxKvTile / 2);     // bf16 [nqp][64]
    pl = take(nqp * kAmxKvTile / 2);     // bf16 [nqp][64] low parts
    acc = take(nqp * hdp);               // f32 [nqp][hdp]
    m = take(nqp);
    l = take(nqp * 16);                  // f32 [nqp][16] partial sums
    total = at + 16;
  }
};

template <class Isa>
void AttendTileImpl(const PagedKv& kv, const TileJob& job, const TileParams& p, float* scratch) {
  const int64_t hd = kv.head_dim, n_group = p.n_group, n_rows = job.n_rows;
  const int64_t nq = n_rows * n_group;
  float* kf = scratch;            // [kKvTile, hd] converted K rows
  float* vf = kf + kKvTile * hd;  // [kKvTile, hd] converted V rows
  float* s2 = vf + kKvTile * hd;  // [4, kKvTile] scores of up to four query heads
  float* acc = s2 + 4 * kKvTile;  // [nq, hd] unnormalised outputs
  float* m = acc + nq * hd;       // [nq] running max
  float* l = m + nq;              // [nq] running sum of exp
  std::fill(acc, acc + nq * hd, 0.0f);
  std::fill(m, m + nq, -std::numeric_limits<float>::infinity());
  std::fill(l, l + nq, 0.0f);

  const int64_t window = p.sliding_window;
  const int64_t first = job.pos_start, end = job.pos_start + n_rows;  // query positions
  // Tiles start at multiples of kKvTile, so a row's tiles (and its rounding) do not depend on
  // the job's first row; keys before a row's window are skipped per row (jlo), and those
  // before the first row's window (`seen`: their blocks may be released) are never read.
  const int64_t seen = window > 0 ? std::max<int64_t>(0, first + 1 - window) : 0;
  const int64_t lo = seen / kKvTile * kKvTile;
  const float* krow[kKvTile];
  const float* vrow[kKvTile];
  const size_t row_bytes = kv.row_bytes();
  // A KV head's rows of one block are contiguous (head-major blocks): fn(j, n, k, v) for each
  // run of positions [t, t + n) of [t0, t1) inside one block, j = t - t0, k / v its first rows.
  auto for_block_runs = [&](int64_t t0, int64_t t1, auto&& fn) {
    for (int64_t t = std::max(t0, seen); t < t1;) {
      const int64_t n = std::min(t1 - t, kv.block_size - t % kv.block_size);
      fn(t - t0, n, kv.Row(kv.k, job.block_table, t, job.kv_head),
         kv.Row(kv.v, job.block_table, t, job.kv_head));
      t += n;
    }
  };
  // Software prefetch of the KV rows of positions [t0, t1): in a batched step the cache sees
  // each sequence's blocks once, after the weights have streamed through it, and the scattered
  // 16-position runs are too short for the hardware prefetcher.
  auto prefetch_rows = [&](int64_t t0, int64_t t1) {
    for_block_runs(t0, t1, [&](int64_t, int64_t n, const uint8_t* kp, const uint8_t* vp) {
      for (size_t off = 0; off < static_cast<size_t>(n) * row_bytes; off += 64) {
        __builtin_prefetch(kp + off);
        __builtin_prefetch(vp + off);
      }
    });
  };
  // One online-softmax step of query vector qi over the scores s[jlo, jhi): they become
  // exp(s - m_new), and the accumulator and l are rescaled when the running max grows.
  // Returns the accumulator.
  auto softmax_step = [&](int64_t qi, float* s, int64_t jlo, int64_t jhi) {
    const float m_new = std::max(m[qi], Isa::Max(s + jlo, jhi - jlo));
    const float sum = Isa::ExpSub(s + jlo, jhi - jlo, m_new);
    float* a = acc + qi * hd;
    if (m[qi] != m_new) {
      if (m[qi] != -std::numeric_limits<float>::infinity()) {  // rescale what we have
        const float alpha = std::exp(m[qi] - m_new);
        l[qi] *= alpha;
        Isa::Scale(a, alpha, hd);
      }
      m[qi] = m_new;
    }
    l[qi] += sum;
    return a;
  };
  // Keep kPrefetchTiles tiles in flight: the misses overlap each other and the compute.
  constexpr int64_t kPrefetchTiles = 4;
  prefetch_rows(lo, std::min(lo + kPrefetchTiles * kKvTile, end));
  for (int64_t t0 = lo; t0 < end; t0 += kKvTile) {
    const int64_t t1 = std::min(t0 + kKvTile, end);
    const int64_t ahead = t0 + kPrefetchTiles * kKvTile;
    prefetch_rows(std::min(ahead, end), std::min(ahead + kKvTile, end));
    // Each block's run of positions is converted in one call (one block-table lookup per
    // block, not per row).
    for_block_runs(t0, t1, [&](int64_t j, int64_t n, const uint8_t* kp, const uint8_t* vp) {
      const float* kr = Isa::LoadRow(kv.dtype, kp, kf + j * hd, n * hd);
      const float* vr = Isa::LoadRow(kv.dtype, vp, vf + j * hd, n * hd);
      for (int64_t i = 0; i < n; ++i) {
        krow[j + i] = kr + i * hd;
        vrow[j + i] = vr + i * hd;
      }
    });
    // Rows whose position precedes the tile see none of it (causal).
    for (int64_t r = std::max<int64_t>(0, t0 - first); r < n_rows; ++r) {
      const int64_t pos = first + r;
      const int64_t jlo = (window > 0 ? std::max(t0, pos + 1 - window) : t0) - t0;
      const int64_t jhi = std::min(t1, pos + 1) - t0;
      if (jlo >= jhi) continue;
      int64_t g = 0;
      if constexpr (requires { &Isa::Scores4; &Isa::Accumulate4; }) {
        // Four heads at a time: each K and V row is loaded once for all four (GQA groups of
        // 4, 8, ...), with the heads' P·V accumulators side by side in registers.
        for (; g + 4 <= n_group && hd % 64 == 0; g += 4) {
          const float* q = job.q + r * job.row_stride + g * hd;
          float* s4[4] = {s2, s2 + kKvTile, s2 + 2 * kKvTile, s2 + 3 * kKvTile};
          Isa::Scores4(q, hd, krow + jlo, jhi - jlo, p.scale, s4[0] + jlo, s4[1] + jlo,
                       s4[2] + jlo, s4[3] + jlo);
          float* a4[4];
          const float* p4[4];
          for (int h = 0; h < 4; ++h) {
            a4[h] = softmax_step(r * n_group + g + h, s4[h], jlo, jhi);
            p4[h] = s4[h] + jlo;
          }
          Isa::Accumulate4(p4, vrow + jlo, jhi - jlo, a4, hd);
        }
      }
      for (; g < n_group; ++g) {
        const int64_t qi = r * n_group + g;
        const float* q = job.q + r * job.row_stride + g * hd;
        // Heads of one row see the same keys: score them two at a time (shared K loads).
        float* s = s2 + (g % 2) * kKvTile;
        if (g % 2 == 0) {
          if (g + 1 < n_group) {
            Isa::Scores2(q, q + hd, krow + jlo, jhi - jlo, hd, p.scale, s2 + jlo,
                         s2 + kKvTile + jlo);
          } else {
            Isa::Scores(q, krow + jlo, jhi - jlo, hd, p.scale, s + jlo);
          }
        }
        float* a = softmax_step(qi, s, jlo, jhi);
        Isa::Accumulate(s + jlo, vrow + jlo, jhi - jlo, a, hd);
      }
    }
  }
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t g = 0; g < n_group; ++g) {
      const int64_t qi = r * n_group + g;
      float* out = job.out + r * job.row_stride + g * hd;
      const float inv = 1.0f / l[qi];
      std::copy(acc + qi * hd, acc + (qi + 1) * hd, out);
      Isa::Scale(out, inv, hd);
    }
  }
}

// SIMD conversions of StoreKvRow (attention_avx2.cc / attention_avx512.cc).
void StoreKvRowAvx2(KvDtype dtype, const float* x, void* dst, int64_t n);
// The decode kernel over one key part (REQUIRES: the job is one the level's AttendTile* sends
// to its decode kernel: n_rows * n_group <= kDecodeMaxQueries, AVX2: head_dim % 8 == 0).
void AttendDecodePartAvx2(const PagedKv& kv, const TileJob& job, const TileParams& p,
                          const DecodePart& part, float* scratch);
void AttendDecodePartAvx512(const PagedKv& kv, const TileJob& job, const TileParams& p,
                            const DecodePart& part, float* scratch);
void StoreKvRowAvx512(KvDtype dtype, const float* x, void* dst, int64_t n);

}  // namespace tachyon::kernels::internal
