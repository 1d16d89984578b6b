// POD block structs of the block-quantized GGUF / ggml weight formats (published layouts).
// Every size matches tensor/dtype.cc's table (static_asserts below). Scales `d` / `dmin` are
// IEEE half unless noted. Dequantization formulas (x = value of element i of the block):
//
//   Q4_0: x = d * (q - 8); q = low nibble of qs[i] for i < 16, high nibble of qs[i-16] else.
//   Q4_1: x = d * q + m (same nibble order).
//   Q5_0: x = d * (q - 16); q = nibble as Q4_0 | bit i of qh (little-endian uint32) << 4.
//   Q5_1: x = d * q + m (as Q5_0).
//   Q8_0: x = d * qs[i].            Q8_1: as Q8_0, s = d * sum(qs) (activations).
//   K-quants group 256 elements (kQK) in sub-blocks of 16 or 32; see kernels/dequantize.cc.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tachyon {

inline constexpr int kQK4 = 32;          // elements per Q4_0 / Q4_1 / Q5_x / Q8_x block
inline constexpr int kQK = 256;          // elements per K-quant super-block
inline constexpr int kKScaleBytes = 12;  // packed 6-bit scales of Q3_K / Q4_K / Q5_K

struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK4 / 2];
};
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK4 / 2];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK4 / 2];
};
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK4 / 2];
};
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK4];
};
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[kQK4];
};

// Q2_K: 16 sub-blocks of 16; scales[j] = scale (low nibble) | min (high nibble);
// x = d * (scales[j] & 15) * q - dmin * (scales[j] >> 4), q 2-bit.
struct BlockQ2_K {
  uint8_t scales[kQK / 16];
  uint8_t qs[kQK / 4];
  uint16_t d;
  uint16_t dmin;
};
// Q3_K: 16 sub-blocks of 16, 6-bit signed scales (stored + 32) packed in 12 bytes;
// x = d * (scale - 32) * (q2 - (hmask bit set ? 0 : 4)).
struct BlockQ3_K {
  uint8_t hmask[kQK / 8];
  uint8_t qs[kQK / 4];
  uint8_t scales[kKScaleBytes];
  uint16_t d;
};
// Q4_K: 8 sub-blocks of 32, 6-bit scale and min each, packed in 12 bytes;
// x = d * scale * q - dmin * min, q 4-bit.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQK / 2];
};
// Q5_K: as Q4_K with a fifth bit per element in qh.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQK / 8];
  uint8_t qs[kQK / 2];
};
// Q6_K: 16 sub-blocks of 16 with int8 scales; x = d * scale * (q - 32), q 6-bit
// (low 4 bits in ql, high 2 bits in qh).
struct BlockQ6_K {
  uint8_t ql[kQK / 2];
  uint8_t qh[kQK / 4];
  int8_t scales[kQK / 16];
  uint16_t d;
};
// Q8_K: the activation type of K-quant dot products. d is a float; bsums[j] = sum of
// qs[16 j .. 16 j + 15].
struct BlockQ8_K {
  float d;
  int8_t qs[kQK];
  int16_t bsums[kQK / 16];
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);

// Unpacks sub-block j (0..7) scale and min of Q4_K / Q5_K's 12-byte 6-bit packing.
inline void UnpackScaleMinK4(const uint8_t* s, int j, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = s[j] & 63;
    *min = s[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

// Unpacks Q3_K's 16 6-bit scales (returned with the +32 bias removed: -32..31).
inline void UnpackScalesQ3K(const uint8_t* s, int8_t out[16]) {
  for (int i = 0; i < 16; ++i) {
    const int lo = i < 8 ? (s[i] & 0xF) : (s[i - 8] >> 4);
    const int hi = (s[8 + (i % 4)] >> (2 * (i / 4))) & 3;
    out[i] = static_cast<int8_t>((lo | (hi << 4)) - 32);
  }
}

}  // namespace tachyon
