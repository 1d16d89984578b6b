// Scalar dot kernels: the same arithmetic as the SIMD kernels (integer dot products against
// the 8-bit activations, float scales), written plainly. They are the fallback on CPUs
// without AVX2 and the reference the SIMD kernels are tested against.
#include <cstring>

#include "kernels/matmul_internal.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"

namespace tachyon::kernels::internal {
namespace {

using RowDot = float (*)(int64_t k, const void* w, const uint8_t* act);

template <RowDot F>
void Rows(int64_t k, const void* w, const uint8_t* act, size_t stride, int nx, float* y,
          int64_t ldy) {
  for (int i = 0; i < nx; ++i) y[i * ldy] = F(k, w, act + i * stride);
}

float DotF32(int64_t k, const void* w, const uint8_t* act) {
  const auto* a = static_cast<const float*>(w);
  const auto* x = reinterpret_cast<const float*>(act);
  float s = 0;
  for (int64_t i = 0; i < k; ++i) s += a[i] * x[i];
  return s;
}

float DotF16(int64_t k, const void* w, const uint8_t* act) {
  const auto* a = static_cast<const uint16_t*>(w);
  const auto* x = reinterpret_cast<const float*>(act);
  float s = 0;
  for (int64_t i = 0; i < k; ++i) s += Fp16ToF32(a[i]) * x[i];
  return s;
}

float DotBf16(int64_t k, const void* w, const uint8_t* act) {
  const auto* a = static_cast<const uint16_t*>(w);
  const auto* x = reinterpret_cast<const uint16_t*>(act);
  float s = 0;
  for (int64_t i = 0; i < k; ++i) s += Bf16ToF32(a[i]) * Bf16ToF32(x[i]);
  return s;
}

// 32-element block types: q[j] unsigned codes; result = dw * dx * sum(q * xq) + c * s_x where
// c = -offset * dw (symmetric types) or the block min m (affine types).
template <typename Block, int kOffset, bool kAffine, bool kHighBit>
float DotBlock32(int64_t k, const void* w, const uint8_t* act) {
  const auto* b = static_cast<const Block*>(w);
  const Q8Row32 x = ViewQ8Row32(act, k);
  float acc = 0;
  for (int64_t i = 0; i < k / 32; ++i) {
    int q[32];
    if constexpr (sizeof(Block) == sizeof(BlockQ8_0)) {
      for (int j = 0; j < 32; ++j) q[j] = reinterpret_cast<const BlockQ8_0*>(&b[i])->qs[j];
    } else {
      for (int j = 0; j < 16; ++j) {
        q[j] = b[i].qs[j] & 0xF;
        q[j + 16] = b[i].qs[j] >> 4;
      }
    }
    if constexpr (kHighBit) {
      uint32_t qh;
      std::memcpy(&qh, reinterpret_cast<const uint8_t*>(&b[i]) + sizeof(Block) - 20, 4);
      for (int j = 0; j < 32; ++j) q[j] |= static_cast<int>((qh >> j) & 1u) << 4;
    }
    const int8_t* xq = x.qs + 128 * (i / 4) + 16 * (i % 4);
    int isum = 0;
    for (int j = 0; j < 16; ++j) isum += q[j] * xq[j] + q[16 + j] * xq[64 + j];
    const float dw = Fp16ToF32(b[i].d);
    float c;
    if constexpr (kAffine) {
      uint16_t m;
      std::memcpy(&m, reinterpret_cast<const uint8_t*>(&b[i]) + 2, 2);
      c = Fp16ToF32(m);
    } else {
      c = -static_cast<float>(kOffset) * dw;
    }
    acc += dw * x.d4[4 * i] * static_cast<float>(isum) + c * (4.0f * x.s4[4 * i]);
  }
  return acc;
}

// K-quants: per super-block, unsigned codes q[256], integer sub-block scales sc[] and mins
// mn[] (sub-block of 16 or 32); value = d * sc * q - dmin * mn (dmin * mn folds offsets).
struct KUnpacked {
  int q[256];
  int sc[16];
  int mn[16];  // in units of dmin (affine) or d * sc (offset types, already multiplied)
  float d, dmin;
  int sub;  // sub-block size
};

void UnpackQ2K(const BlockQ2_K& b, KUnpacked* u) {
  u->d = Fp16ToF32(b.d);
  u->dmin = Fp16ToF32(b.dmin);
  u->sub = 16;
  for (int e = 0; e < 256; ++e)
    u->q[e] = (b.qs[(e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
  for (int j = 0; j < 16; ++j) {
    u->sc[j] = b.scales[j] & 0xF;
    u->mn[j] = b.scales[j] >> 4;
  }
}

void UnpackQ3K(const BlockQ3_K& b, KUnpacked* u) {
  u->d = Fp16ToF32(b.d);
  u->dmin = u->d;
  u->sub = 16;
  int8_t sc[16];
  UnpackScalesQ3K(b.scales, sc);
  for (int e = 0; e < 256; ++e) {
    const int half = e / 128, s = (e % 128) / 32, l = e % 32;
    u->q[e] = ((b.qs[half * 32 + l] >> (2 * s)) & 3) | (((b.hmask[l] >> (4 * half + s)) & 1) << 2);
  }
  for (int j = 0; j < 16; ++j) {
    u->sc[j] = sc[j];
    u->mn[j] = 4 * sc[j];
  }
}

void UnpackQ4K(const BlockQ4_K& b, KUnpacked* u) {
  u->d = Fp16ToF32(b.d);
  u->dmin = Fp16ToF32(b.dmin);
  u->sub = 32;
  for (int e = 0; e < 256; ++e) {
    const uint8_t byte = b.qs[32 * (e / 64) + e % 32];
    u->q[e] = ((e / 32) & 1) ? byte >> 4 : byte & 0xF;
  }
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, mn;
    UnpackScaleMinK4(b.scales, j, &sc, &mn);
    u->sc[j] = sc;
    u->mn[j] = mn;
  }
}

void UnpackQ5K(const BlockQ5_K& b, KUnpacked* u) {
  u->d = Fp16ToF32(b.d);
  u->dmin = Fp16ToF32(b.dmin);
  u->sub = 32;
  for (int e = 0; e < 256; ++e) {
    const uint8_t byte = b.qs[32 * (e / 64) + e % 32];
    const int sub = e / 32;
    u->q[e] = ((sub & 1) ? byte >> 4 : byte & 0xF) | (((b.qh[e % 32] >> sub) & 1) << 4);
  }
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, mn;
    UnpackScaleMinK4(b.scales, j, &sc, &mn);
    u->sc[j] = sc;
    u->mn[j] = mn;
  }
}

void UnpackQ6K(const BlockQ6_K& b, KUnpacked* u) {
  u->d = Fp16ToF32(b.d);
  u->dmin = u->d;
  u->sub = 16;
  for (int e = 0; e < 256; ++e) {
    const int half = e / 128, s = (e % 128) / 32, l = e % 32;
    const uint8_t lq = b.ql[64 * half + l + 32 * (s & 1)];
    const int lo = (s < 2) ? (lq & 0xF) : (lq >> 4);
    u->q[e] = lo | (((b.qh[32 * half + l] >> (2 * s)) & 3) << 4);
  }
  for (int j = 0; j < 16; ++j) {
    u->sc[j] = b.scales[j];
    u->mn[j] = 32 * b.scales[j];
  }
}

template <typename Block, void (*Unpack)(const Block&, KUnpacked*)>
float DotK(int64_t k, const void* w, const uint8_t* act) {
  const auto* b = static_cast<const Block*>(w);
  const Q8Row256 x = ViewQ8Row256(act, k);
  float acc = 0;
  KUnpacked u;
  for (int64_t i = 0; i < k / 256; ++i) {
    Unpack(b[i], &u);
    const int8_t* xq = x.qs + 256 * i;
    const int16_t* bs = x.bsums + 16 * i;
    int dot = 0, mins = 0;
    for (int j = 0; j < 256 / u.sub; ++j) {
      int isum = 0;
      for (int e = j * u.sub; e < (j + 1) * u.sub; ++e) isum += u.q[e] * xq[e];
      int xsum = 0;
      for (int g = j * u.sub / 16; g < (j + 1) * u.sub / 16; ++g) xsum += bs[g];
      dot += u.sc[j] * isum;
      mins += u.mn[j] * xsum;
    }
    acc += x.d[i] * (u.d * static_cast<float>(dot) - u.dmin * static_cast<float>(mins));
  }
  return acc;
}

}  // namespace

DotFn DotScalar(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
      return Rows<DotF32>;
    case GgmlType::kF16:
      return Rows<DotF16>;
    case GgmlType::kBF16:
      return Rows<DotBf16>;
    case GgmlType::kQ4_0:
      return Rows<DotBlock32<BlockQ4_0, 8, false, false>>;
    case GgmlType::kQ4_1:
      return Rows<DotBlock32<BlockQ4_1, 0, true, false>>;
    case GgmlType::kQ5_0:
      return Rows<DotBlock32<BlockQ5_0, 16, false, true>>;
    case GgmlType::kQ5_1:
      return Rows<DotBlock32<BlockQ5_1, 0, true, true>>;
    case GgmlType::kQ8_0:
      return Rows<DotBlock32<BlockQ8_0, 0, false, false>>;
    case GgmlType::kQ2_K:
      return Rows<DotK<BlockQ2_K, UnpackQ2K>>;
    case GgmlType::kQ3_K:
      return Rows<DotK<BlockQ3_K, UnpackQ3K>>;
    case GgmlType::kQ4_K:
      return Rows<DotK<BlockQ4_K, UnpackQ4K>>;
    case GgmlType::kQ5_K:
      return Rows<DotK<BlockQ5_K, UnpackQ5K>>;
    case GgmlType::kQ6_K:
      return Rows<DotK<BlockQ6_K, UnpackQ6K>>;
    default:
      return nullptr;
  }
}

}  // namespace tachyon::kernels::internal
