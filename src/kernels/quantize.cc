// Reference quantizers (QuantizeRow): plain float types and the 32-element block formats.
// K-quants are in quantize_k.cc.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/matmul.h"
#include "kernels/quantize_internal.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"
#include "util/logging.h"

namespace tachyon::kernels {
namespace {

// The value of largest magnitude (with its sign) and that magnitude.
void SignedAbsMax(const float* x, int n, float* max, float* amax) {
  *max = 0.0f;
  *amax = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > *amax) {
      *amax = std::fabs(x[j]);
      *max = x[j];
    }
  }
}

void MinMax(const float* x, int n, float* mn, float* mx) {
  *mn = x[0];
  *mx = x[0];
  for (int j = 1; j < n; ++j) {
    *mn = std::min(*mn, x[j]);
    *mx = std::max(*mx, x[j]);
  }
}

// Rounds v (>= -0.5) to nearest with halves up, clamped to [0, hi].
int RoundClampU(float v, int hi) {
  return std::min(hi, static_cast<int>(v + 0.5f));
}

void QuantQ4_0(const float* x, BlockQ4_0* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK4) {
    float max, amax;
    SignedAbsMax(x, kQK4, &max, &amax);
    const float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = F32ToFp16(d);
    for (int j = 0; j < 16; ++j) {
      const int q0 = RoundClampU(x[j] * id + 8.0f, 15);
      const int q1 = RoundClampU(x[j + 16] * id + 8.0f, 15);
      b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void QuantQ4_1(const float* x, BlockQ4_1* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK4) {
    float mn, mx;
    MinMax(x, kQK4, &mn, &mx);
    const float d = (mx - mn) / 15.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = F32ToFp16(d);
    b[i].m = F32ToFp16(mn);
    for (int j = 0; j < 16; ++j) {
      const int q0 = RoundClampU((x[j] - mn) * id, 15);
      const int q1 = RoundClampU((x[j + 16] - mn) * id, 15);
      b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

template <typename Block>
void PackQ5(const int q[kQK4], Block* b) {
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    b->qs[j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
    qh |= static_cast<uint32_t>(q[j] >> 4) << j;
    qh |= static_cast<uint32_t>(q[j + 16] >> 4) << (j + 16);
  }
  std::memcpy(b->qh, &qh, 4);
}

void QuantQ5_0(const float* x, BlockQ5_0* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK4) {
    float max, amax;
    SignedAbsMax(x, kQK4, &max, &amax);
    const float d = max / -16.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = F32ToFp16(d);
    int q[kQK4];
    for (int j = 0; j < kQK4; ++j) q[j] = RoundClampU(x[j] * id + 16.0f, 31);
    PackQ5(q, &b[i]);
  }
}

void QuantQ5_1(const float* x, BlockQ5_1* b, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK4) {
    float mn, mx;
    MinMax(x, kQK4, &mn, &mx);
    const float d = (mx - mn) / 31.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = F32ToFp16(d);
    b[i].m = F32ToFp16(mn);
    int q[kQK4];
    for (int j = 0; j < kQK4; ++j) q[j] = RoundClampU((x[j] - mn) * id, 31);
    PackQ5(q, &b[i]);
  }
}

// Q8_0 / Q8_1: d = amax / 127, q = round(x / d); returns sum of q.
int QuantQ8Block(const float* x, int8_t* qs, float* d_out) {
  float amax = 0.0f;
  for (int j = 0; j < kQK4; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  int sum = 0;
  for (int j = 0; j < kQK4; ++j) {
    qs[j] = static_cast<int8_t>(std::lround(x[j] * id));
    sum += qs[j];
  }
  *d_out = d;
  return sum;
}

}  // namespace

void QuantizeRow(GgmlType type, const float* src, void* dst, int64_t k) {
  const auto traits = GetTypeTraits(static_cast<uint32_t>(type));
  CHECK(traits && k % traits->block_size == 0) << "QuantizeRow: bad type/size";
  const int64_t nb = k / traits->block_size;
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(k) * 4);
      return;
    case GgmlType::kF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < k; ++i) h[i] = F32ToFp16(src[i]);
      return;
    }
    case GgmlType::kBF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < k; ++i) h[i] = F32ToBf16(src[i]);
      return;
    }
    case GgmlType::kQ4_0:
      return QuantQ4_0(src, static_cast<BlockQ4_0*>(dst), nb);
    case GgmlType::kQ4_1:
      return QuantQ4_1(src, static_cast<BlockQ4_1*>(dst), nb);
    case GgmlType::kQ5_0:
      return QuantQ5_0(src, static_cast<BlockQ5_0*>(dst), nb);
    case GgmlType::kQ5_1:
      return QuantQ5_1(src, static_cast<BlockQ5_1*>(dst), nb);
    case GgmlType::kQ8_0: {
      auto* b = static_cast<BlockQ8_0*>(dst);
      for (int64_t i = 0; i < nb; ++i) {
        float d;
        QuantQ8Block(src + i * kQK4, b[i].qs, &d);
        b[i].d = F32ToFp16(d);
      }
      return;
    }
    case GgmlType::kQ8_1: {
      auto* b = static_cast<BlockQ8_1*>(dst);
      for (int64_t i = 0; i < nb; ++i) {
        float d;
        const int sum = QuantQ8Block(src + i * kQK4, b[i].qs, &d);
        b[i].d = F32ToFp16(d);
        b[i].s = F32ToFp16(d * static_cast<float>(sum));
      }
      return;
    }
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
    case GgmlType::kQ8_K:
      return QuantizeRowK(type, src, dst, nb);
    default:
      CHECK(false) << "QuantizeRow: unsupported type " << TypeName(type);
  }
}

}  // namespace tachyon::kernels
