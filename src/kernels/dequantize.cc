// Scalar reference dequantizers: one row of k elements of any supported type to float.
#include <cstring>

#include "kernels/matmul.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"
#include "util/logging.h"

namespace tachyon::kernels {
namespace {

void DequantQ4_0(const BlockQ4_0* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQK4) {
    const float d = Fp16ToF32(b[i].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * static_cast<float>((b[i].qs[j] & 0xF) - 8);
      y[j + 16] = d * static_cast<float>((b[i].qs[j] >> 4) - 8);
    }
  }
}

void DequantQ4_1(const BlockQ4_1* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQK4) {
    const float d = Fp16ToF32(b[i].d), m = Fp16ToF32(b[i].m);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * static_cast<float>(b[i].qs[j] & 0xF) + m;
      y[j + 16] = d * static_cast<float>(b[i].qs[j] >> 4) + m;
    }
  }
}

uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

void DequantQ5_0(const BlockQ5_0* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQK4) {
    const float d = Fp16ToF32(b[i].d);
    const uint32_t qh = LoadU32(b[i].qh);
    for (int j = 0; j < 16; ++j) {
      const int q0 = (b[i].qs[j] & 0xF) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int q1 = (b[i].qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
      y[j] = d * static_cast<float>(q0 - 16);
      y[j + 16] = d * static_cast<float>(q1 - 16);
    }
  }
}

void DequantQ5_1(const BlockQ5_1* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQK4) {
    const float d = Fp16ToF32(b[i].d), m = Fp16ToF32(b[i].m);
    const uint32_t qh = LoadU32(b[i].qh);
    for (int j = 0; j < 16; ++j) {
      const int q0 = (b[i].qs[j] & 0xF) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int q1 = (b[i].qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
      y[j] = d * static_cast<float>(q0) + m;
      y[j + 16] = d * static_cast<float>(q1) + m;
    }
  }
}

void DequantQ8_0(const BlockQ8_0* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQK4) {
    const float d = Fp16ToF32(b[i].d);
    for (int j = 0; j < kQK4; ++j) y[j] = d * static_cast<float>(b[i].qs[j]);
  }
}

void DequantQ8_1(const BlockQ8_1* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQK4) {
    const float d = Fp16ToF32(b[i].d);
    for (int j = 0; j < kQK4; ++j) y[j] = d * static_cast<float>(b[i].qs[j]);
  }
}

// Q2_K: each 128-element half uses 32 bytes of qs; element 32 * s + l (s = 0..3) is bits
// 2s..2s+1 of qs[l]; sub-block of 16 = (element index) / 16.
void DequantQ2_K(const BlockQ2_K* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = Fp16ToF32(b[i].d), dmin = Fp16ToF32(b[i].dmin);
    for (int e = 0; e < kQK; ++e) {
      const int half = e / 128, s = (e % 128) / 32, l = e % 32;
      const int q = (b[i].qs[half * 32 + l] >> (2 * s)) & 3;
      const uint8_t sc = b[i].scales[e / 16];
      y[e] = d * static_cast<float>(sc & 0xF) * static_cast<float>(q) -
             dmin * static_cast<float>(sc >> 4);
    }
  }
}

// Q3_K: low 2 bits as Q2_K; the high bit of element 32 * s + l of half h is bit (4h + s) of
// hmask[l]; a clear bit subtracts 4.
void DequantQ3_K(const BlockQ3_K* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = Fp16ToF32(b[i].d);
    int8_t sc[16];
    UnpackScalesQ3K(b[i].scales, sc);
    for (int e = 0; e < kQK; ++e) {
      const int half = e / 128, s = (e % 128) / 32, l = e % 32;
      const int q2 = (b[i].qs[half * 32 + l] >> (2 * s)) & 3;
      const int hbit = (b[i].hmask[l] >> (4 * half + s)) & 1;
      y[e] = d * static_cast<float>(sc[e / 16]) * static_cast<float>(q2 - (hbit ? 0 : 4));
    }
  }
}

// Q4_K: 64-element chunk c uses qs[32 c .. 32 c + 31]: low nibbles are sub-block 2c, high
// nibbles sub-block 2c + 1.
void DequantQ4_K(const BlockQ4_K* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = Fp16ToF32(b[i].d), dmin = Fp16ToF32(b[i].dmin);
    for (int e = 0; e < kQK; ++e) {
      const int sub = e / 32, c = e / 64, l = e % 32;
      const uint8_t byte = b[i].qs[32 * c + l];
      const int q = (sub & 1) ? (byte >> 4) : (byte & 0xF);
      uint8_t sc, mn;
      UnpackScaleMinK4(b[i].scales, sub, &sc, &mn);
      y[e] = d * static_cast<float>(sc) * static_cast<float>(q) - dmin * static_cast<float>(mn);
    }
  }
}

// Q5_K: as Q4_K; the fifth bit of element 32 * sub + l is bit `sub` of qh[l].
void DequantQ5_K(const BlockQ5_K* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = Fp16ToF32(b[i].d), dmin = Fp16ToF32(b[i].dmin);
    for (int e = 0; e < kQK; ++e) {
      const int sub = e / 32, c = e / 64, l = e % 32;
      const uint8_t byte = b[i].qs[32 * c + l];
      const int q = ((sub & 1) ? (byte >> 4) : (byte & 0xF)) | (((b[i].qh[l] >> sub) & 1) << 4);
      uint8_t sc, mn;
      UnpackScaleMinK4(b[i].scales, sub, &sc, &mn);
      y[e] = d * static_cast<float>(sc) * static_cast<float>(q) - dmin * static_cast<float>(mn);
    }
  }
}

// Q6_K: per 128-element half h (ql + 64 h, qh + 32 h), element 32 s + l (l < 32) takes the
// low (s = 0, 1) or high (s = 2, 3) nibble of ql[l + 32 (s & 1)] and bits 2s..2s+1 of qh[l].
void DequantQ6_K(const BlockQ6_K* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = Fp16ToF32(b[i].d);
    for (int e = 0; e < kQK; ++e) {
      const int half = e / 128, s = (e % 128) / 32, l = e % 32;
      const uint8_t lq = b[i].ql[64 * half + l + 32 * (s & 1)];
      const int lo = (s < 2) ? (lq & 0xF) : (lq >> 4);
      const int hi = (b[i].qh[32 * half + l] >> (2 * s)) & 3;
      y[e] =
          d * static_cast<float>(b[i].scales[e / 16]) * static_cast<float>((lo | (hi << 4)) - 32);
    }
  }
}

void DequantQ8_K(const BlockQ8_K* b, int64_t nb, float* y) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    for (int j = 0; j < kQK; ++j) y[j] = b[i].d * static_cast<float>(b[i].qs[j]);
  }
}

}  // namespace

void DequantizeRow(GgmlType type, const void* src, float* dst, int64_t k) {
  const auto traits = GetTypeTraits(static_cast<uint32_t>(type));
  CHECK(traits && k % traits->block_size == 0) << "DequantizeRow: bad type/size";
  const int64_t nb = k / traits->block_size;
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(k) * 4);
      return;
    case GgmlType::kF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < k; ++i) dst[i] = Fp16ToF32(h[i]);
      return;
    }
    case GgmlType::kBF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < k; ++i) dst[i] = Bf16ToF32(h[i]);
      return;
    }
    case GgmlType::kQ4_0:
      return DequantQ4_0(static_cast<const BlockQ4_0*>(src), nb, dst);
    case GgmlType::kQ4_1:
      return DequantQ4_1(static_cast<const BlockQ4_1*>(src), nb, dst);
    case GgmlType::kQ5_0:
      return DequantQ5_0(static_cast<const BlockQ5_0*>(src), nb, dst);
    case GgmlType::kQ5_1:
      return DequantQ5_1(static_cast<const BlockQ5_1*>(src), nb, dst);
    case GgmlType::kQ8_0:
      return DequantQ8_0(static_cast<const BlockQ8_0*>(src), nb, dst);
    case GgmlType::kQ8_1:
      return DequantQ8_1(static_cast<const BlockQ8_1*>(src), nb, dst);
    case GgmlType::kQ2_K:
      return DequantQ2_K(static_cast<const BlockQ2_K*>(src), nb, dst);
    case GgmlType::kQ3_K:
      return DequantQ3_K(static_cast<const BlockQ3_K*>(src), nb, dst);
    case GgmlType::kQ4_K:
      return DequantQ4_K(static_cast<const BlockQ4_K*>(src), nb, dst);
    case GgmlType::kQ5_K:
      return DequantQ5_K(static_cast<const BlockQ5_K*>(src), nb, dst);
    case GgmlType::kQ6_K:
      return DequantQ6_K(static_cast<const BlockQ6_K*>(src), nb, dst);
    case GgmlType::kQ8_K:
      return DequantQ8_K(static_cast<const BlockQ8_K*>(src), nb, dst);
    default:
      CHECK(false) << "DequantizeRow: unsupported type " << TypeName(type);
  }
}

}  // namespace tachyon::kernels
