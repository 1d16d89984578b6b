// Internal to kernels/: the per-type, per-SIMD-level pieces MatMul is built from.
//
// MatMul first converts the activation rows x once per call into the "activation format"
// of the weight type (ActFormat), then each thread runs a dot kernel over its contiguous
// range of weight rows, up to kMaxRows activation rows per weight-row pass (so a weight
// block loaded into registers is used for several activation rows).
#pragma once

#include <cstddef>
#include <cstdint>

#include <span>
#include <vector>

#include "kernels/matmul.h"
#include "tensor/dtype.h"
#include "util/cpu_features.h"
#include "util/thread_pool.h"

namespace tachyon::kernels::internal {

inline constexpr int kMaxRows = 4;

// A per-thread buffer of at least `elems` T, 64-byte aligned, grow-only (the pointer is valid
// until this thread's next call with the same T and Tag). Each caller names its own Tag so
// that buffers in use at once never alias.
template <typename T, typename Tag>
T* ThreadScratch(size_t elems) {
  thread_local std::vector<T> buf;
  const size_t pad = 64 / sizeof(T) + 1;
  if (buf.size() < elems + pad) buf.resize(elems + pad);
  auto p = reinterpret_cast<uintptr_t>(buf.data());
  return reinterpret_cast<T*>((p + 63) & ~uintptr_t{63});
}

enum class ActFormat {
  kF32,     // float[k]: x itself
  kBF16,    // uint16[k] (round to nearest even)
  kQ8_32,   // 32-element blocks in groups of 4 (see Q8Row32); padded to whole groups
  kQ8_256,  // int8 qs[k] | float d[k/256] | int16 bsums[k/16] (sums of 16 qs)
};

ActFormat ActFormatFor(GgmlType type);

// Bytes of one activation row (multiple of 64).
size_t ActRowBytes(ActFormat f, int64_t k);

// kQ8_32 row: blocks b = 4 g + i (i < 4) of 32 int8 codes q with scale d (= amax / 127):
//   qs[128 g + 16 i + j]      = q[j]       (j < 16)  — first halves of the 4 blocks, then
//   qs[128 g + 64 + 16 i + j] = q[16 + j]             second halves
//   d4[16 g + 4 i + 0..3] = d;   s4[16 g + 4 i + 0..3] = d * sum(q) / 4
//   sum[b] = sum(q) (int32, after s4: the exact code sum, which the AVX-512 packed kernels
//            start their integer dot products from, times -offset)
// so one 128-bit lane holds one block's half and one int32 lane group of a SIMD dot product
// maps onto one block. Blocks past the end of the row (last group) are all zero.
struct Q8Row32 {
  const int8_t* qs;
  const float* d4;
  const float* s4;
  const int32_t* sum;  // [4 * Q8Groups(k)]
};
inline int64_t Q8Groups(int64_t k) {
  return (k / 32 + 3) / 4;
}
struct Q8Row256 {
  const int8_t* qs;
  const float* d;
  const int16_t* bsums;
};
inline Q8Row32 ViewQ8Row32(const uint8_t* p, int64_t k) {
  const int64_t ng = Q8Groups(k);
  const auto* d = reinterpret_cast<const float*>(p + 128 * ng);
  return {reinterpret_cast<const int8_t*>(p), d, d + 16 * ng,
          reinterpret_cast<const int32_t*>(p + 256 * ng)};
}
inline Q8Row256 ViewQ8Row256(const uint8_t* p, int64_t k) {
  const auto* d = reinterpret_cast<const float*>(p + k);
  return {reinterpret_cast<const int8_t*>(p), d, reinterpret_cast<const int16_t*>(d + k / 256)};
}

// Converts one row of k floats to format f (k a multiple of the format's block).
// Every level produces identical bytes (round to nearest even everywhere).
using QuantizeActFn = void (*)(const float* x, int64_t k, uint8_t* out);

// For i in [0, nx) (1 <= nx <= kMaxRows): y[i * ldy] = dot(w_row, activation row i), where
// activation row i starts at act + i * act_stride. w_row: RowBytes(type, k) bytes.
using DotFn = void (*)(int64_t k, const void* w_row, const uint8_t* act, size_t act_stride, int nx,
                       float* y, int64_t ldy);

// Kernels of one level; null where the level has no kernel for that type / format.
DotFn DotScalar(GgmlType type);
DotFn DotAvx2Float(GgmlType type);      // F32, F16, BF16
DotFn DotAvx2Quant(GgmlType type);      // Q4_0 .. Q8_0, Q2_K .. Q6_K
DotFn DotAvx512Float(GgmlType type);    // F32, F16, BF16
DotFn DotAvx512Block32(GgmlType type);  // Q4_0, Q4_1, Q5_0, Q5_1, Q8_0
DotFn DotAvx512K(GgmlType type);        // Q2_K .. Q6_K
// Packed kernels (layouts in kernels/pack.h; the type's activation format): one tile of
// kPackRows weight rows against nx <= kPackedMaxRows activation rows:
//   y[i * ldy + r] = dot(tile row r, activation row i)   for i < nx, r < nrows.
inline constexpr int kPackedMaxRows = 4;
using PackedFn = void (*)(int64_t k, const uint8_t* tile, const uint8_t* act, size_t act_stride,
                          int nx, float* y, int64_t ldy, int nrows);
// Two consecutive tiles at once (tile B = tile A + tile_bytes; B has nrows_b rows, A all
// 16): y[i * ldy + r] for r < 16 + nrows_b. Used when there are several activation rows.
using Packed2Fn = void (*)(int64_t k, const uint8_t* tile_a, size_t tile_bytes,
                           const uint8_t* act, size_t act_stride, int nx, float* y, int64_t ldy,
                           int nrows_b);
// A PackedFn from a kernel template K<NX>::Run(k, tile, act, stride, y, ldy, nrows) with the
// activation row count NX (1..kPackedMaxRows) fixed at compile time.
template <template <int> class K>
void PackedByNx(int64_t k, const uint8_t* tile, const uint8_t* act, size_t stride, int nx,
                float* y, int64_t ldy, int nrows) {
  static_assert(kPackedMaxRows == 4);
  switch (nx) {
    case 1:
      return K<1>::Run(k, tile, act, stride, y, ldy, nrows);
    case 2:
      return K<2>::Run(k, tile, act, stride, y, ldy, nrows);
    case 3:
      return K<3>::Run(k, tile, act, stride, y, ldy, nrows);
    default:
      return K<4>::Run(k, tile, act, stride, y, ldy, nrows);
  }
}
Packed2Fn Packed2Avx512(GgmlType type);
// Many activation rows (prefill, batched decode): tiles [0, ntiles) from `tiles` (tile_bytes
// apart, `rows` valid weight rows in all, so the last tile may be partial) against m
// activation rows, the kernel blocking for registers and caches itself (it takes the rows in
// L2-sized chunks):
//   y[i * ldy + r] = dot(weight row r, activation row i)   for i < m, r < rows.
using PackedGemmFn = void (*)(int64_t k, const uint8_t* tiles, size_t tile_bytes, int64_t ntiles,
                              int64_t rows, const uint8_t* act, size_t act_stride, int64_t m,
                              float* y, int64_t ldy);
PackedGemmFn PackedGemmAvx512(GgmlType type);
// The AVX2 GEMM (matmul_gemm_avx2.cc): Q4_0, Q4_1, Q5_0, Q4_K, Q6_K; null for other types.
PackedGemmFn PackedGemmAvx2(GgmlType type);
// Activation rows from which MatMul runs PackedGemmAvx2 at the AVX2 level (measured; see
// docs/kernels.md). Q5_0 has no AVX2 few-row packed kernel: its GEMM runs from 1 row, so a row's
// result never depends on the row count (the GGUF-layout kernel sums in another order).
// TACHYON_GEMM_MIN_ROWS=N sets N for every type, as for GemmMinRows.
int64_t GemmMinRowsAvx2(GgmlType type);
PackedFn PackedScalar(GgmlType type);
PackedFn PackedAvx2(GgmlType type);
PackedFn PackedAvx512(GgmlType type);
// F16 / BF16 packed tiles (matmul_packed_float*.cc; kF32 / kBF16 activations), returned by
// the Packed* lookups above for those types.
PackedFn PackedFloatScalar(GgmlType type);
PackedFn PackedFloatAvx2(GgmlType type);
PackedFn PackedFloatAvx512(GgmlType type);

// AMX-BF16 path (SimdLevel::kAmx, m >= AmxMinRows(type); matmul_amx.cc). Activations are
// converted once per call to bf16 (round to nearest even), AmxActStride(cols) bytes per row
// (cols rounded up to a multiple of 32 with +0) in a tile-major buffer of mp rows (m rounded
// up to 16; the rows past m are all +0): 16 rows x 32 inputs per 1 KiB A tile (layout in
// matmul_amx.cc). Each thread then runs AmxRunTiles over its weight tiles.
size_t AmxActStride(int64_t cols);
// Writes activation rows [i0, i1) of the m real rows (rows >= m: zeros). x points at row
// x_row0 (rows [x_row0, ...) of the activations; 0: all of them).
void AmxConvertRows(const float* x, int64_t cols, int64_t m, int64_t i0, int64_t i1,
                    uint8_t* act, int64_t x_row0 = 0);
// Split types (AmxSplitType: F32, F16) also need the low halves of the activations,
// bf16(x - float(hi)) (+0 where hi is Inf / NaN), in the same layout at act_lo = act + mp *
// AmxActStride(cols): AmxConvertRowsLow writes rows [i0, i1) of those.
bool AmxSplitType(GgmlType type);
void AmxConvertRowsLow(const float* x, int64_t cols, int64_t m, int64_t i0, int64_t i1,
                       uint8_t* act_lo, int64_t x_row0 = 0);
// y[i, 16t + r] = dot(activation row i, weight row 16t + r) for i < m, tiles t in [t0, t1)
// (rows past w.rows are not written): bf16 weight panels (DequantPanelBf16) times the bf16
// activations with TDPBF16PS, f32 accumulation over the whole row; for split types
// hi·hi + lo·hi + hi·lo of the hi / lo panels (DequantPanelBf16Split) and activation rows.
// A row's results do not depend on m, the tile range or the thread. REQUIRES: HasAmxSet().
void AmxRunTiles(const Weight& w, const uint8_t* act, int64_t m, float* y, int64_t t0,
                 int64_t t1);
// Smallest m that MatMul runs on AMX for weights of `type` at SimdLevel::kAmx (measured; see
// docs/kernels.md). TACHYON_AMX_MIN_M=N overrides it for every type (a large N disables AMX).
int64_t AmxMinRows(GgmlType type);
// The AMX path itself, whatever m (tests): MatMulMulti's contract with the rounding above.
// With x null the rows come from `rows` (MatMulMultiRows), produced 16 at a time into an
// L2-sized buffer and converted from there.
// REQUIRES: DetectedCpuFeatures().HasAmxSet(), all ws[i]->cols equal.
void MatMulMultiAmx(std::span<const Weight* const> ws, const float* x, int64_t m,
                    std::span<float* const> ys, ThreadPool* pool,
                    const InputRows* rows = nullptr);

QuantizeActFn QuantizeActScalar(ActFormat f);
QuantizeActFn QuantizeActAvx2(ActFormat f);
QuantizeActFn QuantizeActAvx512(ActFormat f);

}  // namespace tachyon::kernels::internal
