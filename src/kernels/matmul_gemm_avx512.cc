// AVX-512 VNNI GEMM for the packed layouts (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0; Q4_K, Q6_K below) at
// many activation rows (prefill, batched decode; MatMul uses it from GemmMinRows rows on). The
// few-row kernels
// (matmul_packed_avx512.cc) unpack codes in registers for every group of 4 rows and apply the
// code offset with a float FMA per block and row. Here, per L2-sized chunk of activation rows
// against a thread's tiles:
//
//  1. An activation panel is built once: per group of 6 rows and block, the int32 offset term
//     -kOffset * sum(xq) (the starting value of the block's int32 accumulators, so the offset
//     costs no vector work in the inner loop), the row scales and the activation words in
//     step order, all in one linear stream.
//  2. Weights are taken a pair of tiles (32 rows) and a slice of 16 blocks at a time; Q4 / Q5
//     codes are unpacked once per chunk into a u8 slice (16 KiB, L1), Q8_0's packed codes
//     already are one. Every group of rows runs over the slice; the next slice is prefetched
//     meanwhile.
//  3. The micro-kernel keeps 2 x 6 int32 accumulators (32 weight rows x 6 activation rows):
//     per 4-byte step two code loads feed 12 vpdpbusd that take the activation word as an
//     embedded broadcast; per block and row only cvt, mul (by dx) and fma (by dw) remain
//     (Q4_1 / Q5_1: and the min's fma, the activation panel carrying dx * sum(xq) for it).
//
// Integer sums are exact, so the result equals the scalar kernel up to float summation order
// (and does not depend on how rows or tiles are split over threads).
#include "kernels/simd_avx512.h"  // first: see its note

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/matmul_internal.h"
#include "kernels/pack.h"

namespace tachyon::kernels::internal {
namespace {

constexpr int kBlockBytes = 512;  // one 32-block of 16 rows as 8 steps of u8 codes

struct GemmAvx512Scratch;  // ThreadScratch tag: activation panel, code slices

// Activation panel: the chunk's rows in groups of at most kRowsPerPass (RowGroups), so that
// the micro-kernel reads one linear stream. Per group of n rows and block b, a
// record of 44 n bytes:
//   int32 corr[2][n] = -offset * sum of the block's 32 codes of row j (the int32 start value;
//                     twice, so that each of the two tiles' accumulators loads its own copy
//                     instead of the compiler copying registers)
//   float dx[n]     = the block's activation scale of row j
//   int8  step[8][n][4]: the 4 activation bytes of step s of row j (s < 4: bytes 4 s..4 s+3 of
//                    the block, s >= 4: bytes 16 + 4 (s - 4)..), matching the code steps
constexpr int kRowsPerPass = 6;  // activation rows per micro-kernel pass (2 x 6 accumulators)
constexpr int kRecordBytesPerRow = 44;

// m rows in ceil(m / kRowsPerPass) groups of equal size (the first `extra` one row larger):
// 16 rows run as 6 + 5 + 5, 8 as 4 + 4, never as a latency-bound group of 1 or 2 rows beside
// full ones.
struct RowGroups {
  int64_t count, base, extra;
  explicit RowGroups(int64_t m)
      : count((m + kRowsPerPass - 1) / kRowsPerPass), base(m / count), extra(m % count) {}
  int64_t Start(int64_t g) const { return g * base + std::min(g, extra); }
  int64_t Size(int64_t g) const { return base + (g < extra ? 1 : 0); }
  int64_t Of(int64_t i) const {  // the group of row i
    const int64_t big = extra * (base + 1);
    return i < big ? i / (base + 1) : extra + (i - big) / base;
  }
};
// A group starting at row r begins r * nb * kRecordBytesPerRow bytes into the panel.
inline size_t PanelOffset(int64_t nb, int64_t row) {
  return static_cast<size_t>(row) * static_cast<size_t>(nb) * kRecordBytesPerRow;
}

void BuildActPanel(int64_t k, const uint8_t* act, size_t stride, int64_t m, int offset,
                   uint8_t* panel) {
  // offset 0 (Q4_1 / Q5_1: a per-block min instead of a code offset): corr[0][j] holds the
  // float dx * sum(xq) = 4 * s4 of the block instead (the min's term), corr[1][j] 0.
  const int64_t nb = k / 32, ng = Q8Groups(k);
  const RowGroups groups(m);
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t i = 0; i < m; ++i) {
    const int64_t g = groups.Of(i), j = i - groups.Start(g), n = groups.Size(g);
    uint8_t* grp = panel + PanelOffset(nb, groups.Start(g));
    const Q8Row32 x = ViewQ8Row32(act + static_cast<size_t>(i) * stride, k);
    for (int64_t q = 0; q < ng; ++q) {
      // Bytes + 128 as unsigned; psadbw against zero sums 8 of them per 64-bit lane. Lanes
      // 2 c, 2 c + 1 of each half are block 4 q + c.
      const auto* qs = reinterpret_cast<const uint8_t*>(x.qs) + 128 * q;
      const __m512i lo = _mm512_xor_si512(_mm512_load_si512(qs), flip);
      const __m512i hi = _mm512_xor_si512(_mm512_load_si512(qs + 64), flip);
      const __m512i sums = _mm512_add_epi64(_mm512_sad_epu8(lo, _mm512_setzero_si512()),
                                            _mm512_sad_epu8(hi, _mm512_setzero_si512()));
      alignas(64) int64_t lanes[8];
      _mm512_store_si512(lanes, sums);
      for (int c = 0; c < 4 && 4 * q + c < nb; ++c) {
        const int64_t b = 4 * q + c;
        uint8_t* rec = grp + b * kRecordBytesPerRow * n;
        const auto corr =
            static_cast<int32_t>(-offset * (lanes[2 * c] + lanes[2 * c + 1] - 128 * 32));
        if (offset == 0) {
          const float mterm = 4.0f * x.s4[4 * b];
          std::memcpy(rec + 4 * j, &mterm, 4);
        } else {
          std::memcpy(rec + 4 * j, &corr, 4);
        }
        std::memcpy(rec + 4 * (n + j), &corr, 4);
        std::memcpy(rec + 4 * (2 * n + j), x.d4 + 4 * b, 4);
        for (int st = 0; st < 8; ++st) {
          const int off = st < 4 ? 4 * st : 64 + 4 * (st - 4);
          std::memcpy(rec + 4 * (3 * n + st * n + j), qs + 16 * c + off, 4);
        }
      }
    }
  }
}

// acc + vpdpbusd(w, broadcast of the 4 bytes at p), with the activation word as an embedded
// broadcast memory operand ({1to16}). The intrinsic with _mm512_set1_epi32 makes GCC load one
// vpbroadcastd per word shared by both tiles, and that broadcast costs a vector-port slot
// (measured on the Xeon VM: 12 dpbusd chains with 6 such broadcasts run at ~0.7-0.8 of the
// register-only rate, with 12 embedded broadcasts at ~0.9-1.0).
inline __m512i DpbusdBcast(__m512i acc, __m512i w, const uint8_t* p) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*reinterpret_cast<const int32_t*>(p)));
  return acc;
}

// Q4_0 tile -> u8 panel: block step s (low nibbles) -> step s, high nibbles -> step s + 4.
void UnpackQ4_0(const uint8_t* tile, int64_t nb, uint8_t* panel) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* src = tile + b * 256;
    uint8_t* dst = panel + b * kBlockBytes;
#pragma GCC unroll 4
    for (int s = 0; s < 4; ++s) {
      const __m512i v = _mm512_load_si512(src + 64 * s);
      _mm512_store_si512(dst + 64 * s, _mm512_and_si512(v, m4));
      _mm512_store_si512(dst + 64 * (s + 4), _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
    }
  }
}

// Q5_0 / Q5_1 tile -> u8 panel as UnpackQ4_0, each code's fifth bit from the block's bit-plane
// step (pack.h: step s's low nibbles take bit s of the plane byte at the same position, its
// high nibbles bit 4 + s; 16-bit shifts, whose carried bits are masked off).
void UnpackQ5(const uint8_t* tile, int64_t nb, uint8_t* panel) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m10 = _mm512_set1_epi8(0x10);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* src = tile + b * 320;
    uint8_t* dst = panel + b * kBlockBytes;
    const __m512i plane = _mm512_load_si512(src + 256);
    __m512i hl = _mm512_slli_epi16(plane, 4), hh = plane;
#pragma GCC unroll 4
    for (int s = 0; s < 4; ++s) {
      const __m512i v = _mm512_load_si512(src + 64 * s);
      _mm512_store_si512(dst + 64 * s,
                         _mm512_or_si512(_mm512_and_si512(v, m4), _mm512_and_si512(hl, m10)));
      _mm512_store_si512(dst + 64 * (s + 4),
                         _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4),
                                         _mm512_and_si512(hh, m10)));
      hl = _mm512_srli_epi16(hl, 1);
      hh = _mm512_srli_epi16(hh, 1);
    }
  }
}

// Cache lines to prefetch while a slice is in use: the next slice's packed codes and scales
// (or the next tile pair's first slice), every line (the adjacent-line prefetcher does not
// fill the other half of a 128-byte pair reliably), spread over the slice's row groups.
// Kept as ranges (a list of line addresses cost ~2% of a 16-row step in building it).
struct PrefetchLines {
  // At most 6 ranges: two tiles' codes, scales and (Q4_1 / Q5_1) mins.
  static constexpr int kMaxRanges = 6;
  const uint8_t* base[kMaxRanges];  // first line of each range
  int end[kMaxRanges];              // cumulative line count after each range
  int ranges = 0;
  int count = 0;  // lines in all
  void AddRange(const uint8_t* p, size_t bytes) {
    if (bytes == 0 || ranges == kMaxRanges) return;
    const auto first = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{63};
    const auto last = (reinterpret_cast<uintptr_t>(p) + bytes - 1) & ~uintptr_t{63};
    base[ranges] = reinterpret_cast<const uint8_t*>(first);
    count += static_cast<int>((last - first) / 64 + 1);
    end[ranges++] = count;
  }
  // Issues lines [*pos, min(*pos + n, stop)) and advances *pos.
  void Issue(int* pos, int n, int stop) const {
    const int e = std::min(*pos + n, stop);
    int r = 0;
    for (int l = *pos; l < e; ++l) {
      while (l >= end[r]) ++r;
      const int start = r == 0 ? 0 : end[r - 1];
      _mm_prefetch(reinterpret_cast<const char*>(base[r] + 64 * (l - start)), _MM_HINT_T0);
    }
    *pos = std::max(*pos, e);
  }
};

// NT tiles (code panels p[u], fp16 scales s[u] per block x 16 rows) x NX activation rows
// (one group of the activation panel) over blocks [b0, b1). Writes y[i * ldy + 16 u + r]; the
// last tile stores nrows_last rows. Passes after the first over the same outputs (b0 > 0)
// continue from y, which gives the same float sums as one pass.
//
// Prefetch lines [pf_begin, pf_end) of pf are issued a few per block.
//
// kMin (Q4_1 / Q5_1): no code offset; after each block's term, + mins * (dx * sum(xq)) with the
// 16 rows' fp16 mins mn[u] (the order of the few-row kernels' BlockTerms).
template <int NT, int NX, bool kMin>
void Micro(int64_t b0, int64_t b1, int64_t pb0, const uint8_t* const* p, const uint16_t* const* s,
           const uint16_t* const* mn, const uint8_t* grp, float* y, int64_t ldy, int nrows_last,
           const PrefetchLines& pf, int pf_begin, int pf_end) {
  const __mmask16 mask = Mask16(nrows_last);
  int pf_pos = pf_begin;
  const int pf_per_block = static_cast<int>((pf_end - pf_begin + b1 - b0 - 1) / (b1 - b0));
  __m512 acc[NX][NT];
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i) {
#pragma GCC unroll 2
    for (int u = 0; u < NT; ++u) {
      acc[i][u] = b0 == 0 ? _mm512_setzero_ps()
                          : _mm512_maskz_loadu_ps(u + 1 < NT ? __mmask16{0xFFFF} : mask,
                                                  y + i * ldy + 16 * u);
    }
  }
  const uint8_t* pa = p[0] + (b0 - pb0) * kBlockBytes;
  const uint8_t* pb = p[NT - 1] + (b0 - pb0) * kBlockBytes;
  const uint8_t* rec = grp + b0 * kRecordBytesPerRow * NX;
  for (int64_t b = b0; b < b1; ++b) {
    pf.Issue(&pf_pos, pf_per_block, pf_end);
    const auto* corr = reinterpret_cast<const int32_t*>(rec);
    const auto* dx = reinterpret_cast<const float*>(rec + 8 * NX);
    const uint8_t* words = rec + 12 * NX;
    __m512i is[NX][NT];
#pragma GCC unroll 8
    for (int i = 0; i < NX; ++i) {
#pragma GCC unroll 2
      for (int u = 0; u < NT; ++u) {
        is[i][u] = kMin ? _mm512_setzero_si512() : _mm512_set1_epi32(corr[u * NX + i]);
      }
    }
#pragma GCC unroll 8
    for (int st = 0; st < 8; ++st) {
      const __m512i wa = _mm512_load_si512(pa + 64 * st);
      const __m512i wb = NT == 2 ? _mm512_load_si512(pb + 64 * st) : wa;
#pragma GCC unroll 8
      for (int i = 0; i < NX; ++i) {
        const uint8_t* xw = words + 4 * (st * NX + i);
        is[i][0] = DpbusdBcast(is[i][0], wa, xw);
        if constexpr (NT == 2) is[i][1] = DpbusdBcast(is[i][1], wb, xw);
      }
    }
    __m512 dw[NT];
#pragma GCC unroll 2
    for (int u = 0; u < NT; ++u) {
      dw[u] = _mm512_cvtph_ps(
          _mm256_load_si256(reinterpret_cast<const __m256i*>(s[u] + b * kPackRows)));
    }
    __m512 mw[NT];
    if constexpr (kMin) {
#pragma GCC unroll 2
      for (int u = 0; u < NT; ++u) {
        mw[u] = _mm512_cvtph_ps(
            _mm256_load_si256(reinterpret_cast<const __m256i*>(mn[u] + b * kPackRows)));
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < NX; ++i) {
      const __m512 d = _mm512_set1_ps(dx[i]);
#pragma GCC unroll 2
      for (int u = 0; u < NT; ++u) {
        acc[i][u] =
            _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(is[i][u]), d), dw[u], acc[i][u]);
        if constexpr (kMin) {
          acc[i][u] = _mm512_fmadd_ps(mw[u], _mm512_set1_ps(reinterpret_cast<const float*>(corr)[i]),
                                      acc[i][u]);
        }
      }
    }
    pa += kBlockBytes;
    pb += kBlockBytes;
    rec += kRecordBytesPerRow * NX;
  }
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i) {
#pragma GCC unroll 2
    for (int u = 0; u + 1 < NT; ++u) _mm512_storeu_ps(y + i * ldy + 16 * u, acc[i][u]);
    _mm512_mask_storeu_ps(y + i * ldy + 16 * (NT - 1), mask, acc[i][NT - 1]);
  }
}

// The 32-element block formats: kCodeSteps 64-byte code steps per block in the packed tile (4:
// nibbles, unpacked slice by slice; 8: Q8_0's u8 codes, used as they are), kHigh the Q5
// bit-plane step after them, kOffset the code offset (0: a per-block min instead, Q4_1 / Q5_1,
// whose fp16 mins follow the scales).
template <int kCodeSteps, int kOffset, bool kHigh>
struct Block32 {
  static constexpr int kCodeOffset = kOffset;
  static constexpr int kCodeBytes = (kCodeSteps + (kHigh ? 1 : 0)) * 64;  // per block in a tile
  static constexpr bool kUnpack = kCodeSteps == 4;
  static constexpr bool kMin = kOffset == 0;
  static constexpr bool kFifthBit = kHigh;  // Q5: unpacked with the bit-plane step
};

template <int NT, typename F, int NX>
void MicroRows(int64_t b0, int64_t b1, int64_t pb0, const uint8_t* const* p,
               const uint16_t* const* s, const uint16_t* const* mn, const uint8_t* grp, float* y,
               int64_t ldy, int nrows_last, const PrefetchLines& pf, int pf_begin, int pf_end,
               int64_t n) {
  if constexpr (NX < kRowsPerPass) {
    if (n > NX) {
      MicroRows<NT, F, NX + 1>(b0, b1, pb0, p, s, mn, grp, y, ldy, nrows_last, pf, pf_begin,
                               pf_end, n);
      return;
    }
  }
  Micro<NT, NX, F::kMin>(b0, b1, pb0, p, s, mn, grp, y, ldy, nrows_last, pf, pf_begin, pf_end);
}

// Blocks per pass: a two-tile panel slice of kBlocksPerPass KiB stays in L1 while all the
// chunk's activation rows run over it.
constexpr int64_t kBlocksPerPass = 16;

// All m activation rows (panel groups) against NT tiles (code streams c[u]: packed Q8_0 codes,
// or 4-bit / 5-bit codes unpacked slice by slice into `slice`, which then stays in L1).
template <int NT, typename F>
void Rows(int64_t nb, const uint8_t* const* c, size_t tile_bytes, int64_t ntiles_left,
          const uint16_t* const* s, const uint16_t* const* mn, const uint8_t* apanel, int64_t m,
          float* y, int64_t ldy, int nrows_last, uint8_t* slice) {
  constexpr int kCodeBytes = F::kCodeBytes;
  const RowGroups groups(m);
  const int64_t ngroups = groups.count;
  for (int64_t b0 = 0; b0 < nb; b0 += kBlocksPerPass) {
    const int64_t b1 = std::min(nb, b0 + kBlocksPerPass);
    // The next slice's codes and scales (or the next tile pair's first slice) are prefetched
    // a share per group, so that their memory latency overlaps this slice's multiplies.
    PrefetchLines pf;
    {
      const bool last = b1 >= nb;
      const int nt_next = last ? static_cast<int>(std::min<int64_t>(2, ntiles_left - NT)) : NT;
      const int64_t nb0 = last ? 0 : b1, nb1 = std::min(nb, nb0 + kBlocksPerPass);
      for (int u = 0; u < nt_next; ++u) {
        const uint8_t* tile = last ? c[0] + (NT + u) * tile_bytes : c[u];
        pf.AddRange(tile + nb0 * kCodeBytes, (nb1 - nb0) * kCodeBytes);
        // Scales, then (kMin) the mins right after all the scales.
        pf.AddRange(tile + nb * kCodeBytes + nb0 * 2 * kPackRows, (nb1 - nb0) * 2 * kPackRows);
        if constexpr (F::kMin) {
          pf.AddRange(tile + nb * (kCodeBytes + 2 * kPackRows) + nb0 * 2 * kPackRows,
                      (nb1 - nb0) * 2 * kPackRows);
        }
      }
    }
    const int per_group = static_cast<int>((pf.count + ngroups - 1) / ngroups);
    const uint8_t* p[2];
    int64_t pb0 = 0;
    for (int u = 0; u < NT; ++u) {
      if constexpr (F::kUnpack) {
        uint8_t* dst = slice + u * kBlocksPerPass * kBlockBytes;
        p[u] = dst;
        if constexpr (F::kFifthBit) {
          UnpackQ5(c[u] + b0 * kCodeBytes, b1 - b0, dst);
        } else {
          UnpackQ4_0(c[u] + b0 * kCodeBytes, b1 - b0, dst);
        }
        pb0 = b0;
      } else {
        p[u] = c[u];
      }
    }
    for (int64_t gi = 0; gi < ngroups; ++gi) {
      const int64_t i = groups.Start(gi);
      const int pf_begin = std::min(pf.count, static_cast<int>(gi) * per_group);
      const int pf_end = std::min(pf.count, pf_begin + per_group);
      MicroRows<NT, F, 1>(b0, b1, pb0, p, s, mn, apanel + PanelOffset(nb, i), y + i * ldy, ldy,
                          nrows_last, pf, pf_begin, pf_end, groups.Size(gi));
    }
  }
}

// Activation panel bytes per chunk of rows: the panel stays in L2 while the thread's tiles sweep
// past it, each tile read from memory once per chunk.
constexpr size_t kActPanelBytes = 768 * 1024;

template <typename F>
void Gemm32Chunk(int64_t k, const uint8_t* tiles, size_t tile_bytes, int64_t ntiles,
                 int64_t rows, const uint8_t* act, size_t stride, int64_t m, float* y,
                 int64_t ldy) {
  const int64_t nb = k / 32;
  // Scratch: the activation panel, then (4-bit / 5-bit codes) a two-tile u8 code slice.
  const size_t act_bytes = (PanelOffset(nb, m) + 63) / 64 * 64;
  const size_t code_bytes = F::kUnpack ? 2 * kBlocksPerPass * kBlockBytes : 0;
  uint8_t* scratch = ThreadScratch<uint8_t, GemmAvx512Scratch>(act_bytes + code_bytes);
  BuildActPanel(k, act, stride, m, F::kCodeOffset, scratch);
  uint8_t* code_panel = scratch + act_bytes;
  for (int64_t t = 0; t < ntiles; t += 2) {
    const int nt = ntiles - t >= 2 ? 2 : 1;
    const uint8_t* c[2];
    const uint16_t* s[2];
    const uint16_t* mn[2] = {nullptr, nullptr};
    for (int u = 0; u < nt; ++u) {
      c[u] = tiles + static_cast<size_t>(t + u) * tile_bytes;
      s[u] = reinterpret_cast<const uint16_t*>(c[u] + nb * F::kCodeBytes);
      if constexpr (F::kMin) mn[u] = s[u] + nb * kPackRows;
    }
    const int nrows_last =
        static_cast<int>(std::min<int64_t>(kPackRows, rows - (t + nt - 1) * kPackRows));
    float* yt = y + t * kPackRows;
    if (nt == 2) {
      Rows<2, F>(nb, c, tile_bytes, ntiles - t, s, mn, scratch, m, yt, ldy, nrows_last, code_panel);
    } else {
      Rows<1, F>(nb, c, tile_bytes, ntiles - t, s, mn, scratch, m, yt, ldy, nrows_last, code_panel);
    }
  }
}

// Chunks of rows whose activation panel fits kActPanelBytes, equal sizes in whole groups (so
// that no chunk ends in a small, latency-bound group when that can be avoided).
template <typename F>
void Gemm32(int64_t k, const uint8_t* tiles, size_t tile_bytes, int64_t ntiles, int64_t rows,
            const uint8_t* act, size_t stride, int64_t m, float* y, int64_t ldy) {
  const int64_t row_bytes = k / 32 * kRecordBytesPerRow;
  const int64_t max_rows = std::max<int64_t>(kRowsPerPass, static_cast<int64_t>(kActPanelBytes) / row_bytes);
  const int64_t chunks = (m + max_rows - 1) / max_rows;
  int64_t mc = (m + chunks - 1) / chunks;
  mc = (mc + kRowsPerPass - 1) / kRowsPerPass * kRowsPerPass;
  for (int64_t i0 = 0; i0 < m; i0 += mc) {
    Gemm32Chunk<F>(k, tiles, tile_bytes, ntiles, rows, act + static_cast<size_t>(i0) * stride,
                   stride, std::min(mc, m - i0), y + i0 * ldy, ldy);
  }
}

// ---- K-quants (Q4_K, Q6_K; kQ8_256 activations) ----
//
// Both are brought to one form per super-block of 256 inputs and tile: 64 steps of u8 codes
// (step s holds inputs 4 s .. 4 s + 3 of the 16 rows, so the activation word of step s is
// simply bytes 4 s.. of the row's codes), sub-blocks of kSubSteps steps with a float scale
// vector scd = d * sc per sub-block, and a correction sum over int16 pairs against the
// activation's block sums, scaled by cscale:
//   Q4_K: sub-blocks of 32 (8 steps); 4 correction pairs (min_2p, min_2p+1) x (bsum32_2p,
//         bsum32_2p+1), the activation's 32-element sums (BuildBsum32), cscale = -dmin.
//   Q6_K: sub-blocks of 16 (4 steps); correction pairs (sc_2p, sc_2p+1) x
//         (bsum_2p, bsum_2p+1) (the code offset 32), cscale = -32 d.
// Per sub-block and row the exact int32 dot becomes sb += float(dot) * scd, the correction
// sb += float(csum) * cscale once per super-block, and then y += sb * dx.

constexpr int kKStepBytes = 64 * 64;  // codes of one super-block of one tile in the slice
constexpr int64_t kSupersPerPass = 2;  // super-blocks per slice (2 tiles: 16 KiB of codes)

// Slice meta per tile and super-block: float scd[16][16] (Q4_K uses 8), int32 pairs[8][16]
// (Q4_K uses 4), float cscale[16].
constexpr int kKMetaBytes = 16 * 64 + 8 * 64 + 64;

inline __m512i DpwssdBcast(__m512i acc, __m512i w, const int16_t* p) {
  asm("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*reinterpret_cast<const int32_t*>(p)));
  return acc;
}

// A zeroed register by the vpxord idiom (no execution port). GCC would copy one shared zero
// register per accumulator instead (12 vmovdqa64 per sub-block, on the vector ports).
inline __m512i ZeroReg() {
  __m512i z;
  asm volatile("vpxord %0, %0, %0" : "=v"(z));
  return z;
}

inline __m512 LoadF16x16(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// One tile's super-block b (packed layout, pack.h) -> 64 u8 code steps and the meta above.
void UnpackQ4K(const uint8_t* tile, int64_t nb, int64_t b, uint8_t* codes, uint8_t* meta) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const uint8_t* src = tile + b * 2048;
  for (int c = 0; c < 4; ++c) {
#pragma GCC unroll 8
    for (int t = 0; t < 8; ++t) {
      const __m512i v = _mm512_load_si512(src + 64 * (8 * c + t));
      _mm512_store_si512(codes + 64 * (16 * c + t), _mm512_and_si512(v, m4));
      _mm512_store_si512(codes + 64 * (16 * c + 8 + t),
                         _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
    }
  }
  const uint8_t* m = tile + nb * 2048 + b * 320;
  const __m512 d = LoadF16x16(m + 256), dmin = LoadF16x16(m + 288);
  auto* scd = reinterpret_cast<float*>(meta);
  for (int j = 0; j < 8; ++j) {
    const __m512i sc = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(m + 16 * j)));
    _mm512_store_ps(scd + 16 * j, _mm512_mul_ps(_mm512_cvtepi32_ps(sc), d));
  }
  for (int p = 0; p < 4; ++p) {
    const __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(m + 128 + 32 * p)));
    const __m512i hi = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(m + 144 + 32 * p)));
    _mm512_store_si512(meta + 1024 + 64 * p, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
  }
  _mm512_store_ps(reinterpret_cast<float*>(meta + 1536), _mm512_sub_ps(_mm512_setzero_ps(), dmin));
}

// Q6_K: the 6-bit codes are rebuilt as (low nibble) | (2 high bits << 4), each 64-byte output
// as one vpternlogd (A | (B & 0x30)) on the masked nibble and the shifted high bits: 13 vector
// ops per 256 codes instead of 17. The offset pairs are the int16 scales themselves,
// interleaved (sc_2p, sc_2p+1) per row by one vpermw, and cscale = -32 d carries the offset
// (-32 is a power of two: the same float product as pairs of -32 sc against cscale d).
void UnpackQ6K(const uint8_t* tile, int64_t nb, int64_t b, uint8_t* codes, uint8_t* meta) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  constexpr int kOrAnd = 0xF8;  // vpternlogd: A | (B & C)
  const uint8_t* src = tile + b * 3072;
  for (int g = 0; g < 16; ++g) {
    const __m512i n0 = _mm512_load_si512(src + 192 * g), n1 = _mm512_load_si512(src + 192 * g + 64);
    const __m512i h = _mm512_load_si512(src + 192 * g + 128);
    uint8_t* dst = codes + 256 * g;
    _mm512_store_si512(dst, _mm512_ternarylogic_epi32(_mm512_and_si512(n0, m4),
                                                      _mm512_slli_epi16(h, 4), m30, kOrAnd));
    _mm512_store_si512(dst + 64,
                       _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(n0, 4), m4),
                                                 _mm512_slli_epi16(h, 2), m30, kOrAnd));
    _mm512_store_si512(dst + 128, _mm512_ternarylogic_epi32(_mm512_and_si512(n1, m4), h, m30, kOrAnd));
    _mm512_store_si512(dst + 192,
                       _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(n1, 4), m4),
                                                 _mm512_srli_epi16(h, 2), m30, kOrAnd));
  }
  const uint8_t* m = tile + nb * 3072 + b * 288;
  const __m512 d = LoadF16x16(m + 256);
  auto* scd = reinterpret_cast<float*>(meta);
  for (int g = 0; g < 16; ++g) {
    const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(m + 16 * g)));
    _mm512_store_ps(scd + 16 * g, _mm512_mul_ps(_mm512_cvtepi32_ps(sc), d));
  }
  // int16 lane 2 r <- sc_2p of row r (lane r of the widened 32 bytes), 2 r + 1 <- sc_2p+1 (lane
  // 16 + r).
  alignas(64) static constexpr int16_t kInterleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,
                                                          21, 6, 22, 7, 23, 8,  24, 9,  25, 10, 26,
                                                          11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i idx = _mm512_load_si512(kInterleave);
  for (int p = 0; p < 8; ++p) {
    const __m512i sc2 = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(m + 32 * p)));
    _mm512_store_si512(meta + 1024 + 64 * p, _mm512_permutexvar_epi16(idx, sc2));
  }
  _mm512_store_ps(reinterpret_cast<float*>(meta + 1536), _mm512_mul_ps(d, _mm512_set1_ps(-32.0f)));
}

// NT tiles x NX activation rows (kQ8_256 rows at act + i * stride) over super-blocks [b0, b1);
// codes / meta: the slice (super-block b0 first). As Micro() for the 32-blocks otherwise.
//
// Per super-block the float sums sb = sum_sub float(dot_sub) * scd_sub + float(csum) * cscale
// stay in registers (2 float ops per sub-block and row, a conversion and an FMA by the scale
// vector, loaded once for all rows), and dx is applied once per super-block to the running
// sums, which live in a small L1 buffer (12 more registers would not fit beside the 12 int32
// dot chains and the 12 super-block sums). Prefetch lines [pf_begin, pf_end) of pf are issued
// a few per sub-block, so that they never queue up on the line-fill buffers in one burst.
//
// Correction pairs of row i: pairs + i * pair_stride, kPairs int16 pairs per super-block
// (Q6_K: the activation row's own bsums; Q4_K: BuildBsum32's sums).
template <int kSubSteps, int NT, int NX>
void MicroK(int64_t k, int64_t b0, int64_t b1, const uint8_t* codes, const uint8_t* meta,
            const uint8_t* act, size_t stride, const int16_t* pairs, int64_t pair_stride,
            float* y, int64_t ldy, int nrows_last, const PrefetchLines& pf, int pf_begin,
            int pf_end) {
  constexpr int kSubs = 64 / kSubSteps;
  constexpr int kPairs = kSubSteps == 4 ? 8 : 4;
  int pf_pos = pf_begin;
  const int pf_per_sub =
      static_cast<int>((pf_end - pf_begin + (b1 - b0) * kSubs - 1) / ((b1 - b0) * kSubs));
  const __mmask16 mask = Mask16(nrows_last);
  const int8_t* xq[NX];
  const float* xd[NX];
  const int16_t* xs[NX];
  alignas(64) float run[NX][NT][16];
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i) {
    const Q8Row256 x = ViewQ8Row256(act + i * stride, k);
    xq[i] = x.qs + 256 * b0;
    xd[i] = x.d + b0;
    xs[i] = pairs + i * pair_stride + 2 * kPairs * b0;
#pragma GCC unroll 2
    for (int u = 0; u < NT; ++u) {
      _mm512_store_ps(run[i][u], b0 == 0 ? _mm512_setzero_ps()
                                         : _mm512_maskz_loadu_ps(u + 1 < NT ? __mmask16{0xFFFF} : mask,
                                                                 y + i * ldy + 16 * u));
    }
  }
  for (int64_t b = 0; b < b1 - b0; ++b) {
    const uint8_t* ca = codes + (b * NT) * kKStepBytes;
    const uint8_t* ma = meta + (b * NT) * kKMetaBytes;
    __m512 sb[NX][NT];
#pragma GCC unroll 8
    for (int i = 0; i < NX; ++i) {
#pragma GCC unroll 2
      for (int u = 0; u < NT; ++u) sb[i][u] = _mm512_castsi512_ps(ZeroReg());
    }
#pragma GCC unroll 1
    for (int sub = 0; sub < kSubs; ++sub) {
      pf.Issue(&pf_pos, pf_per_sub, pf_end);
      __m512i dot[NX][NT];
#pragma GCC unroll 8
      for (int i = 0; i < NX; ++i) {
#pragma GCC unroll 2
        for (int u = 0; u < NT; ++u) dot[i][u] = ZeroReg();
      }
#pragma GCC unroll 8
      for (int t = 0; t < kSubSteps; ++t) {
        const int st = sub * kSubSteps + t;
        __m512i w[NT];
#pragma GCC unroll 2
        for (int u = 0; u < NT; ++u) w[u] = _mm512_load_si512(ca + u * kKStepBytes + 64 * st);
#pragma GCC unroll 8
        for (int i = 0; i < NX; ++i) {
          const auto* xw = reinterpret_cast<const uint8_t*>(xq[i] + 256 * b + 4 * st);
#pragma GCC unroll 2
          for (int u = 0; u < NT; ++u) dot[i][u] = DpbusdBcast(dot[i][u], w[u], xw);
        }
      }
#pragma GCC unroll 2
      for (int u = 0; u < NT; ++u) {
        const __m512 scd = _mm512_load_ps(reinterpret_cast<const float*>(ma + u * kKMetaBytes) + 16 * sub);
#pragma GCC unroll 8
        for (int i = 0; i < NX; ++i) sb[i][u] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[i][u]), scd, sb[i][u]);
      }
    }
    // Correction: kPairs int16 pairs per row against the activation's block sums.
    __m512i cs[NX][NT];
#pragma GCC unroll 8
    for (int i = 0; i < NX; ++i) {
#pragma GCC unroll 2
      for (int u = 0; u < NT; ++u) cs[i][u] = ZeroReg();
    }
#pragma GCC unroll 8
    for (int p = 0; p < kPairs; ++p) {
#pragma GCC unroll 2
      for (int u = 0; u < NT; ++u) {
        const __m512i pr = _mm512_load_si512(ma + u * kKMetaBytes + 1024 + 64 * p);
#pragma GCC unroll 8
        for (int i = 0; i < NX; ++i) cs[i][u] = DpwssdBcast(cs[i][u], pr, xs[i] + 2 * kPairs * b + 2 * p);
      }
    }
#pragma GCC unroll 2
    for (int u = 0; u < NT; ++u) {
      const __m512 csc = _mm512_load_ps(reinterpret_cast<const float*>(ma + u * kKMetaBytes + 1536));
#pragma GCC unroll 8
      for (int i = 0; i < NX; ++i) sb[i][u] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(cs[i][u]), csc, sb[i][u]);
    }
#pragma GCC unroll 8
    for (int i = 0; i < NX; ++i) {
      const __m512 dx = _mm512_set1_ps(xd[i][b]);
#pragma GCC unroll 2
      for (int u = 0; u < NT; ++u) {
        _mm512_store_ps(run[i][u], _mm512_fmadd_ps(sb[i][u], dx, _mm512_load_ps(run[i][u])));
      }
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i) {
#pragma GCC unroll 2
    for (int u = 0; u + 1 < NT; ++u) _mm512_storeu_ps(y + i * ldy + 16 * u, _mm512_load_ps(run[i][u]));
    _mm512_mask_storeu_ps(y + i * ldy + 16 * (NT - 1), mask, _mm512_load_ps(run[i][NT - 1]));
  }
}

constexpr int kKRowsPerPass = kRowsPerPass;

template <int kSubSteps, int NT>
void RowsK(int64_t k, int64_t b0, int64_t b1, const uint8_t* codes, const uint8_t* meta,
           const uint8_t* act, size_t stride, const int16_t* pairs, int64_t pair_stride,
           int64_t m, float* y, int64_t ldy, int nrows_last, const PrefetchLines& pf) {
  const RowGroups groups(m);
  const int per_group = static_cast<int>((pf.count + groups.count - 1) / groups.count);
  for (int64_t g = 0; g < groups.count; ++g) {
    const int pf_begin = std::min(pf.count, static_cast<int>(g) * per_group);
    const int pf_end = std::min(pf.count, pf_begin + per_group);
    const int64_t i = groups.Start(g);
    const uint8_t* a = act + static_cast<size_t>(i) * stride;
    const int16_t* pr = pairs + i * pair_stride;
    float* yi = y + i * ldy;
    switch (groups.Size(g)) {
      case 1:
        MicroK<kSubSteps, NT, 1>(k, b0, b1, codes, meta, a, stride, pr, pair_stride, yi, ldy, nrows_last, pf, pf_begin, pf_end);
        break;
      case 2:
        MicroK<kSubSteps, NT, 2>(k, b0, b1, codes, meta, a, stride, pr, pair_stride, yi, ldy, nrows_last, pf, pf_begin, pf_end);
        break;
      case 3:
        MicroK<kSubSteps, NT, 3>(k, b0, b1, codes, meta, a, stride, pr, pair_stride, yi, ldy, nrows_last, pf, pf_begin, pf_end);
        break;
      case 4:
        MicroK<kSubSteps, NT, 4>(k, b0, b1, codes, meta, a, stride, pr, pair_stride, yi, ldy, nrows_last, pf, pf_begin, pf_end);
        break;
      case 5:
        MicroK<kSubSteps, NT, 5>(k, b0, b1, codes, meta, a, stride, pr, pair_stride, yi, ldy, nrows_last, pf, pf_begin, pf_end);
        break;
      default:
        MicroK<kSubSteps, NT, 6>(k, b0, b1, codes, meta, a, stride, pr, pair_stride, yi, ldy, nrows_last, pf, pf_begin, pf_end);
        break;
    }
  }
}
static_assert(kKRowsPerPass == 6, "RowsK() dispatches group sizes 1..6");

// Q4_K correction operands: per row and super-block the 8 sums of 32 activation codes
// (sub-blocks), as int16 (|sum| <= 32 * 128), from the row's 16-element sums.
void BuildBsum32(int64_t k, const uint8_t* act, size_t stride, int64_t m, int16_t* out) {
  const int64_t nb = k / 256;
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < m; ++i) {
    const int16_t* bs = ViewQ8Row256(act + static_cast<size_t>(i) * stride, k).bsums;
    for (int64_t b = 0; b < nb; ++b) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bs + 16 * b));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (i * nb + b) * 8),
                       _mm256_cvtepi32_epi16(_mm256_madd_epi16(v, ones)));
    }
  }
}

// Activation bytes per chunk of rows (L2).
constexpr size_t kActChunkBytesK = 512 * 1024;

template <bool kQ6>
void GemmK(int64_t k, const uint8_t* tiles, size_t tile_bytes, int64_t ntiles, int64_t rows,
           const uint8_t* act, size_t stride, int64_t m, float* y, int64_t ldy) {
  constexpr int kSubSteps = kQ6 ? 4 : 8;
  constexpr int kCodeBytes = kQ6 ? 3072 : 2048;  // per super-block in the packed tile
  constexpr int kMetaBytes = kQ6 ? 288 : 320;     // scales per super-block in the packed tile
  const int64_t nb = k / 256;
  const int64_t max_rows =
      std::max<int64_t>(kKRowsPerPass, static_cast<int64_t>(kActChunkBytesK / stride));
  const int64_t chunks = (m + max_rows - 1) / max_rows;
  int64_t mc = (m + chunks - 1) / chunks;
  mc = (mc + kKRowsPerPass - 1) / kKRowsPerPass * kKRowsPerPass;
  // Scratch: the code / meta slice, then (Q4_K) a chunk's 32-element activation sums.
  const size_t slice_bytes = kSupersPerPass * 2 * (kKStepBytes + kKMetaBytes);
  uint8_t* codes = ThreadScratch<uint8_t, GemmAvx512Scratch>(
      slice_bytes + (kQ6 ? 0 : static_cast<size_t>(std::min(mc, m) * nb) * 16));
  uint8_t* meta = codes + kSupersPerPass * 2 * kKStepBytes;
  auto* bsum32 = reinterpret_cast<int16_t*>(codes + slice_bytes);
  for (int64_t i0 = 0; i0 < m; i0 += mc) {
    const int64_t n = std::min(mc, m - i0);
    const uint8_t* a = act + static_cast<size_t>(i0) * stride;
    const int16_t* pairs;
    int64_t pair_stride;
    if constexpr (kQ6) {
      pairs = ViewQ8Row256(a, k).bsums;
      pair_stride = static_cast<int64_t>(stride / 2);
    } else {
      BuildBsum32(k, a, stride, n, bsum32);
      pairs = bsum32;
      pair_stride = nb * 8;
    }
    float* yc = y + i0 * ldy;
    for (int64_t t = 0; t < ntiles; t += 2) {
      const int nt = ntiles - t >= 2 ? 2 : 1;
      const uint8_t* tile = tiles + static_cast<size_t>(t) * tile_bytes;
      const int nrows_last =
          static_cast<int>(std::min<int64_t>(kPackRows, rows - (t + nt - 1) * kPackRows));
      for (int64_t b0 = 0; b0 < nb; b0 += kSupersPerPass) {
        const int64_t b1 = std::min(nb, b0 + kSupersPerPass);
        for (int64_t b = b0; b < b1; ++b) {
          for (int u = 0; u < nt; ++u) {
            uint8_t* c = codes + ((b - b0) * nt + u) * kKStepBytes;
            uint8_t* mt = meta + ((b - b0) * nt + u) * kKMetaBytes;
            if constexpr (kQ6) {
              UnpackQ6K(tile + u * tile_bytes, nb, b, c, mt);
            } else {
              UnpackQ4K(tile + u * tile_bytes, nb, b, c, mt);
            }
          }
        }
        // The next slice (or the next tile pair's first one) is prefetched meanwhile.
        PrefetchLines pf;
        {
          const bool last = b1 >= nb;
          const int nt_next = last ? static_cast<int>(std::min<int64_t>(2, ntiles - t - nt)) : nt;
          const uint8_t* next = last ? tile + nt * tile_bytes : tile;
          const int64_t nb0 = last ? 0 : b1, nb1 = std::min(nb, nb0 + kSupersPerPass);
          for (int u = 0; u < nt_next; ++u) {
            const uint8_t* nt_tile = next + u * tile_bytes;
            pf.AddRange(nt_tile + nb0 * kCodeBytes, (nb1 - nb0) * kCodeBytes);
            pf.AddRange(nt_tile + nb * kCodeBytes + nb0 * kMetaBytes, (nb1 - nb0) * kMetaBytes);
          }
        }
        if (nt == 2) {
          RowsK<kSubSteps, 2>(k, b0, b1, codes, meta, a, stride, pairs, pair_stride, n, yc + t * kPackRows, ldy, nrows_last, pf);
        } else {
          RowsK<kSubSteps, 1>(k, b0, b1, codes, meta, a, stride, pairs, pair_stride, n, yc + t * kPackRows, ldy, nrows_last, pf);
        }
      }
    }
  }
}

}  // namespace

PackedGemmFn PackedGemmAvx512(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
      return Gemm32<Block32<4, 8, false>>;
    case GgmlType::kQ4_1:
      return Gemm32<Block32<4, 0, false>>;
    case GgmlType::kQ5_0:
      return Gemm32<Block32<4, 16, true>>;
    case GgmlType::kQ5_1:
      return Gemm32<Block32<4, 0, true>>;
    case GgmlType::kQ8_0:
      return Gemm32<Block32<8, 128, false>>;
    case GgmlType::kQ4_K:
      return GemmK<false>;
    case GgmlType::kQ6_K:
      return GemmK<true>;
    default:
      return nullptr;
  }
}

}  // namespace tachyon::kernels::internal
