// Reference K-quant quantizers. Each sub-block gets a small scale search (candidate scales
// around the min/max fit, each refined by least squares; the lowest squared error wins),
// then the sub-block scales are themselves quantized to the format's 4/6/8-bit codes and
// the elements re-quantized against the scales actually stored.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/quantize_internal.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"
#include "util/logging.h"

namespace tachyon::kernels {
namespace {

int Clamp(int v, int lo, int hi) {
  return std::min(hi, std::max(lo, v));
}
int Nearest(float v) {
  return static_cast<int>(std::lrintf(v));
}

// Fits x[n] ~= scale * q - neg_min with q in [0, nmax], scale >= 0, neg_min >= 0.
void FitAffine(const float* x, int n, int nmax, float* scale, float* neg_min) {
  float mn = x[0], mx = x[0];
  for (int i = 1; i < n; ++i) {
    mn = std::min(mn, x[i]);
    mx = std::max(mx, x[i]);
  }
  mn = std::min(mn, 0.0f);
  if (mx <= mn) {
    *scale = 0.0f;
    *neg_min = -mn;
    return;
  }
  float best_err = INFINITY, best_s = (mx - mn) / nmax, best_m = mn;
  int q[32];
  for (int t = -4; t <= 4; ++t) {
    const float is = (nmax + 0.1f * t) / (mx - mn);
    for (int i = 0; i < n; ++i) q[i] = Clamp(Nearest((x[i] - mn) * is), 0, nmax);
    // Least squares for (s, m) in x ~= s q + m with m <= 0.
    double sq = 0, sqq = 0, sx = 0, sqx = 0;
    for (int i = 0; i < n; ++i) {
      sq += q[i];
      sqq += static_cast<double>(q[i]) * q[i];
      sx += x[i];
      sqx += static_cast<double>(q[i]) * x[i];
    }
    const double det = n * sqq - sq * sq;
    double s = 0, m = 0;
    if (det > 0) {
      s = (n * sqx - sq * sx) / det;
      m = (sqq * sx - sq * sqx) / det;
    }
    if (m > 0 || det <= 0) {
      m = 0;
      s = sqq > 0 ? sqx / sqq : 0;
    }
    if (s <= 0) continue;
    double err = 0;
    for (int i = 0; i < n; ++i) {
      const int qi =
          Clamp(Nearest((x[i] - static_cast<float>(m)) / static_cast<float>(s)), 0, nmax);
      const double e = s * qi + m - x[i];
      err += e * e;
    }
    if (err < best_err) {
      best_err = err;
      best_s = static_cast<float>(s);
      best_m = static_cast<float>(m);
    }
  }
  *scale = best_s;
  *neg_min = -best_m;
}

// Fits x[n] ~= scale * q with q in [-nlo, nlo - 1]; scale may be negative.
float FitSymmetric(const float* x, int n, int nlo) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax == 0) return 0.0f;
  float best_s = max / -nlo;
  double best_err = INFINITY;
  for (int t = -4; t <= 4; ++t) {
    const float is = -(nlo + 0.1f * t) / max;
    double sqx = 0, sqq = 0;
    for (int i = 0; i < n; ++i) {
      const int q = Clamp(Nearest(x[i] * is), -nlo, nlo - 1);
      sqx += static_cast<double>(q) * x[i];
      sqq += static_cast<double>(q) * q;
    }
    if (sqq == 0) continue;
    const float s = static_cast<float>(sqx / sqq);
    double err = 0;
    for (int i = 0; i < n; ++i) {
      const int q = Clamp(Nearest(x[i] / s), -nlo, nlo - 1);
      const double e = static_cast<double>(s) * q - x[i];
      err += e * e;
    }
    if (err < best_err) {
      best_err = err;
      best_s = s;
    }
  }
  return best_s;
}

// Quantizes affine sub-block scales/mins (n_sub of `sub` elements) to `bits`-bit codes and
// the elements to q in [0, nmax] against the stored values. Returns d and dmin.
void AffineSuper(const float* x, int n_sub, int sub, int nmax, int code_max, uint16_t* d_out,
                 uint16_t* dmin_out, uint8_t* sc, uint8_t* mn, uint8_t* q) {
  float s[16], m[16], max_s = 0, max_m = 0;
  for (int j = 0; j < n_sub; ++j) {
    FitAffine(x + j * sub, sub, nmax, &s[j], &m[j]);
    max_s = std::max(max_s, s[j]);
    max_m = std::max(max_m, m[j]);
  }
  const float d = max_s / code_max, dmin = max_m / code_max;
  *d_out = F32ToFp16(d);
  *dmin_out = F32ToFp16(dmin);
  const float dq = Fp16ToF32(*d_out), dminq = Fp16ToF32(*dmin_out);
  for (int j = 0; j < n_sub; ++j) {
    sc[j] = static_cast<uint8_t>(d > 0 ? Clamp(Nearest(s[j] / d), 0, code_max) : 0);
    mn[j] = static_cast<uint8_t>(dmin > 0 ? Clamp(Nearest(m[j] / dmin), 0, code_max) : 0);
    const float es = dq * sc[j], em = dminq * mn[j];
    for (int i = 0; i < sub; ++i) {
      const float v = x[j * sub + i];
      q[j * sub + i] = static_cast<uint8_t>(es > 0 ? Clamp(Nearest((v + em) / es), 0, nmax) : 0);
    }
  }
}

// Symmetric sub-blocks: signed scale codes in [-code_lo, code_lo - 1], q in [-nlo, nlo - 1]
// stored with +nlo. Returns d.
uint16_t SymmetricSuper(const float* x, int n_sub, int sub, int nlo, int code_lo, int8_t* sc,
                        uint8_t* q) {
  float s[16], smax = 0, sabs = 0;
  for (int j = 0; j < n_sub; ++j) {
    s[j] = FitSymmetric(x + j * sub, sub, nlo);
    if (std::fabs(s[j]) > sabs) {
      sabs = std::fabs(s[j]);
      smax = s[j];
    }
  }
  const float d = smax / -code_lo;
  const uint16_t dh = F32ToFp16(d);
  const float dq = Fp16ToF32(dh);
  for (int j = 0; j < n_sub; ++j) {
    sc[j] = static_cast<int8_t>(d != 0 ? Clamp(Nearest(s[j] / d), -code_lo, code_lo - 1) : 0);
    const float es = dq * sc[j];
    for (int i = 0; i < sub; ++i) {
      const int v = es != 0 ? Clamp(Nearest(x[j * sub + i] / es), -nlo, nlo - 1) : 0;
      q[j * sub + i] = static_cast<uint8_t>(v + nlo);
    }
  }
  return dh;
}

void QuantQ2_K(const float* x, BlockQ2_K* b) {
  uint8_t sc[16], mn[16], q[kQK];
  AffineSuper(x, 16, 16, 3, 15, &b->d, &b->dmin, sc, mn, q);
  for (int j = 0; j < 16; ++j) b->scales[j] = static_cast<uint8_t>(sc[j] | (mn[j] << 4));
  std::memset(b->qs, 0, sizeof(b->qs));
  for (int e = 0; e < kQK; ++e) {
    const int half = e / 128, s = (e % 128) / 32, l = e % 32;
    b->qs[half * 32 + l] |= static_cast<uint8_t>(q[e] << (2 * s));
  }
}

void QuantQ3_K(const float* x, BlockQ3_K* b) {
  int8_t sc[16];
  uint8_t q[kQK];
  b->d = SymmetricSuper(x, 16, 16, 4, 32, sc, q);
  std::memset(b->scales, 0, sizeof(b->scales));
  for (int i = 0; i < 16; ++i) {
    const int u = sc[i] + 32;
    if (i < 8) {
      b->scales[i] |= static_cast<uint8_t>(u & 0xF);
    } else {
      b->scales[i - 8] |= static_cast<uint8_t>((u & 0xF) << 4);
    }
    b->scales[8 + i % 4] |= static_cast<uint8_t>((u >> 4) << (2 * (i / 4)));
  }
  std::memset(b->qs, 0, sizeof(b->qs));
  std::memset(b->hmask, 0, sizeof(b->hmask));
  for (int e = 0; e < kQK; ++e) {
    const int half = e / 128, s = (e % 128) / 32, l = e % 32;
    b->qs[half * 32 + l] |= static_cast<uint8_t>((q[e] & 3) << (2 * s));
    b->hmask[l] |= static_cast<uint8_t>((q[e] >> 2) << (4 * half + s));
  }
}

void PackScaleMinK4(const uint8_t sc[8], const uint8_t mn[8], uint8_t* s) {
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<uint8_t>((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((mn[j + 4] & 0xF) << 4));
  }
}

void QuantQ4_K(const float* x, BlockQ4_K* b) {
  uint8_t sc[8], mn[8], q[kQK];
  AffineSuper(x, 8, 32, 15, 63, &b->d, &b->dmin, sc, mn, q);
  PackScaleMinK4(sc, mn, b->scales);
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      b->qs[32 * c + l] = static_cast<uint8_t>(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
    }
  }
}

void QuantQ5_K(const float* x, BlockQ5_K* b) {
  uint8_t sc[8], mn[8], q[kQK];
  AffineSuper(x, 8, 32, 31, 63, &b->d, &b->dmin, sc, mn, q);
  PackScaleMinK4(sc, mn, b->scales);
  std::memset(b->qh, 0, sizeof(b->qh));
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t q0 = q[64 * c + l], q1 = q[64 * c + 32 + l];
      b->qs[32 * c + l] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
      b->qh[l] |= static_cast<uint8_t>(((q0 >> 4) << (2 * c)) | ((q1 >> 4) << (2 * c + 1)));
    }
  }
}

void QuantQ6_K(const float* x, BlockQ6_K* b) {
  uint8_t q[kQK];
  b->d = SymmetricSuper(x, 16, 16, 32, 128, b->scales, q);
  std::memset(b->ql, 0, sizeof(b->ql));
  std::memset(b->qh, 0, sizeof(b->qh));
  for (int e = 0; e < kQK; ++e) {
    const int half = e / 128, s = (e % 128) / 32, l = e % 32;
    const int lo = q[e] & 0xF;
    b->ql[64 * half + l + 32 * (s & 1)] |= static_cast<uint8_t>(s < 2 ? lo : lo << 4);
    b->qh[32 * half + l] |= static_cast<uint8_t>((q[e] >> 4) << (2 * s));
  }
}

void QuantQ8_K(const float* x, BlockQ8_K* b) {
  float max = 0, amax = 0;
  for (int i = 0; i < kQK; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax == 0) {
    std::memset(b, 0, sizeof(*b));
    return;
  }
  const float is = -128.0f / max;
  for (int i = 0; i < kQK; ++i) b->qs[i] = static_cast<int8_t>(std::min(127, Nearest(is * x[i])));
  for (int j = 0; j < kQK / 16; ++j) {
    int sum = 0;
    for (int i = 0; i < 16; ++i) sum += b->qs[16 * j + i];
    b->bsums[j] = static_cast<int16_t>(sum);
  }
  b->d = 1.0f / is;
}

}  // namespace

void QuantizeRowK(GgmlType type, const float* x, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    switch (type) {
      case GgmlType::kQ2_K:
        QuantQ2_K(x, static_cast<BlockQ2_K*>(dst) + i);
        break;
      case GgmlType::kQ3_K:
        QuantQ3_K(x, static_cast<BlockQ3_K*>(dst) + i);
        break;
      case GgmlType::kQ4_K:
        QuantQ4_K(x, static_cast<BlockQ4_K*>(dst) + i);
        break;
      case GgmlType::kQ5_K:
        QuantQ5_K(x, static_cast<BlockQ5_K*>(dst) + i);
        break;
      case GgmlType::kQ6_K:
        QuantQ6_K(x, static_cast<BlockQ6_K*>(dst) + i);
        break;
      case GgmlType::kQ8_K:
        QuantQ8_K(x, static_cast<BlockQ8_K*>(dst) + i);
        break;
      default:
        CHECK(false) << "QuantizeRowK: not a K-quant: " << TypeName(type);
    }
  }
}

}  // namespace tachyon::kernels
