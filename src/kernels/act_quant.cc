// Scalar activation conversion (the reference for the SIMD versions) and format helpers.
#include <cmath>
#include <cstring>

#include "kernels/matmul_internal.h"
#include "tensor/fp16.h"
#include "util/logging.h"

namespace tachyon::kernels::internal {
namespace {

void ActBf16(const float* x, int64_t k, uint8_t* out) {
  auto* o = reinterpret_cast<uint16_t*>(out);
  for (int64_t i = 0; i < k; ++i) o[i] = F32ToBf16(x[i]);
}

void ActQ8_32(const float* x, int64_t k, uint8_t* out) {
  const int64_t nb = k / 32, ng = Q8Groups(k);
  auto* qs = reinterpret_cast<int8_t*>(out);
  auto* d4 = reinterpret_cast<float*>(out + 128 * ng);
  float* s4 = d4 + 16 * ng;
  auto* sums = reinterpret_cast<int32_t*>(out + 256 * ng);
  for (int64_t b = 0; b < 4 * ng; ++b) {
    const int64_t g = b / 4, i = b % 4;
    int8_t* lo = qs + 128 * g + 16 * i;
    if (b >= nb) {  // padding block
      std::memset(lo, 0, 16);
      std::memset(lo + 64, 0, 16);
      for (int j = 0; j < 4; ++j) d4[16 * g + 4 * i + j] = s4[16 * g + 4 * i + j] = 0.0f;
      sums[b] = 0;
      continue;
    }
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[32 * b + j]));
    const float db = amax / 127.0f, id = amax != 0 ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      const int q = static_cast<int>(std::nearbyint(x[32 * b + j] * id));
      (j < 16 ? lo[j] : lo[64 + j - 16]) = static_cast<int8_t>(q);
      sum += q;
    }
    for (int j = 0; j < 4; ++j) {
      d4[16 * g + 4 * i + j] = db;
      s4[16 * g + 4 * i + j] = db * static_cast<float>(sum) * 0.25f;
    }
    sums[b] = sum;
  }
}

void ActQ8_256(const float* x, int64_t k, uint8_t* out) {
  auto* qs = reinterpret_cast<int8_t*>(out);
  auto* d = reinterpret_cast<float*>(out + k);
  auto* bsums = reinterpret_cast<int16_t*>(d + k / 256);
  for (int64_t b = 0; b < k / 256; ++b) {
    const float* xb = x + 256 * b;
    float amax = 0;
    for (int j = 0; j < 256; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    // Scale 127 / amax (symmetric, like Q8_0); q in [-127, 127].
    const float id = amax != 0 ? 127.0f / amax : 0.0f;
    d[b] = amax / 127.0f;
    for (int j = 0; j < 256; ++j) {
      qs[256 * b + j] = static_cast<int8_t>(std::nearbyint(xb[j] * id));
    }
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += qs[256 * b + 16 * g + j];
      bsums[16 * b + g] = static_cast<int16_t>(sum);
    }
  }
}

}  // namespace

ActFormat ActFormatFor(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
    case GgmlType::kF16:
      return ActFormat::kF32;
    case GgmlType::kBF16:
      return ActFormat::kBF16;
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
      return ActFormat::kQ8_256;
    default:
      return ActFormat::kQ8_32;
  }
}

size_t ActRowBytes(ActFormat f, int64_t k) {
  size_t n = 0;
  switch (f) {
    case ActFormat::kF32:
      n = static_cast<size_t>(k) * 4;
      break;
    case ActFormat::kBF16:
      n = static_cast<size_t>(k) * 2;
      break;
    case ActFormat::kQ8_32:  // codes, d4, s4 (256 bytes per group), then 4 int32 sums
      n = static_cast<size_t>(Q8Groups(k)) * (256 + 16);
      break;
    case ActFormat::kQ8_256:
      n = static_cast<size_t>(k) + static_cast<size_t>(k / 256) * 4 +
          static_cast<size_t>(k / 16) * 2;
      break;
  }
  return (n + 63) / 64 * 64;
}

QuantizeActFn QuantizeActScalar(ActFormat f) {
  switch (f) {
    case ActFormat::kBF16:
      return ActBf16;
    case ActFormat::kQ8_32:
      return ActQ8_32;
    case ActFormat::kQ8_256:
      return ActQ8_256;
    case ActFormat::kF32:
      return nullptr;  // x is used in place
  }
  return nullptr;
}

}  // namespace tachyon::kernels::internal
