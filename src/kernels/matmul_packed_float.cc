// Scalar kernels for the packed F16 / BF16 layouts (kernels/pack.h): element c of tile row r
// is uint16 32 * (c / 2) + 2 * r + c % 2. The fallback without AVX2 and the plain statement of
// the arithmetic: float products summed in input order (BF16: bf16-rounded activations).
#include "kernels/matmul_internal.h"
#include "kernels/pack.h"
#include "tensor/fp16.h"

namespace tachyon::kernels::internal {
namespace {

struct F16 {
  using T = float;
  static float W(uint16_t v) { return Fp16ToF32(v); }
  static float X(float v) { return v; }
};
struct Bf16 {
  using T = uint16_t;
  static float W(uint16_t v) { return Bf16ToF32(v); }
  static float X(uint16_t v) { return Bf16ToF32(v); }
};

template <typename E>
void Tile(int64_t k, const uint8_t* tile, const uint8_t* act, size_t stride, int nx, float* y,
          int64_t ldy, int nrows) {
  const auto* w = reinterpret_cast<const uint16_t*>(tile);
  for (int i = 0; i < nx; ++i) {
    const auto* x = reinterpret_cast<const typename E::T*>(act + i * stride);
    for (int r = 0; r < nrows; ++r) {
      float s = 0;
      for (int64_t c = 0; c < k; ++c) s += E::W(w[32 * (c / 2) + 2 * r + c % 2]) * E::X(x[c]);
      y[i * ldy + r] = s;
    }
  }
}

}  // namespace

PackedFn PackedFloatScalar(GgmlType type) {
  switch (type) {
    case GgmlType::kF16:
      return Tile<F16>;
    case GgmlType::kBF16:
      return Tile<Bf16>;
    default:
      return nullptr;
  }
}

}  // namespace tachyon::kernels::internal
