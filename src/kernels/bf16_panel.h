// bf16 weight panels: the B operand of the AMX bf16 tile multiply (TDPBF16PS).
//
// A panel holds 16 consecutive weight rows ("tile" t = rows 16t .. 16t+15) over an input range
// [k0, k0 + kc), dequantized to float and rounded to bf16 (nearest even), in the layout a B
// tile expects: for each pair of input features (k, k+1) one 64-byte row of [16 rows][2]:
//
//   dst[((k - k0) / 2) * 32 + 2 * n + (k - k0) % 2] = bf16(W[16 t + n][k])
//
// so one B tile (16 pair-rows, 1 KiB) covers 32 input features of the 16 weight rows, and a
// panel is kc / 32 such tiles back to back. Weight rows at or past w.rows and features at or
// past w.cols are written as +0, so a partial last tile and a cols that is not a multiple of
// 32 multiply as zeros.
//
// Values are exactly DequantizeRow's floats, rounded once to bf16; every implementation
// writes identical bytes. Quantized types with a packed copy (w.packed, kernels/pack.h) may
// be read from either layout: on AVX-512 CPUs DequantPanelBf16 reads packed Q4_0 / Q8_0 /
// Q4_K / Q6_K from w.packed (no transpose needed) and every other type from w.data
// (bf16_panel_avx512.cc; rates in docs/kernels.md), else it runs the scalar reference.
// Thread-safety: none needed (no shared state); one call writes one panel.
#pragma once

#include <cstdint>

#include "kernels/matmul.h"

namespace tachyon::kernels {

// The alignment k0 must have for w.type (a multiple of 32 and of the type's block size).
int64_t PanelKAlign(GgmlType type);

// Writes the panel of tile t over [k0, k0 + kc) to dst (kc * 16 uint16, 64-byte aligned).
// REQUIRES: IsSupportedWeightType(w.type), 0 <= t < ceil(w.rows / 16),
// k0 % PanelKAlign(w.type) == 0, kc % 32 == 0, kc > 0, k0 < w.cols.
void DequantPanelBf16(const Weight& w, int64_t t, int64_t k0, int64_t kc, uint16_t* dst);

// The scalar reference of DequantPanelBf16 (DequantizeRow per row, then F32ToBf16); tests
// check the fast paths against it byte for byte.
void DequantPanelBf16Reference(const Weight& w, int64_t t, int64_t k0, int64_t kc, uint16_t* dst);

// The hi / lo split of the same panel, for weights that one bf16 cannot hold closely enough
// (F32, F16): hi = bf16(W) as DequantPanelBf16 writes it, lo = bf16(W - float(hi)) (nearest
// even; +0 where hi is not finite), both in the layout above, so hi + lo is W to ~2^-17
// relative (F16 weights exactly: 8 + 8 significant bits hold the 11 of a half). Same
// preconditions as DequantPanelBf16; hi and lo are separate kc * 16 uint16 buffers. On
// AVX-512 CPUs F32 (from w.data) and F16 (from w.packed where set, whose tiles are the panel
// layout in halves, else from w.data) take a SIMD path; every type has the reference.
void DequantPanelBf16Split(const Weight& w, int64_t t, int64_t k0, int64_t kc, uint16_t* hi,
                           uint16_t* lo);
// Its scalar reference (byte-exact spec): DequantPanelBf16Reference, then lo per value.
void DequantPanelBf16SplitReference(const Weight& w, int64_t t, int64_t k0, int64_t kc,
                                    uint16_t* hi, uint16_t* lo);

// The low half of the split of one value: bf16(v - float(hi)), hi = F32ToBf16(v); +0 where
// hi is Inf or NaN (so an infinite weight or activation does not turn into NaN via hi - v).
uint16_t Bf16SplitLow(float v, uint16_t hi);

}  // namespace tachyon::kernels
