// Scalar kernels for the packed layouts (kernels/pack.h): the fallback without AVX2 and the
// plain statement of what the SIMD packed kernels compute. Per row r and block b:
//   y += dw * dx * sum_j(u[j] * xq[j]) - kOffset * dw * (dx * sum(xq))
// with u the unsigned stored codes (Q4_0 nibbles, Q5_0 nibble | fifth bit << 4, Q8_0 q + 128)
// and kOffset 8 / 16 / 128; Q4_1 / Q5_1 (kOffset 0: no offset, a per-block min m instead)
//   y += dw * dx * sum_j(u[j] * xq[j]) + m * (dx * sum(xq)).
#include <cstring>

#include "kernels/matmul_internal.h"
#include "kernels/pack.h"
#include "tensor/fp16.h"

namespace tachyon::kernels::internal {
namespace {

// Activation bytes of block b, step s (4 bytes) in the kQ8_32 layout.
inline const int8_t* ActStep(const Q8Row32& x, int64_t b, int s) {
  const int8_t* blk = x.qs + 128 * (b / 4) + 16 * (b % 4);
  return s < 4 ? blk + 4 * s : blk + 64 + 4 * (s - 4);
}

// kHigh: Q5, the block's fifth bits in the bit-plane step after the 4 code steps (pack.cc).
template <int kCodeSteps, int kOffset, bool kHigh = false>
void PackedTile(int64_t k, const uint8_t* tile, const uint8_t* act, size_t stride, int nx,
                float* y, int64_t ldy, int nrows) {
  const int64_t nb = k / 32;
  constexpr int kBlockBytes = (kCodeSteps + (kHigh ? 1 : 0)) * 64;
  const auto* scales = reinterpret_cast<const uint16_t*>(tile + nb * kBlockBytes);
  const uint16_t* mins = scales + nb * kPackRows;  // Q4_1 / Q5_1 (kOffset 0) only
  for (int i = 0; i < nx; ++i) {
    const Q8Row32 x = ViewQ8Row32(act + i * stride, k);
    for (int r = 0; r < nrows; ++r) {
      float acc = 0;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* codes = tile + b * kBlockBytes + 4 * r;
        int isum = 0;
        for (int s = 0; s < kCodeSteps; ++s) {
          for (int j = 0; j < 4; ++j) {
            const int u = codes[64 * s + j];
            if constexpr (kCodeSteps == 4) {  // Q4 / Q5: low nibble step s, high nibble s + 4
              const int h = kHigh ? codes[64 * 4 + j] : 0;  // fifth bits: bit s, bit 4 + s
              const int lo = (u & 0xF) | (((h >> s) & 1) << 4);
              const int hi = (u >> 4) | (((h >> (4 + s)) & 1) << 4);
              isum += lo * ActStep(x, b, s)[j] + hi * ActStep(x, b, s + 4)[j];
            } else {
              isum += u * ActStep(x, b, s)[j];
            }
          }
        }
        const float dw = Fp16ToF32(scales[b * kPackRows + r]);
        const float c =
            kOffset == 0 ? Fp16ToF32(mins[b * kPackRows + r]) : -static_cast<float>(kOffset) * dw;
        acc += dw * x.d4[4 * b] * static_cast<float>(isum) + c * (4.0f * x.s4[4 * b]);
      }
      y[i * ldy + r] = acc;
    }
  }
}

// Q4_K (kQ8_256 activations): per super-block,
//   y += d * dx * sum_j(sc_j * dot_j) - dmin * dx * sum_j(min_j * (bsum_2j + bsum_2j+1)).
void TileQ4K(int64_t k, const uint8_t* tile, const uint8_t* act, size_t stride, int nx, float* y,
             int64_t ldy, int nrows) {
  const int64_t nb = k / 256;
  for (int i = 0; i < nx; ++i) {
    const Q8Row256 x = ViewQ8Row256(act + i * stride, k);
    for (int r = 0; r < nrows; ++r) {
      float acc = 0;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* codes = tile + b * 2048 + 4 * r;
        const uint8_t* meta = tile + nb * 2048 + b * 320;
        const int8_t* xq = x.qs + 256 * b;
        int isum = 0, msum = 0;
        for (int c = 0; c < 4; ++c) {
          int lo = 0, hi = 0;
          for (int t = 0; t < 8; ++t) {
            for (int j = 0; j < 4; ++j) {
              const int u = codes[64 * (8 * c + t) + j];
              lo += (u & 0xF) * xq[64 * c + 4 * t + j];
              hi += (u >> 4) * xq[64 * c + 32 + 4 * t + j];
            }
          }
          isum += meta[16 * (2 * c) + r] * lo + meta[16 * (2 * c + 1) + r] * hi;
        }
        for (int j = 0; j < 8; ++j) {
          msum += meta[128 + 16 * j + r] * (x.bsums[16 * b + 2 * j] + x.bsums[16 * b + 2 * j + 1]);
        }
        uint16_t d, dmin;
        std::memcpy(&d, meta + 256 + 2 * r, 2);
        std::memcpy(&dmin, meta + 288 + 2 * r, 2);
        acc += Fp16ToF32(d) * x.d[b] * static_cast<float>(isum) -
               Fp16ToF32(dmin) * x.d[b] * static_cast<float>(msum);
      }
      y[i * ldy + r] = acc;
    }
  }
}

// Q6_K: per super-block, y += d * dx * sum_g(sc_g * (dot_g - 32 * bsum_g)).
void TileQ6K(int64_t k, const uint8_t* tile, const uint8_t* act, size_t stride, int nx, float* y,
             int64_t ldy, int nrows) {
  const int64_t nb = k / 256;
  for (int i = 0; i < nx; ++i) {
    const Q8Row256 x = ViewQ8Row256(act + i * stride, k);
    for (int r = 0; r < nrows; ++r) {
      float acc = 0;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* codes = tile + b * 3072 + 4 * r;
        const uint8_t* meta = tile + nb * 3072 + b * 288;
        const int8_t* xq = x.qs + 256 * b;
        int isum = 0;
        for (int g = 0; g < 16; ++g) {
          int dot = 0;
          for (int j = 0; j < 4; ++j) {
            const int n0 = codes[64 * (3 * g) + j], n1 = codes[64 * (3 * g + 1) + j];
            const int h = codes[64 * (3 * g + 2) + j];
            const int q[4] = {(n0 & 0xF) | ((h & 3) << 4), (n0 >> 4) | (((h >> 2) & 3) << 4),
                              (n1 & 0xF) | (((h >> 4) & 3) << 4), (n1 >> 4) | (((h >> 6) & 3) << 4)};
            for (int a = 0; a < 4; ++a) dot += q[a] * xq[16 * g + 4 * a + j];
          }
          const int sc = static_cast<int8_t>(meta[16 * g + r]);
          isum += sc * (dot - 32 * x.bsums[16 * b + g]);
        }
        uint16_t d;
        std::memcpy(&d, meta + 256 + 2 * r, 2);
        acc += Fp16ToF32(d) * x.d[b] * static_cast<float>(isum);
      }
      y[i * ldy + r] = acc;
    }
  }
}

}  // namespace

PackedFn PackedScalar(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
      return PackedTile<4, 8>;
    case GgmlType::kQ4_1:
      return PackedTile<4, 0>;
    case GgmlType::kQ5_0:
      return PackedTile<4, 16, true>;
    case GgmlType::kQ5_1:
      return PackedTile<4, 0, true>;
    case GgmlType::kQ8_0:
      return PackedTile<8, 128>;
    case GgmlType::kQ4_K:
      return TileQ4K;
    case GgmlType::kQ6_K:
      return TileQ6K;
    default:
      return PackedFloatScalar(type);  // F16 / BF16, or null
  }
}

}  // namespace tachyon::kernels::internal
