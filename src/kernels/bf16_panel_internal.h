// Internal to kernels/: the SIMD variants behind DequantPanelBf16 (kernels/bf16_panel.h).
#pragma once

#include <cstdint>

#include "kernels/matmul.h"

namespace tachyon::kernels::internal {

// The AVX-512 (F/BW/VL/DQ + BF16) panel writer: same contract and bytes as
// DequantPanelBf16Reference. Returns false, writing nothing, for a type it has no fast path
// for. REQUIRES: DetectedCpuFeatures().HasAvx512Set(), and DequantPanelBf16's preconditions.
bool DequantPanelBf16Avx512(const Weight& w, int64_t t, int64_t k0, int64_t kc, uint16_t* dst);
// The same for DequantPanelBf16SplitReference: F32 and F16 only (false, nothing written, for
// other types).
bool DequantPanelBf16SplitAvx512(const Weight& w, int64_t t, int64_t k0, int64_t kc, uint16_t* hi,
                                 uint16_t* lo);

}  // namespace tachyon::kernels::internal
