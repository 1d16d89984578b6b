// Internal to kernels/: the K-quant reference quantizers behind QuantizeRow.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace tachyon::kernels {

// Quantizes nb super-blocks of 256 floats to type (Q2_K..Q6_K, Q8_K).
void QuantizeRowK(GgmlType type, const float* x, void* dst, int64_t nb);

}  // namespace tachyon::kernels
