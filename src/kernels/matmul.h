// Matrix multiply against weight matrices of any supported GGML type.
//
// A weight matrix W has `rows` output features, each a row of `cols` input features stored
// contiguously in the GGUF layout (dims[0] = cols). MatMul computes, for every input row i
// and weight row j:  y[i, j] = dot(x[i, :], W[j, :]).
// Activations are float; as llama.cpp does, MatMul rounds them once per call: to 8 bits per
// 32 elements (scale amax/127) for Q4_0/Q4_1/Q5_0/Q5_1/Q8_0, per 256 for Q2_K..Q6_K, to
// bf16 for BF16 weights; F32/F16 weights use the float activations. MatMulReference does
// not round (exact dequantization, double accumulation).
// Variants (scalar, AVX2, AVX-512 VNNI/BF16) are picked once at run time by BestSimdLevel()
// (TACHYON_CPU=scalar|avx2|avx512 caps it); all variants use the same rounded activations and
// agree to float summation order.
// Exception, SimdLevel::kAmx (Intel AMX) with m >= a per-type threshold (BF16 8 rows, Q6_K 24,
// Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/F16 32, Q2_K..Q5_K 48; F32 never unless SetAmxMinRows /
// TACHYON_AMX_MIN_M forces it): every type then rounds the activations to bf16 (nearest even) and
// the weights, dequantized exactly, to bf16 too, and accumulates in f32 (|error| <= sum_k |x_k w_k|
// * (2^-7 + 2^-16 + (cols + 2) 2^-24), kernels/matmul_amx_test.cc). So at kAmx the same input row
// can give slightly different outputs with fewer or more rows in the call; with the same path, a
// row's outputs never depend on the other rows.
//
// Decode rows: MatMul, MatMulMulti and MatMulMultiRows take `decode_rows` = r (0 <= r <= m). The
// first r rows are computed with the kernels of the AVX-512 level (never the AMX tiles), so their
// outputs are the same bits whatever m and r are (batch invariance: a decode or speculative verify
// row's logits do not depend on the rest of the step, model/batch.h). At kAmx rows [r, m) are then
// a call of their own (the weights are read twice), taking the AMX path from its threshold of
// m - r rows. Below kAmx every path is row-count invariant and r changes nothing.
//
// Thread-safety: MatMul may run concurrently from several threads (scratch is thread-local); the
// pool must not be shared by concurrent callers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "tensor/dtype.h"
#include "util/cpu_features.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace tachyon::kernels {

struct Weight {
  GgmlType type = GgmlType::kF32;
  int64_t rows = 0;            // output features (n)
  int64_t cols = 0;            // input features (k); a multiple of the type's block size
  const void* data = nullptr;  // rows * RowBytes(type, cols) bytes
  size_t row_bytes = 0;        // bytes per row; 0 means RowBytes(type, cols)
  // Optional repacked copy of the same matrix (kernels/pack.h), 64-byte aligned; MatMul uses
  // it when set. `data` must stay valid too (DequantizeRow, MatMulReference use it).
  const uint8_t* packed = nullptr;
};

// Activation rows from which MatMul runs the GEMM kernels of a type at the AVX-512 level (the
// 32-element block formats, Q4_K, Q6_K; below, the register-unpacking tile kernels): 8, Q4_1 16
// (docs/kernels.md, "Micro-kernels per regime"). TACHYON_GEMM_MIN_ROWS=N sets N for every
// type (benchmarks).
int64_t GemmMinRows(GgmlType type);

// Whether MatMul / DequantizeRow support this type.
bool IsSupportedWeightType(GgmlType type);

// y[m, w.rows] = x[m, w.cols] · Wᵀ.  x: [m, cols] row-major, y: [m, rows] row-major;
// y must not overlap x. Output rows are split over `pool` in contiguous chunks (may be null:
// single-threaded). No allocation after the first calls (thread-local scratch grows once).
// REQUIRES: IsSupportedWeightType(w.type).
void MatMul(const Weight& w, const float* x, int64_t m, float* y, ThreadPool* pool,
            int64_t decode_rows = 0);

// MatMul with kernels of at most `level` (capped by BestSimdLevel()); tests and benchmarks
// use it to run each variant. Scalar / AVX2 / AVX-512 results agree to float rounding.
void MatMulAtLevel(SimdLevel level, const Weight& w, const float* x, int64_t m, float* y,
                   ThreadPool* pool);

// Several weights that read the same input (wq/wk/wv, w_gate/w_up): ys[i][m, ws[i]->rows] =
// x[m, cols] · ws[i]ᵀ. The activations are converted once and all outputs are computed in one
// parallel pass (one fork/join instead of one per weight). Weights whose cols or activation
// format differ from the first one's are run one by one. Results equal MatMul's exactly.
// REQUIRES: ws.size() == ys.size() <= kMaxMultiWeights; outputs do not overlap x or each other.
inline constexpr size_t kMaxMultiWeights = 4;
void MatMulMulti(std::span<const Weight* const> ws, const float* x, int64_t m,
                 std::span<float* const> ys, ThreadPool* pool, int64_t decode_rows = 0);
void MatMulMultiAtLevel(SimdLevel level, std::span<const Weight* const> ws, const float* x,
                        int64_t m, std::span<float* const> ys, ThreadPool* pool);

// Input rows computed on the fly (a fused elementwise prologue: RMSNorm, SiLU x up, ...;
// kernels/fused_rows.h). MatMulMultiRows calls Row(i, out) exactly once for each row i in
// [0, m), possibly from several pool threads at once for different rows, with `out` a
// thread-local buffer. When the weights take quantized activations (every quantized type
// off the AMX paths) each row is converted right after it is produced, while it is in L1;
// the AMX path produces and converts 16 rows at a time (an L2-sized buffer); so the float
// rows never make a pass through memory as a whole matrix. The paths that read float
// activations (F32 / F16 weights off AMX, weights that need different formats, AMX int8)
// produce all rows into a float buffer first. Results equal MatMulMulti's on the produced
// rows exactly.
class InputRows {
 public:
  virtual ~InputRows() = default;
  virtual void Row(int64_t i, float* out) const = 0;
};
void MatMulMultiRows(std::span<const Weight* const> ws, const InputRows& x, int64_t m,
                     std::span<float* const> ys, ThreadPool* pool, int64_t decode_rows = 0);
void MatMulMultiRowsAtLevel(SimdLevel level, std::span<const Weight* const> ws, const InputRows& x,
                            int64_t m, std::span<float* const> ys, ThreadPool* pool);

// At SimdLevel::kAmx, calls with at least a type-dependent number of activation rows (the
// header comment above) take the AMX path. SetAmxMinRows(n), n >= 1, makes n the threshold for
// every type, F32 and F16 included (a huge n disables the path); SetAmxMinRows(0) restores the
// defaults (or TACHYON_AMX_MIN_M). For tests and benchmarks that need every m on one path;
// REQUIRES: no MatMul running on another thread.
void SetAmxMinRows(int64_t n);

// Scalar reference of MatMul (dequantize each row exactly, accumulate in float/double);
// used by tests to check the fast paths.
void MatMulReference(const Weight& w, const float* x, int64_t m, float* y);

// Converts one row of k elements of `type` to float (embedding lookup, tests).
void DequantizeRow(GgmlType type, const void* src, float* dst, int64_t k);

// Converts k floats to `type` (reference quantizer: used to write test models and
// `tachyon quantize`). REQUIRES: k % block size == 0; type in F32, F16, BF16, Q8_0, Q4_0,
// Q4_1, Q5_0, Q5_1, Q2_K..Q6_K, Q8_K.
void QuantizeRow(GgmlType type, const float* src, void* dst, int64_t k);

}  // namespace tachyon::kernels
