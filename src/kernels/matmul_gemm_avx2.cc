// AVX2 GEMM for the packed layouts (Q4_0, Q4_1, Q5_0; Q4_K, Q6_K) at many activation rows
// (prefill, batched decode; MatMul at the AVX2 level uses it from GemmMinRowsAvx2 rows on). The
// few-row kernels (matmul_packed_avx2.cc) unpack the codes in registers for every 1-4
// activation rows; here, per L2-sized chunk of activation rows against a thread's tiles:
//
//  1. Each tile is taken a slice at a time (16 blocks of 32, or 2 super-blocks of 256), whose
//     codes are unpacked once into u8 steps in L1 (step s: 4 code bytes of each of the 16 rows,
//     rows 0..7 in the first 32 bytes) with the scales converted to floats beside them; every
//     group of up to 4 activation rows then runs over the slice. Q5_0 and Q6_K, whose unpack
//     costs the most, decode their codes in the first group's pass instead (Codes below): with
//     one group (up to 4 rows) the codes never leave the registers, and that pass prefetches
//     every line of the tile stream kStreamAhead bytes ahead (the 0.5B's Q5_0 decode). The next
//     slice's bytes are also prefetched a share per group.
//  2. The micro-kernel keeps 2 x 4 int16 accumulators (16 weight rows x 4 activation rows): per
//     step two code loads and four broadcast activation words feed 8 vpmaddubsw (unsigned codes
//     x signed activation bytes -> int16 pairs) added in int16; a vpmaddwd widens them per block
//     (32-element formats: by ones) or sub-block (K-quants: by (sc, sc) pairs, which applies the
//     sub-block scale). Every int16 lane's final value fits (wrapping adds in between are exact):
//       Q4_0 / Q4_1: 16 codes of at most 15 times |x| <= 127: 30480.
//       Q5_0 (codes up to 31): the lane starts at -16 times its 16 activation bytes' sum, so it
//             ends at sum((u - 16) x), at most 16 * 16 * 127.
//       Q4_K: as Q4_0 per 32-element sub-block.
//       Q6_K (codes up to 63): per 16-element sub-block, started at -32 times the lane's 8
//             activation bytes (the code offset): at most 8 * 32 * 127.
//
// Q4_K up to 24 rows and Q6_K up to 10 (kWideMaxM) run their own passes instead of these
// (GemmWideK below): groups of up to kWideRows rows over each half tile, the codes decoded once
// per group in registers.
//
// Numerics: every output is the few-row kernels' float sequence per block / super-block, with the
// same exact integer sums, so MatMul's results do not depend on which of the two ran (batch
// invariance, kernels/batch_invariance_test.cc):
//   Q4_0  acc = fma(float(isum), dw * dx, acc); acc = fma(-32 dw, s4, acc)
//   Q4_1  acc = fma(float(isum), dw * dx, acc); acc = fma(4 m, s4, acc)
//   Q5_0  acc = fma(float(sum((u - 16) x)), dw * dx, acc)  (the only AVX2 kernel for packed Q5_0:
//         MatMul runs it from one row on)
//   Q4_K  acc = fma(float(isum), d * dx, acc); acc = fnmadd(float(msum), dmin * dx, acc)
//   Q6_K  acc = fma(float(sum_g sc_g (dot_g - 32 bsum_g)), d * dx, acc)
// Each output's sum runs over the blocks in order (a slice resumes from the stored partial sums),
// so results do not depend on how rows or tiles are split over threads or chunks either.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/matmul_internal.h"
#include "kernels/pack.h"
#include "kernels/simd_avx2.h"

namespace tachyon::kernels::internal {
namespace gemm_avx2 {
namespace {

constexpr int kRowsPerPass = 4;  // activation rows per micro-kernel pass
// Activation bytes per chunk of rows, kept in L2 (512 KiB per core on Zen 3) while the thread's
// tiles sweep past them.
constexpr size_t kActChunkBytes = 256 * 1024;

struct GemmAvx2Scratch;  // ThreadScratch tag: code slices, activation folds
// How far ahead a pass that decodes from the tile (Codes::kTile / kTileStore) prefetches every
// cache line of the tile stream (the tiles lie one after another, so the prefetch runs on into
// the scales and the next tile).
constexpr int64_t kStreamAhead = 8192;

inline __m256i Load(const uint8_t* p) {
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
}
inline void Store(uint8_t* p, __m256i v) {
  _mm256_store_si256(reinterpret_cast<__m256i*>(p), v);
}

// Rows per chunk: equal chunks of whole row groups whose activation rows fit kActChunkBytes.
int64_t ChunkRows(int64_t m, size_t stride) {
  const int64_t max_rows =
      std::max<int64_t>(kRowsPerPass, static_cast<int64_t>(kActChunkBytes / stride));
  const int64_t chunks = (m + max_rows - 1) / max_rows;
  const int64_t mc = (m + chunks - 1) / chunks;
  return (mc + kRowsPerPass - 1) / kRowsPerPass * kRowsPerPass;
}

// n rows in ceil(n / kRowsPerPass) groups of equal size (the first n % count one row larger),
// never a latency-bound group of 1 beside full ones.
struct RowGroups {
  int64_t count, base, extra;
  explicit RowGroups(int64_t n, int64_t per = kRowsPerPass)
      : count((n + per - 1) / per), base(n / count), extra(n % count) {}
  int64_t Start(int64_t g) const { return g * base + std::min(g, extra); }
  int64_t Size(int64_t g) const { return base + (g < extra ? 1 : 0); }
};

// Prefetches share `part` of `parts` of the cache lines of [p, p + bytes).
inline void PrefetchShare(const uint8_t* p, size_t bytes, int64_t part, int64_t parts) {
  const auto first = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{63};
  const auto lines = static_cast<int64_t>((reinterpret_cast<uintptr_t>(p) + bytes - first + 63) / 64);
  const int64_t per = (lines + parts - 1) / parts;
  const int64_t l1 = std::min(lines, (part + 1) * per);
  for (int64_t l = part * per; l < l1; ++l) {
    _mm_prefetch(reinterpret_cast<const char*>(first + 64 * l), _MM_HINT_T0);
  }
}

// Pins the int16 accumulators in registers at this point of every step. Without it GCC
// reassociates a block's int16 sums into a tree (integer adds may be reordered), computes all
// products of a block first and spills them: 2.4x the instructions of the chain.
template <int NX>
inline void KeepInRegisters(__m256i (&s)[NX][2]) {
#pragma GCC unroll 4
  for (int i = 0; i < NX; ++i) asm("" : "+x"(s[i][0]), "+x"(s[i][1]));
}

// 16 rows of outputs y[0..nrows) as two halves (nrows < 16: the last tile).
inline void LoadAcc(bool zero, const float* y, int nrows, __m256 (&acc)[2]) {
  if (zero) {
    acc[0] = acc[1] = _mm256_setzero_ps();
  } else if (nrows == kPackRows) {
    acc[0] = _mm256_loadu_ps(y);
    acc[1] = _mm256_loadu_ps(y + 8);
  } else {
    acc[0] = LoadFirst(y, nrows);
    acc[1] = LoadFirst(y + 8, nrows - 8);
  }
}
inline void StoreAcc(const __m256 (&acc)[2], float* y, int nrows) {
  if (nrows == kPackRows) {
    _mm256_storeu_ps(y, acc[0]);
    _mm256_storeu_ps(y + 8, acc[1]);
  } else {
    StoreFirst(y, acc[0], nrows);
    StoreFirst(y + 8, acc[1], nrows - 8);
  }
}

// Where a micro-kernel pass takes the weight codes from: the slice in L1 (unpacked before the
// passes, or by an earlier pass), or (Q5_0, Q6_K) the packed tile, decoded in registers
// (kTileStore: and stored into the slice for the passes after it). Their decode (4-5 vector
// operations per half step) overlaps the multiplies in the first pass instead of running as a
// phase of its own; Q4_0 / Q4_1 / Q4_K's (one or two) did not gain that way (docs/kernels.md,
// AVX2 GEMM).
enum class Codes { kSlice, kTile, kTileStore };

// ---- 32-element block formats (kQ8_32 activations) ----

constexpr int kBlockBytes = 512;         // one block of 16 rows as 8 u8 steps
constexpr int64_t kBlocksPerSlice = 16;  // 8 KiB of codes per slice
constexpr int kMetaFloats = 32;          // per block in the slice: dw[16], c[16]

// kCodeBytes: bytes per block in the packed tile; kFifth: Q5 (bit-plane step after the nibble
// steps); kMin: Q4_1 (fp16 mins after the scales); kFold: Q5_0 (offset folded into the int16
// lanes, kOffset 16); otherwise the code offset 8 goes through c = -32 dw against s4.
template <int kCodeBytesT, bool kFifthT, bool kMinT, bool kFoldT>
struct Block32 {
  static constexpr int kCodeBytes = kCodeBytesT;
  static constexpr bool kFifth = kFifthT;
  static constexpr bool kMin = kMinT;
  static constexpr bool kFold = kFoldT;
};
using Q4_0 = Block32<256, false, false, false>;
using Q4_1 = Block32<256, false, true, false>;
using Q5_0 = Block32<320, true, false, true>;

// Q4_0 / Q4_1 codes of blocks [b0, b1) of a packed tile -> u8 steps (step s < 4: low nibbles,
// elements 4 s..; s >= 4: high nibbles, elements 16 + 4 (s - 4)..).
template <typename F>
void Unpack32Codes(const uint8_t* tile, int64_t b0, int64_t b1, uint8_t* codes) {
  static_assert(!F::kFifth, "Q5_0 decodes its codes in the first pass (DecodeStepQ5)");
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* src = tile + b * F::kCodeBytes;
    uint8_t* dst = codes + (b - b0) * kBlockBytes;
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      const __m256i v = Load(src + 32 * s);  // step s / 2, half s % 2
      Store(dst + 64 * (s / 2) + 32 * (s % 2), _mm256_and_si256(v, m4));
      Store(dst + 64 * (s / 2 + 4) + 32 * (s % 2), _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
    }
  }
}

// Q5_0 codes of step st (0..7, the steps as above) of a packed block (src: its codes in the tile), 16 rows
// as two halves: the fifth bits of step s and s + 4 are bits s and 4 + s of each byte of the
// bit-plane step (16-bit shifts; m10 keeps bit 4 of each byte only).
inline void DecodeStepQ5(const uint8_t* src, int st, __m256i (&w)[2]) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m10 = _mm256_set1_epi8(0x10);
  const int s = st % 4;
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const __m256i v = Load(src + 64 * s + 32 * h), hh = Load(src + 256 + 32 * h);
    if (st < 4) {
      w[h] = _mm256_or_si256(_mm256_and_si256(v, m4),
                             _mm256_and_si256(_mm256_slli_epi16(hh, 4 - s), m10));
    } else {
      w[h] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4),
                             _mm256_and_si256(_mm256_srli_epi16(hh, s), m10));
    }
  }
}

// Meta floats dw[16], c[16] of blocks [b0, b1) (c: -32 dw for Q4_0, 4 m for Q4_1, as the few-row
// kernels compute them; none for Q5_0).
template <typename F>
void Unpack32Meta(const uint8_t* tile, int64_t nb, int64_t b0, int64_t b1, float* meta) {
  const auto* scales = reinterpret_cast<const uint16_t*>(tile + nb * F::kCodeBytes);
  const uint16_t* mins = scales + nb * kPackRows;
  for (int64_t b = b0; b < b1; ++b) {
    float* mt = meta + (b - b0) * kMetaFloats;
    for (int h = 0; h < 2; ++h) {
      const __m256 dw = LoadF16x8(scales + b * kPackRows + 8 * h);
      _mm256_store_ps(mt + 8 * h, dw);
      if constexpr (F::kMin) {
        _mm256_store_ps(mt + 16 + 8 * h, _mm256_mul_ps(LoadF16x8(mins + b * kPackRows + 8 * h),
                                                       _mm256_set1_ps(4.0f)));
      } else if constexpr (!F::kFold) {
        _mm256_store_ps(mt + 16 + 8 * h, _mm256_mul_ps(dw, _mm256_set1_ps(-32.0f)));
      }
    }
  }
}

// Q5_0 lane starts of one activation row: out[b] = two int16, -16 times the sum of the block's
// activation bytes 4 s + 0, 4 s + 1 (low lane) and 4 s + 2, 4 s + 3 (high lane) over its 8 steps.
void BuildFold32(const Q8Row32& x, int64_t nb, int32_t* out) {
  const __m128i ones = _mm_set1_epi8(1), neg = _mm_set1_epi16(-16);
  for (int64_t b = 0; b < nb; ++b) {
    const int8_t* p = x.qs + 128 * (b / 4) + 16 * (b % 4);
    __m128i s = _mm_add_epi16(
        _mm_maddubs_epi16(ones, _mm_load_si128(reinterpret_cast<const __m128i*>(p))),
        _mm_maddubs_epi16(ones, _mm_load_si128(reinterpret_cast<const __m128i*>(p + 64))));
    s = _mm_add_epi16(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi16(s, _mm_shuffle_epi32(s, 0xB1));
    out[b] = _mm_cvtsi128_si32(_mm_mullo_epi16(s, neg));
  }
}

// NX activation rows (act + i * stride; Q5_0 lane starts fold + i * nb) against one tile's
// slice (blocks [b0, b1), unpacked in codes / meta). y[i * ldy + r] for r < nrows; continues
// from y when b0 > 0.
template <typename F, int NX, Codes kFrom>
void Micro32(int64_t k, int64_t b0, int64_t b1, uint8_t* codes, const uint8_t* tile,
             const float* meta, const uint8_t* act, size_t stride, const int32_t* fold, int64_t nb,
             float* y, int64_t ldy, int nrows) {
  Q8Row32 x[NX];
  __m256 acc[NX][2];
#pragma GCC unroll 4
  for (int i = 0; i < NX; ++i) {
    x[i] = ViewQ8Row32(act + i * stride, k);
    LoadAcc(b0 == 0, y + i * ldy, nrows, acc[i]);
  }
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t b = b0; b < b1; ++b) {
    uint8_t* cw = codes + (b - b0) * kBlockBytes;
    const uint8_t* src = tile + b * F::kCodeBytes;
    const float* mt = meta + (b - b0) * kMetaFloats;
    if constexpr (kFrom != Codes::kSlice) {
      // The tile's bytes per block (codes, then scales and Q4_1's mins), one stream.
      constexpr int kStride = F::kCodeBytes + 2 * kPackRows * (F::kMin ? 2 : 1);
      PrefetchLines<(kStride + 63) / 64>(tile + kStreamAhead + b * kStride);
    }
    const int64_t xoff = 128 * (b / 4) + 16 * (b % 4);
    __m256i s[NX][2];
#pragma GCC unroll 4
    for (int i = 0; i < NX; ++i) {
      s[i][0] = s[i][1] = F::kFold ? _mm256_set1_epi32(fold[i * nb + b]) : _mm256_setzero_si256();
    }
#pragma GCC unroll 8
    for (int st = 0; st < 8; ++st) {
      __m256i w[2];
      if constexpr (kFrom == Codes::kSlice) {
        w[0] = Load(cw + 64 * st);
        w[1] = Load(cw + 64 * st + 32);
      } else {
        static_assert(F::kFifth, "only Q5_0 decodes its codes in the pass");
        DecodeStepQ5(src, st, w);
        if constexpr (kFrom == Codes::kTileStore) {
          Store(cw + 64 * st, w[0]);
          Store(cw + 64 * st + 32, w[1]);
        }
      }
      const int xo = st < 4 ? 4 * st : 64 + 4 * (st - 4);
#pragma GCC unroll 4
      for (int i = 0; i < NX; ++i) {
        const __m256i xv = Bcast32(x[i].qs + xoff + xo);
        s[i][0] = _mm256_add_epi16(s[i][0], _mm256_maddubs_epi16(w[0], xv));
        s[i][1] = _mm256_add_epi16(s[i][1], _mm256_maddubs_epi16(w[1], xv));
      }
      KeepInRegisters(s);
    }
#pragma GCC unroll 4
    for (int i = 0; i < NX; ++i) {
      const __m256 dx = _mm256_set1_ps(x[i].d4[4 * b]);
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m256 scale = _mm256_mul_ps(_mm256_load_ps(mt + 8 * h), dx);
        acc[i][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(s[i][h], ones)), scale,
                                    acc[i][h]);
        if constexpr (!F::kFold) {
          acc[i][h] = _mm256_fmadd_ps(_mm256_load_ps(mt + 16 + 8 * h),
                                      _mm256_set1_ps(x[i].s4[4 * b]), acc[i][h]);
        }
      }
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < NX; ++i) StoreAcc(acc[i], y + i * ldy, nrows);
}

// One pass of Micro32 over nx (1..kRowsPerPass) activation rows.
template <typename F, Codes kFrom>
void Micro32Rows(int nx, int64_t k, int64_t b0, int64_t b1, uint8_t* codes, const uint8_t* tile,
                 const float* meta, const uint8_t* act, size_t stride, const int32_t* fold,
                 int64_t nb, float* y, int64_t ldy, int nrows) {
  switch (nx) {
    case 1:
      return Micro32<F, 1, kFrom>(k, b0, b1, codes, tile, meta, act, stride, fold, nb, y, ldy, nrows);
    case 2:
      return Micro32<F, 2, kFrom>(k, b0, b1, codes, tile, meta, act, stride, fold, nb, y, ldy, nrows);
    case 3:
      return Micro32<F, 3, kFrom>(k, b0, b1, codes, tile, meta, act, stride, fold, nb, y, ldy, nrows);
    default:
      return Micro32<F, 4, kFrom>(k, b0, b1, codes, tile, meta, act, stride, fold, nb, y, ldy, nrows);
  }
}

template <typename F>
void Gemm32(int64_t k, const uint8_t* tiles, size_t tile_bytes, int64_t ntiles, int64_t rows,
            const uint8_t* act, size_t stride, int64_t m, float* y, int64_t ldy) {
  const int64_t nb = k / 32;
  const int64_t mc = ChunkRows(m, stride);
  constexpr size_t kCodes = kBlocksPerSlice * kBlockBytes;
  constexpr size_t kMeta = kBlocksPerSlice * kMetaFloats * sizeof(float);
  const size_t fold_bytes = F::kFold ? static_cast<size_t>(std::min(mc, m) * nb) * 4 : 0;
  uint8_t* codes = ThreadScratch<uint8_t, GemmAvx2Scratch>(kCodes + kMeta + fold_bytes);
  auto* meta = reinterpret_cast<float*>(codes + kCodes);
  auto* fold = reinterpret_cast<int32_t*>(codes + kCodes + kMeta);
  for (int64_t i0 = 0; i0 < m; i0 += mc) {
    const int64_t n = std::min(mc, m - i0);
    const uint8_t* a = act + static_cast<size_t>(i0) * stride;
    if constexpr (F::kFold) {
      for (int64_t i = 0; i < n; ++i) {
        BuildFold32(ViewQ8Row32(a + static_cast<size_t>(i) * stride, k), nb, fold + i * nb);
      }
    }
    const RowGroups groups(n);
    for (int64_t t = 0; t < ntiles; ++t) {
      const uint8_t* tile = tiles + static_cast<size_t>(t) * tile_bytes;
      const int nrows = static_cast<int>(std::min<int64_t>(kPackRows, rows - t * kPackRows));
      for (int64_t b0 = 0; b0 < nb; b0 += kBlocksPerSlice) {
        const int64_t b1 = std::min(nb, b0 + kBlocksPerSlice);
        if constexpr (!F::kFifth) Unpack32Codes<F>(tile, b0, b1, codes);
        Unpack32Meta<F>(tile, nb, b0, b1, meta);
        // The next slice's codes (or the next tile's first), prefetched a share per group.
        const bool last = b1 >= nb;
        const uint8_t* next = last ? (t + 1 < ntiles ? tile + tile_bytes : nullptr) : tile;
        const int64_t nb0 = last ? 0 : b1, nb1 = std::min(nb, nb0 + kBlocksPerSlice);
        for (int64_t g = 0; g < groups.count; ++g) {
          if (next != nullptr) {
            PrefetchShare(next + nb0 * F::kCodeBytes, (nb1 - nb0) * F::kCodeBytes, g,
                          groups.count);
          }
          const int64_t i = groups.Start(g);
          const uint8_t* ai = a + static_cast<size_t>(i) * stride;
          const int32_t* fi = fold + i * nb;
          float* yi = y + (i0 + i) * ldy + t * kPackRows;
          const int nx = static_cast<int>(groups.Size(g));
          // Q5_0: the first pass decodes the codes from the tile (storing them for the passes
          // after it), the others read them from the slice.
          Codes from = Codes::kSlice;
          if (F::kFifth && g == 0) from = groups.count > 1 ? Codes::kTileStore : Codes::kTile;
          switch (from) {
            case Codes::kSlice:
              Micro32Rows<F, Codes::kSlice>(nx, k, b0, b1, codes, tile, meta, ai, stride, fi, nb,
                                            yi, ldy, nrows);
              break;
            case Codes::kTileStore:
              if constexpr (F::kFifth) {
                Micro32Rows<F, Codes::kTileStore>(nx, k, b0, b1, codes, tile, meta, ai, stride,
                                                  fi, nb, yi, ldy, nrows);
              }
              break;
            case Codes::kTile:
              if constexpr (F::kFifth) {
                Micro32Rows<F, Codes::kTile>(nx, k, b0, b1, codes, tile, meta, ai, stride, fi,
                                             nb, yi, ldy, nrows);
              }
              break;
          }
        }
      }
    }
  }
}
static_assert(kRowsPerPass == 4, "Micro32Rows() and MicroKRows() dispatch group sizes 1..4");

// ---- K-quants (Q4_K, Q6_K; kQ8_256 activations) ----
//
// A super-block of one tile in the slice: 64 u8 steps in element order (step s: inputs
// 4 s..4 s + 3, so its activation word is bytes 4 s.. of the row), then the meta:
//   int32 scale pairs (sc, sc) [sub-block][16 rows]     at 0     (Q4_K 8 sub-blocks, Q6_K 16)
//   int32 min pairs (min_2p, min_2p+1) [p < 4][16 rows]  at 1024  (Q4_K)
//   float d[16] at 1280, dmin[16] at 1344 (Q4_K)
constexpr int kKCodeBytes = 64 * 64;
constexpr int kKMetaBytes = 1408;
constexpr int64_t kSupersPerSlice = 2;

// A packed K-quant tile per super-block: its code bytes (all super-blocks' codes first), then
// its meta bytes.
template <bool kQ6>
constexpr int kTileCodeBytes = kQ6 ? 3072 : 2048;
template <bool kQ6>
constexpr int kTileMetaBytes = kQ6 ? 288 : 320;

// Q4_K meta m (one super-block), half h: the (min_2p, min_2p+1) int16 pairs, one per 32-bit lane.
inline __m256i MinPairs8(const uint8_t* m, int p, int h) {
  const __m256i lo = _mm256_cvtepu8_epi32(
      _mm_loadl_epi64(reinterpret_cast<const __m128i*>(m + 128 + 16 * (2 * p) + 8 * h)));
  const __m256i hi = _mm256_cvtepu8_epi32(
      _mm_loadl_epi64(reinterpret_cast<const __m128i*>(m + 128 + 16 * (2 * p + 1) + 8 * h)));
  return _mm256_or_si256(lo, _mm256_slli_epi32(hi, 16));
}

// 8 scales -> (sc, sc) int16 pairs, one per 32-bit lane.
inline __m256i ScalePairs8(const uint8_t* p, bool is_signed) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  const __m256i s = is_signed ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
  return _mm256_or_si256(_mm256_and_si256(s, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(s, 16));
}

// Q4_K codes of super-block b of a tile -> u8 steps in element order (layout above).
void UnpackCodesQ4K(const uint8_t* tile, int64_t b, uint8_t* codes) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const uint8_t* src = tile + b * kTileCodeBytes<false>;
  // Packed step 8 c + t: low nibbles are inputs 64 c + 4 t.., high nibbles 64 c + 32 + 4 t..
  for (int c = 0; c < 4; ++c) {
#pragma GCC unroll 8
    for (int t = 0; t < 8; ++t) {
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m256i v = Load(src + 64 * (8 * c + t) + 32 * h);
        Store(codes + 64 * (16 * c + t) + 32 * h, _mm256_and_si256(v, m4));
        Store(codes + 64 * (16 * c + 8 + t) + 32 * h,
              _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
      }
    }
  }
}

// Q6_K codes of step 4 g + q (q < 4) of a packed super-block (src: its codes in the tile), rows
// 8 h..8 h + 7: the 6-bit codes of 16-element sub-block g rebuilt from its two nibble steps and
// its high-bit step (16-bit shifts; the bits carried across bytes are masked off).
inline __m256i DecodeHalfQ6K(const uint8_t* src, int64_t g, int q, int h) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
  const uint8_t* cg = src + 192 * g + 32 * h;
  const __m256i hb = Load(cg + 128);
  switch (q) {
    case 0:
      return _mm256_or_si256(_mm256_and_si256(Load(cg), m4),
                             _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30));
    case 1:
      return _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(Load(cg), 4), m4),
                             _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30));
    case 2:
      return _mm256_or_si256(_mm256_and_si256(Load(cg + 64), m4), _mm256_and_si256(hb, m30));
    default:
      return _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(Load(cg + 64), 4), m4),
                             _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30));
  }
}
// Both halves of step st (0..63), 16 rows.
inline void DecodeStepQ6K(const uint8_t* src, int st, __m256i (&w)[2]) {
  w[0] = DecodeHalfQ6K(src, st / 4, st % 4, 0);
  w[1] = DecodeHalfQ6K(src, st / 4, st % 4, 1);
}

// Unpacks the meta of super-block b of a tile (layout above).
template <bool kQ6>
void UnpackMetaK(const uint8_t* tile, int64_t nb, int64_t b, uint8_t* meta) {
  if constexpr (kQ6) {
    const uint8_t* m = tile + nb * kTileCodeBytes<true> + b * kTileMetaBytes<true>;
    for (int h = 0; h < 2; ++h) {
      for (int g = 0; g < 16; ++g) Store(meta + 64 * g + 32 * h, ScalePairs8(m + 16 * g + 8 * h, true));
      _mm256_store_ps(reinterpret_cast<float*>(meta + 1280 + 32 * h), LoadF16x8(m + 256 + 16 * h));
    }
  } else {
    const uint8_t* m = tile + nb * kTileCodeBytes<false> + b * kTileMetaBytes<false>;
    for (int h = 0; h < 2; ++h) {
      for (int j = 0; j < 8; ++j) Store(meta + 64 * j + 32 * h, ScalePairs8(m + 16 * j + 8 * h, false));
      for (int p = 0; p < 4; ++p) Store(meta + 1024 + 64 * p + 32 * h, MinPairs8(m, p, h));
      _mm256_store_ps(reinterpret_cast<float*>(meta + 1280 + 32 * h), LoadF16x8(m + 256 + 16 * h));
      _mm256_store_ps(reinterpret_cast<float*>(meta + 1344 + 32 * h), LoadF16x8(m + 288 + 16 * h));
    }
  }
}

// Q6_K lane starts of one activation row: out[g] per 16-element sub-block, two int16: -32 times
// the sum of its bytes 4 a + 0, 4 a + 1 (low lane) and 4 a + 2, 4 a + 3 (high lane), a < 4.
void BuildFoldQ6K(const int8_t* qs, int64_t nsub, int32_t* out) {
  const __m256i ones = _mm256_set1_epi8(1), neg = _mm256_set1_epi16(-32);
  for (int64_t g = 0; g < nsub; g += 2) {
    __m256i s = _mm256_maddubs_epi16(ones, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 16 * g)));
    s = _mm256_add_epi16(s, _mm256_shuffle_epi32(s, 0x4E));
    s = _mm256_add_epi16(s, _mm256_shuffle_epi32(s, 0xB1));
    s = _mm256_mullo_epi16(s, neg);
    out[g] = _mm256_extract_epi32(s, 0);
    out[g + 1] = _mm256_extract_epi32(s, 4);
  }
}

// The Q4_K min operand of sub-blocks 2 p and 2 p + 1 of a super-block (bs: its 16 activation
// sums of 16): two int16, the sums of the two sub-blocks (at most 32 * 127 each).
inline int32_t MinPair(const int16_t* bs, int p) {
  const auto lo = static_cast<uint16_t>(bs[4 * p] + bs[4 * p + 1]);
  const auto hi = static_cast<uint16_t>(bs[4 * p + 2] + bs[4 * p + 3]);
  return static_cast<int32_t>(lo | (static_cast<uint32_t>(hi) << 16));
}

// Q4_K min operands of one activation row: out[4 b + p] = MinPair of super-block b.
void BuildMinPairs(const Q8Row256& x, int64_t nb, int32_t* out) {
  for (int64_t b = 0; b < nb; ++b) {
    for (int p = 0; p < 4; ++p) out[4 * b + p] = MinPair(x.bsums + 16 * b, p);
  }
}

// ---- K-quants at few rows (speculative verification, batched decode): one pass per row group ----
//
// Up to kWideRows activation rows run over each half tile (8 weight rows) at once, the codes
// decoded from the packed tile in registers once per group and half step (no code slice, no
// scratch round trip, and the decode shared by every row of the group), the scales and mins
// read from the packed meta in the pass. Per super-block, half and sub-block the rows' int16
// sums (MicroK's: Q4_K from 0, Q6_K from its lane start, with the same bounds) are widened by
// the (sc, sc) pairs; the epilogue is MicroK's, so the bits are the slice passes' and the
// few-row kernels'. The activation rows are first copied super-block-major (WideRow), so that
// a group's operands of a super-block lie at fixed offsets from one base.
constexpr int kWideRows = 10;
// The wide passes run up to this many rows (groups of at most kWideRows), GemmK from there on:
// Q6_K one group (at 16 rows its four slice passes share one decode and come out ahead).
template <bool kQ6>
constexpr int64_t kWideMaxM = kQ6 ? kWideRows : 24;

// One activation row's operands of one super-block in the wide passes' scratch: the 256
// activation bytes, then (kOps) Q4_K's four MinPair operands or Q6_K's 16 lane starts
// (BuildFoldQ6K's), then (kD) the scale d.
template <bool kQ6>
struct WideRow {
  static constexpr int kOps = 256;
  static constexpr int kD = kQ6 ? 320 : 272;
  static constexpr size_t kBytes = kQ6 ? 352 : 288;
};

template <int NX>
inline void KeepInRegisters(__m256i (&s)[NX]) {
#pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) asm("" : "+x"(s[i]));
}

// NX activation rows against one packed tile of nb super-blocks: row i's operands of
// super-block b at xs + b * xs_sb + i * WideRow<kQ6>::kBytes; y[i * ldy + r] for r < nrows.
template <bool kQ6, int NX>
void WideK(int64_t nb, const uint8_t* tile, const uint8_t* xs, size_t xs_sb, float* y,
           int64_t ldy, int nrows) {
  using R = WideRow<kQ6>;
  constexpr int kCodeBytes = kTileCodeBytes<kQ6>, kMetaBytes = kTileMetaBytes<kQ6>;
  __m256 acc[NX][2];
#pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* src = tile + b * kCodeBytes;
    const uint8_t* meta = tile + nb * kCodeBytes + b * kMetaBytes;
    const uint8_t* xb = xs + b * xs_sb;
#pragma GCC unroll 1
    for (int h = 0; h < 2; ++h) {
      __m256i isum[NX];
#pragma GCC unroll 16
      for (int i = 0; i < NX; ++i) isum[i] = _mm256_setzero_si256();
      if constexpr (kQ6) {
#pragma GCC unroll 1
        for (int64_t g = 0; g < 16; ++g) {  // 16-element sub-blocks of 4 steps
          if (h == 0) PrefetchLines<3>(src + kStreamAhead + 192 * g);
          __m256i s[NX];
#pragma GCC unroll 16
          for (int i = 0; i < NX; ++i) s[i] = Bcast32(xb + i * R::kBytes + R::kOps + 4 * g);
#pragma GCC unroll 4
          for (int q = 0; q < 4; ++q) {
            const __m256i w = DecodeHalfQ6K(src, g, q, h);
#pragma GCC unroll 16
            for (int i = 0; i < NX; ++i) {
              const __m256i xv = Bcast32(xb + i * R::kBytes + 16 * g + 4 * q);
              s[i] = _mm256_add_epi16(s[i], _mm256_maddubs_epi16(w, xv));
            }
            KeepInRegisters(s);
          }
          const __m256i sc = ScalePairs8(meta + 16 * g + 8 * h, true);
#pragma GCC unroll 16
          for (int i = 0; i < NX; ++i) isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(s[i], sc));
        }
        const __m256 d = LoadF16x8(meta + 256 + 16 * h);
#pragma GCC unroll 16
        for (int i = 0; i < NX; ++i) {
          const __m256 dx = _mm256_broadcast_ss(reinterpret_cast<const float*>(xb + i * R::kBytes + R::kD));
          acc[i][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[i]), _mm256_mul_ps(d, dx), acc[i][h]);
        }
      } else {
#pragma GCC unroll 1
        for (int c = 0; c < 4; ++c) {  // packed steps 8 c..8 c + 7
          PrefetchLines<4>(src + kStreamAhead + 1024 * h + 256 * c);
#pragma GCC unroll 2
          for (int hi = 0; hi < 2; ++hi) {  // sub-block 2 c + hi: the low / high nibbles
            __m256i s[NX];
#pragma GCC unroll 16
            for (int i = 0; i < NX; ++i) s[i] = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int t = 0; t < 8; ++t) {
              const __m256i v = Load(src + 64 * (8 * c + t) + 32 * h);
              const __m256i w = _mm256_and_si256(hi ? _mm256_srli_epi16(v, 4) : v, m4);
#pragma GCC unroll 16
              for (int i = 0; i < NX; ++i) {
                const __m256i xv = Bcast32(xb + i * R::kBytes + 64 * c + 32 * hi + 4 * t);
                s[i] = _mm256_add_epi16(s[i], _mm256_maddubs_epi16(w, xv));
              }
              KeepInRegisters(s);
            }
            const __m256i sc = ScalePairs8(meta + 16 * (2 * c + hi) + 8 * h, false);
#pragma GCC unroll 16
            for (int i = 0; i < NX; ++i) isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(s[i], sc));
          }
        }
        const __m256 d = LoadF16x8(meta + 256 + 16 * h), dmin = LoadF16x8(meta + 288 + 16 * h);
        __m256i mp[4];  // (min_2p, min_2p+1) pairs
#pragma GCC unroll 4
        for (int p = 0; p < 4; ++p) mp[p] = MinPairs8(meta, p, h);
#pragma GCC unroll 16
        for (int i = 0; i < NX; ++i) {
          const uint8_t* xi = xb + i * R::kBytes;
          __m256i msum = _mm256_setzero_si256();
#pragma GCC unroll 4
          for (int p = 0; p < 4; ++p) {
            msum = _mm256_add_epi32(msum, _mm256_madd_epi16(mp[p], Bcast32(xi + R::kOps + 4 * p)));
          }
          const __m256 dx = _mm256_broadcast_ss(reinterpret_cast<const float*>(xi + R::kD));
          acc[i][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[i]), _mm256_mul_ps(d, dx), acc[i][h]);
          acc[i][h] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(dmin, dx), acc[i][h]);
        }
      }
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) StoreAcc(acc[i], y + i * ldy, nrows);
}

// One WideK pass over nx (1..kWideRows) activation rows.
template <bool kQ6>
void WideKRows(int nx, int64_t nb, const uint8_t* tile, const uint8_t* xs, size_t xs_sb, float* y,
               int64_t ldy, int nrows) {
  switch (nx) {
#define TACHYON_WIDE_CASE(N) \
  case N:                    \
    return WideK<kQ6, N>(nb, tile, xs, xs_sb, y, ldy, nrows);
    TACHYON_WIDE_CASE(1)
    TACHYON_WIDE_CASE(2)
    TACHYON_WIDE_CASE(3)
    TACHYON_WIDE_CASE(4)
    TACHYON_WIDE_CASE(5)
    TACHYON_WIDE_CASE(6)
    TACHYON_WIDE_CASE(7)
    TACHYON_WIDE_CASE(8)
    TACHYON_WIDE_CASE(9)
#undef TACHYON_WIDE_CASE
    default:
      return WideK<kQ6, kWideRows>(nb, tile, xs, xs_sb, y, ldy, nrows);
  }
}
static_assert(kWideRows == 10, "WideKRows() dispatches group sizes 1..10");

// K-quant GEMM for m <= kWideMaxM<kQ6> rows (PackedGemmFn): the rows copied super-block-major, then
// the wide passes, tile by tile.
template <bool kQ6>
void GemmWideK(int64_t k, const uint8_t* tiles, size_t tile_bytes, int64_t ntiles, int64_t rows,
               const uint8_t* act, size_t stride, int64_t m, float* y, int64_t ldy) {
  using R = WideRow<kQ6>;
  const int64_t nb = k / 256;
  const size_t xs_sb = static_cast<size_t>(m) * R::kBytes;
  uint8_t* xs = ThreadScratch<uint8_t, GemmAvx2Scratch>(static_cast<size_t>(nb) * xs_sb);
  for (int64_t i = 0; i < m; ++i) {
    const Q8Row256 x = ViewQ8Row256(act + static_cast<size_t>(i) * stride, k);
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* o = xs + b * xs_sb + i * R::kBytes;
      std::memcpy(o, x.qs + 256 * b, 256);
      auto* ops = reinterpret_cast<int32_t*>(o + R::kOps);
      if constexpr (kQ6) {
        BuildFoldQ6K(x.qs + 256 * b, 16, ops);
      } else {
        for (int p = 0; p < 4; ++p) ops[p] = MinPair(x.bsums + 16 * b, p);
      }
      std::memcpy(o + R::kD, x.d + b, 4);
    }
  }
  const RowGroups groups(m, kWideRows);
  for (int64_t t = 0; t < ntiles; ++t) {
    const uint8_t* tile = tiles + static_cast<size_t>(t) * tile_bytes;
    const int nrows = static_cast<int>(std::min<int64_t>(kPackRows, rows - t * kPackRows));
    for (int64_t g = 0; g < groups.count; ++g) {
      const int64_t i = groups.Start(g);
      WideKRows<kQ6>(static_cast<int>(groups.Size(g)), nb, tile, xs + i * R::kBytes, xs_sb,
                     y + i * ldy + t * kPackRows, ldy, nrows);
    }
  }
}

// NX activation rows (kQ8_256 at act + i * stride; per-row operands ops + i * ops_stride: Q6_K
// lane starts, Q4_K min pairs) against one tile's slice (super-blocks [b0, b1): codes, then
// meta, per super-block; codes from the slice or from the packed tile's codes `tile` as kFrom
// says). y[i * ldy + r] for r < nrows; continues from y when b0 > 0.
template <bool kQ6, int NX, Codes kFrom>
void MicroK(int64_t k, int64_t b0, int64_t b1, uint8_t* codes, const uint8_t* tile,
            const uint8_t* act, size_t stride, const int32_t* ops, int64_t ops_stride, float* y,
            int64_t ldy, int nrows) {
  constexpr int kSubSteps = kQ6 ? 4 : 8;
  constexpr int kSubs = 64 / kSubSteps;
  constexpr int kCodeBytes = kTileCodeBytes<kQ6>;
  const int8_t* xq[NX];
  const float* xd[NX];
  const int32_t* op[NX];
  __m256 acc[NX][2];
#pragma GCC unroll 4
  for (int i = 0; i < NX; ++i) {
    const Q8Row256 x = ViewQ8Row256(act + i * stride, k);
    xq[i] = x.qs;
    xd[i] = x.d;
    op[i] = ops + i * ops_stride;
    LoadAcc(b0 == 0, y + i * ldy, nrows, acc[i]);
  }
  for (int64_t b = b0; b < b1; ++b) {
    uint8_t* cb = codes + (b - b0) * (kKCodeBytes + kKMetaBytes);
    const uint8_t* mb = cb + kKCodeBytes;
    const uint8_t* src = tile + b * kCodeBytes;
    __m256i isum[NX][2];
#pragma GCC unroll 4
    for (int i = 0; i < NX; ++i) isum[i][0] = isum[i][1] = _mm256_setzero_si256();
#pragma GCC unroll 1
    for (int sub = 0; sub < kSubs; ++sub) {
      if constexpr (kFrom != Codes::kSlice) {  // 3 of the super-block's 48 code lines per sub
        PrefetchLines<3>(src + kStreamAhead + 192 * sub);
      }
      __m256i s[NX][2];
#pragma GCC unroll 4
      for (int i = 0; i < NX; ++i) {
        s[i][0] = s[i][1] =
            kQ6 ? _mm256_set1_epi32(op[i][kSubs * b + sub]) : _mm256_setzero_si256();
      }
#pragma GCC unroll 8
      for (int t = 0; t < kSubSteps; ++t) {
        const int st = sub * kSubSteps + t;
        __m256i w[2];
        if constexpr (kFrom == Codes::kSlice) {
          w[0] = Load(cb + 64 * st);
          w[1] = Load(cb + 64 * st + 32);
        } else {
          static_assert(kQ6, "only Q6_K decodes its codes in the pass");
          DecodeStepQ6K(src, st, w);
          if constexpr (kFrom == Codes::kTileStore) {
            Store(cb + 64 * st, w[0]);
            Store(cb + 64 * st + 32, w[1]);
          }
        }
#pragma GCC unroll 4
        for (int i = 0; i < NX; ++i) {
          const __m256i xv = Bcast32(xq[i] + 256 * b + 4 * st);
          s[i][0] = _mm256_add_epi16(s[i][0], _mm256_maddubs_epi16(w[0], xv));
          s[i][1] = _mm256_add_epi16(s[i][1], _mm256_maddubs_epi16(w[1], xv));
        }
        KeepInRegisters(s);
      }
      const __m256i sc0 = Load(mb + 64 * sub), sc1 = Load(mb + 64 * sub + 32);
#pragma GCC unroll 4
      for (int i = 0; i < NX; ++i) {
        isum[i][0] = _mm256_add_epi32(isum[i][0], _mm256_madd_epi16(s[i][0], sc0));
        isum[i][1] = _mm256_add_epi32(isum[i][1], _mm256_madd_epi16(s[i][1], sc1));
      }
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256 d = _mm256_load_ps(reinterpret_cast<const float*>(mb + 1280 + 32 * h));
      if constexpr (kQ6) {
#pragma GCC unroll 4
        for (int i = 0; i < NX; ++i) {
          acc[i][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[i][h]),
                                      _mm256_mul_ps(d, _mm256_set1_ps(xd[i][b])), acc[i][h]);
        }
      } else {
        const __m256 dmin = _mm256_load_ps(reinterpret_cast<const float*>(mb + 1344 + 32 * h));
        __m256i msum[NX];
#pragma GCC unroll 4
        for (int i = 0; i < NX; ++i) msum[i] = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int p = 0; p < 4; ++p) {
          const __m256i mp = Load(mb + 1024 + 64 * p + 32 * h);
#pragma GCC unroll 4
          for (int i = 0; i < NX; ++i) {
            msum[i] = _mm256_add_epi32(
                msum[i], _mm256_madd_epi16(mp, _mm256_set1_epi32(op[i][4 * b + p])));
          }
        }
#pragma GCC unroll 4
        for (int i = 0; i < NX; ++i) {
          const __m256 dx = _mm256_set1_ps(xd[i][b]);
          acc[i][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[i][h]), _mm256_mul_ps(d, dx), acc[i][h]);
          acc[i][h] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum[i]), _mm256_mul_ps(dmin, dx), acc[i][h]);
        }
      }
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < NX; ++i) StoreAcc(acc[i], y + i * ldy, nrows);
}

// One pass of MicroK over nx (1..kRowsPerPass) activation rows.
template <bool kQ6, Codes kFrom>
void MicroKRows(int nx, int64_t k, int64_t b0, int64_t b1, uint8_t* codes, const uint8_t* tile,
                const uint8_t* act, size_t stride, const int32_t* ops, int64_t ops_stride,
                float* y, int64_t ldy, int nrows) {
  switch (nx) {
    case 1:
      return MicroK<kQ6, 1, kFrom>(k, b0, b1, codes, tile, act, stride, ops, ops_stride, y, ldy, nrows);
    case 2:
      return MicroK<kQ6, 2, kFrom>(k, b0, b1, codes, tile, act, stride, ops, ops_stride, y, ldy, nrows);
    case 3:
      return MicroK<kQ6, 3, kFrom>(k, b0, b1, codes, tile, act, stride, ops, ops_stride, y, ldy, nrows);
    default:
      return MicroK<kQ6, 4, kFrom>(k, b0, b1, codes, tile, act, stride, ops, ops_stride, y, ldy, nrows);
  }
}

template <bool kQ6>
void GemmK(int64_t k, const uint8_t* tiles, size_t tile_bytes, int64_t ntiles, int64_t rows,
           const uint8_t* act, size_t stride, int64_t m, float* y, int64_t ldy) {
  constexpr int kCodeBytes = kTileCodeBytes<kQ6>, kMetaBytes = kTileMetaBytes<kQ6>;
  const int64_t nb = k / 256;
  const int64_t mc = ChunkRows(m, stride);
  const int64_t ops_stride = kQ6 ? 16 * nb : 4 * nb;
  constexpr size_t kSlice = kSupersPerSlice * (kKCodeBytes + kKMetaBytes);
  uint8_t* slice = ThreadScratch<uint8_t, GemmAvx2Scratch>(
      kSlice + static_cast<size_t>(std::min(mc, m) * ops_stride) * 4);
  auto* ops = reinterpret_cast<int32_t*>(slice + kSlice);
  for (int64_t i0 = 0; i0 < m; i0 += mc) {
    const int64_t n = std::min(mc, m - i0);
    const uint8_t* a = act + static_cast<size_t>(i0) * stride;
    for (int64_t i = 0; i < n; ++i) {
      const Q8Row256 x = ViewQ8Row256(a + static_cast<size_t>(i) * stride, k);
      if constexpr (kQ6) {
        BuildFoldQ6K(x.qs, 16 * nb, ops + i * ops_stride);
      } else {
        BuildMinPairs(x, nb, ops + i * ops_stride);
      }
    }
    const RowGroups groups(n);
    for (int64_t t = 0; t < ntiles; ++t) {
      const uint8_t* tile = tiles + static_cast<size_t>(t) * tile_bytes;
      const int nrows = static_cast<int>(std::min<int64_t>(kPackRows, rows - t * kPackRows));
      for (int64_t b0 = 0; b0 < nb; b0 += kSupersPerSlice) {
        const int64_t b1 = std::min(nb, b0 + kSupersPerSlice);
        for (int64_t b = b0; b < b1; ++b) {
          uint8_t* c = slice + (b - b0) * (kKCodeBytes + kKMetaBytes);
          if constexpr (!kQ6) UnpackCodesQ4K(tile, b, c);
          UnpackMetaK<kQ6>(tile, nb, b, c + kKCodeBytes);
        }
        // The next slice's codes and scales (or the next tile's first), a share per group.
        const bool last = b1 >= nb;
        const uint8_t* next = last ? (t + 1 < ntiles ? tile + tile_bytes : nullptr) : tile;
        const int64_t nb0 = last ? 0 : b1, nb1 = std::min(nb, nb0 + kSupersPerSlice);
        for (int64_t g = 0; g < groups.count; ++g) {
          if (next != nullptr) {
            PrefetchShare(next + nb0 * kCodeBytes, (nb1 - nb0) * kCodeBytes, g, groups.count);
            PrefetchShare(next + nb * kCodeBytes + nb0 * kMetaBytes, (nb1 - nb0) * kMetaBytes, g,
                          groups.count);
          }
          const int64_t i = groups.Start(g);
          const uint8_t* ai = a + static_cast<size_t>(i) * stride;
          const int32_t* oi = ops + i * ops_stride;
          float* yi = y + (i0 + i) * ldy + t * kPackRows;
          const int nx = static_cast<int>(groups.Size(g));
          // Q6_K: the first pass decodes the codes from the tile (storing them for the passes
          // after it), the others read them from the slice.
          Codes from = Codes::kSlice;
          if (kQ6 && g == 0) from = groups.count > 1 ? Codes::kTileStore : Codes::kTile;
          switch (from) {
            case Codes::kSlice:
              MicroKRows<kQ6, Codes::kSlice>(nx, k, b0, b1, slice, tile, ai, stride, oi,
                                             ops_stride, yi, ldy, nrows);
              break;
            case Codes::kTileStore:
              if constexpr (kQ6) {
                MicroKRows<kQ6, Codes::kTileStore>(nx, k, b0, b1, slice, tile, ai, stride, oi,
                                                   ops_stride, yi, ldy, nrows);
              }
              break;
            case Codes::kTile:
              if constexpr (kQ6) {
                MicroKRows<kQ6, Codes::kTile>(nx, k, b0, b1, slice, tile, ai, stride, oi,
                                              ops_stride, yi, ldy, nrows);
              }
              break;
          }
        }
      }
    }
  }
}

// The K-quant GEMM: the wide passes up to kWideMaxM<kQ6> rows, the slice passes from there on.
template <bool kQ6>
void GemmKQuant(int64_t k, const uint8_t* tiles, size_t tile_bytes, int64_t ntiles, int64_t rows,
                const uint8_t* act, size_t stride, int64_t m, float* y, int64_t ldy) {
  (m <= kWideMaxM<kQ6> ? GemmWideK<kQ6> : GemmK<kQ6>)(k, tiles, tile_bytes, ntiles, rows, act,
                                                       stride, m, y, ldy);
}

}  // namespace
}  // namespace gemm_avx2

PackedGemmFn PackedGemmAvx2(GgmlType type) {
  using namespace gemm_avx2;
  switch (type) {
    case GgmlType::kQ4_0:
      return Gemm32<Q4_0>;
    case GgmlType::kQ4_1:
      return Gemm32<Q4_1>;
    case GgmlType::kQ5_0:
      return Gemm32<Q5_0>;
    case GgmlType::kQ4_K:
      return GemmKQuant<false>;
    case GgmlType::kQ6_K:
      return GemmKQuant<true>;
    default:
      return nullptr;
  }
}

}  // namespace tachyon::kernels::internal
