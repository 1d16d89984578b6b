// Row-wise ops of encoder (BERT-family) layers: LayerNorm with bias and the exact (erf) GELU.
// Each has a scalar reference (*Reference, double accumulation) and an AVX2 variant picked at
// run time (AVX-512 machines run the AVX2 one); encoder_ops_test.cc compares them.
// Shapes: [rows, cols] row-major float32.
#pragma once

#include <cstdint>

#include "util/cpu_features.h"

namespace tachyon::kernels {

// out[i, :] = (x[i, :] - mean) / sqrt(var + eps) * weight[:] + bias[:], mean and (biased)
// variance over the row. x, out: [m, n]; weight, bias: [n]. out may alias x.
void LayerNorm(const float* x, const float* weight, const float* bias, float* out, int64_t m,
               int64_t n, float eps);

// out[i] = 0.5 * x[i] * (1 + erf(x[i] / sqrt(2))) (BERT's "gelu"). out may alias x.
void GeluErf(const float* x, float* out, int64_t n);

void LayerNormReference(const float* x, const float* weight, const float* bias, float* out,
                        int64_t m, int64_t n, float eps);
void GeluErfReference(const float* x, float* out, int64_t n);

namespace internal {
struct EncoderOpsTable {
  void (*layer_norm)(const float* x, const float* weight, const float* bias, float* out, int64_t m,
                     int64_t n, float eps);
  void (*gelu_erf)(const float* x, float* out, int64_t n);
};
const EncoderOpsTable& EncoderOpsAvx2();
// The table for `level`, capped by BestSimdLevel().
const EncoderOpsTable& EncoderOpsAtLevel(SimdLevel level);
}  // namespace internal

}  // namespace tachyon::kernels
