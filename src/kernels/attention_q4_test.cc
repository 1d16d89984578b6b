// The 4-bit KV dtypes (q4_0, q4_1): rounding within the block format's step, every kernel
// reading them exactly as f32 rows of their dequantized values, and attention against f32 KV
// within the propagated rounding error. (Kernels against the reference over many shapes:
// attention_test.cc, which runs every dtype.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/testing/kernel_testing.h"
#include "tensor/fp16.h"
#include "tensor/quant_blocks.h"
#include "util/cpu_features.h"

namespace tachyon::kernels {
namespace {

constexpr KvDtype kQ4Dtypes[] = {KvDtype::kQ4_0, KvDtype::kQ4_1};

// The rounding step of the 32-element block at x: q4_0 |d| = |max| / 8 (max: the element of
// largest magnitude), q4_1 d = (max - min) / 15; in f32, before d is stored as f16.
float BlockStep(KvDtype dtype, const float* x) {
  float amax = 0, mn = x[0], mx = x[0];
  for (int j = 0; j < 32; ++j) {
    amax = std::max(amax, std::fabs(x[j]));
    mn = std::min(mn, x[j]);
    mx = std::max(mx, x[j]);
  }
  return dtype == KvDtype::kQ4_0 ? amax / 8 : (mx - mn) / 15;
}

// The largest error of a stored element x, from the block format alone:
//   q4_0: x / d in [-8, 8] (d = max / -8) rounds to the nearest of -8 .. 7, so |x - x'| <=
//         |d| max(1/2, x / d - 7) (the top level, 8, is cut to 7); d stored as f16 (relative
//         error <= 2^-11) moves x' = d (q - 8) by at most 8 |d| 2^-11.
//   q4_1: (x - min) / d in [0, 15] rounds to the nearest integer: <= d / 2; d and min stored as
//         f16 add at most 15 d 2^-11 + |min| 2^-11.
// Plus 4 f32 roundings of |x| (the quantizer's products and sums).
float ElementBound(KvDtype dtype, const float* block, int j) {
  const float* x = block;
  const float u = std::ldexp(1.0f, -11), f32 = 4 * std::ldexp(1.0f, -24) * std::fabs(x[j]);
  if (dtype == KvDtype::kQ4_0) {
    float max = 0;
    for (int i = 0; i < 32; ++i) {
      if (std::fabs(x[i]) > std::fabs(max)) max = x[i];
    }
    const float d = max / -8;
    if (d == 0) return 0;
    return std::fabs(d) * (std::max(0.5f, x[j] / d - 7) + 8 * u) + f32;
  }
  const float mn = *std::min_element(x, x + 32), mx = *std::max_element(x, x + 32);
  const float d = (mx - mn) / 15;
  return d / 2 + 15 * d * u + std::fabs(mn) * u + f32;
}

// Stored q4 rows read back within the format's bound, element by element; a block of zeros,
// a constant block and blocks whose extremes have both signs round as the format says.
TEST(Q4KvTest, StoredRowsReadBackWithinTheBlockStep) {
  std::mt19937 rng(5);
  for (KvDtype d : kQ4Dtypes) {
    for (int64_t n : {32, 64, 96, 128, 1024}) {
      for (float sd : {1.0f, 1e-3f, 30.0f}) {
        std::vector<float> x = Randn(n, &rng, sd);
        if (n >= 96) {
          std::fill(x.begin(), x.begin() + 32, 0.0f);        // all zero: exact
          std::fill(x.begin() + 32, x.begin() + 64, 0.75f);  // constant
          for (int i = 66; i < 96; ++i) x[i] = 0.05f * static_cast<float>(i - 80);
          x[64] = 2.0f;  // both extremes: +2 at q = 0 (q4_0 d = -0.25), -2 cut to 7 d = -1.75
          x[65] = -2.0f;
        }
        const size_t rb = KvRowBytes(d, n);
        std::vector<uint8_t> bytes(rb);
        StoreKvRow(d, x.data(), bytes.data(), n);
        std::vector<float> back(n);
        LoadKvRowReference(d, bytes.data(), back.data(), n);
        for (int64_t i = 0; i < n; ++i) {
          const float* blk = x.data() + i / 32 * 32;
          ASSERT_LE(std::fabs(back[i] - x[i]), ElementBound(d, blk, static_cast<int>(i % 32)))
              << KvDtypeName(d) << " n " << n << " sd " << sd << " i " << i << " x " << x[i]
              << " back " << back[i];
        }
        if (n >= 96) {
          for (int i = 0; i < 32; ++i) ASSERT_EQ(back[i], 0.0f) << KvDtypeName(d);
          // q4_0: d = -0.09375, q = 0; q4_1: d = 0, m = 0.75 (both exact in f16).
          for (int i = 32; i < 64; ++i) ASSERT_EQ(back[i], 0.75f) << KvDtypeName(d);
          if (d == KvDtype::kQ4_0) {
            EXPECT_EQ(back[64], 2.0f);
            EXPECT_EQ(back[65], -1.75f);
          } else {  // d = 4 / 15 (f16 0.26660), q = 15 and 0
            EXPECT_NEAR(back[64], 2.0f, 2e-3f);
            EXPECT_EQ(back[65], -2.0f);
          }
        }
      }
    }
  }
}

// A paged layer in `dtype` with random rows, and the same layer as f32 rows holding exactly
// the dequantized values (LoadKvRowReference).
struct TwinKv {
  std::vector<uint8_t> k, v;
  std::vector<float> kf, vf;        // dequantized
  std::vector<float> k_raw, v_raw;  // before rounding
  PagedKv q4, f32;
  TwinKv(KvDtype dtype, int64_t n_blocks, int64_t bs, int64_t n_kv, int64_t hd, std::mt19937* rng) {
    const int64_t rows = n_blocks * bs * n_kv;
    const size_t rb = KvRowBytes(dtype, hd);
    k.resize(rows * rb);
    v.resize(rows * rb);
    k_raw = Randn(rows * hd, rng);
    v_raw = Randn(rows * hd, rng);
    kf.resize(rows * hd);
    vf.resize(rows * hd);
    for (int64_t r = 0; r < rows; ++r) {
      StoreKvRow(dtype, k_raw.data() + r * hd, k.data() + r * rb, hd);
      StoreKvRow(dtype, v_raw.data() + r * hd, v.data() + r * rb, hd);
      LoadKvRowReference(dtype, k.data() + r * rb, kf.data() + r * hd, hd);
      LoadKvRowReference(dtype, v.data() + r * rb, vf.data() + r * hd, hd);
    }
    q4 = {k.data(), v.data(), dtype, n_blocks, bs, n_kv, hd};
    f32 = {kf.data(), vf.data(), KvDtype::kF32, n_blocks, bs, n_kv, hd};
  }
};

// Every kernel converts q4 rows to exactly the floats of the scalar dequantizer (one FMA
// d * q + m, exact: d has 11 significant bits, q four), and the rest of its arithmetic does not
// depend on the dtype: attention over q4 KV equals, bit for bit, the same kernel over f32 KV
// holding the dequantized values. Decode jobs (<= 64 query vectors: the decode kernels),
// prefill jobs (the tile kernels, AMX where present), sliding windows, many KV tiles.
TEST(Q4KvTest, KernelsReadQ4ExactlyAsTheirDequantizedF32Rows) {
  struct Case {
    int64_t hd, n_group, pos_start, n_rows, window;
  };
  const Case cases[] = {{64, 4, 200, 1, 0}, {128, 1, 150, 3, 0}, {96, 8, 190, 2, 70},
                        {64, 2, 0, 40, 0},  {128, 8, 30, 20, 0}, {32, 16, 100, 33, 9},
                        {64, 7, 129, 1, 64}};
  std::mt19937 rng(9);
  for (KvDtype d : kQ4Dtypes) {
    for (const Case& c : cases) {
      const int64_t bs = 16, n_kv = 2, kv_head = 1;
      const int64_t nb = (c.pos_start + c.n_rows + bs - 1) / bs + 1;
      TwinKv kv(d, nb, bs, n_kv, c.hd, &rng);
      std::vector<int32_t> bt(nb);
      std::iota(bt.begin(), bt.end(), 0);
      std::shuffle(bt.begin(), bt.end(), rng);
      const int64_t stride = n_kv * c.n_group * c.hd;
      const auto q = Randn(c.n_rows * stride, &rng);
      TileJob job;
      job.block_table = bt.data();
      job.kv_head = kv_head;
      job.pos_start = c.pos_start;
      job.n_rows = c.n_rows;
      job.row_stride = stride;
      job.q = q.data() + kv_head * c.n_group * c.hd;
      const TileParams tp{c.n_group, 1.0f / std::sqrt(static_cast<float>(c.hd)), c.window};
      for (SimdLevel level : SimdLevelsUpTo(SimdLevel::kAmx)) {
        std::vector<float> got(q.size(), 0.0f), want(q.size(), 0.0f);
        std::vector<float> scratch(TileScratchFloats(kv.q4, job, tp));
        job.out = want.data() + kv_head * c.n_group * c.hd;
        AttendTileAtLevel(level)(kv.f32, job, tp, scratch.data());
        job.out = got.data() + kv_head * c.n_group * c.hd;
        AttendTileAtLevel(level)(kv.q4, job, tp, scratch.data());
        ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
            << KvDtypeName(d) << " " << SimdLevelName(level) << " hd " << c.hd << " group "
            << c.n_group << " rows " << c.n_rows;
      }
    }
  }
}

// Attention over q4 KV against attention over the unrounded f32 rows, both with the double
// reference. The tolerance is the first-order propagation of the rounding: each stored element
// carries an error e of its block's step h (q4_0 |d|, q4_1 d), modelled as uniform, variance
// h^2 / 12, independent. A score moves by ds_j = scale sum_e q_e eK_je and an output by
//   do = sum_j p_j (ds_j (v_j - o) + eV_j),
//   Var(do) = sum_j p_j^2 ((v_j - o)^2 Var(ds_j) + h_Vj^2 / 12),  Var(ds_j) = scale^2 sum_e
//   q_e^2 h_Kje^2 / 12,
// and every output must be within 6 standard deviations of it (plus 1e-5). This is not a
// worst-case bound (all errors aligned give one many times looser); the test also reports the
// largest |do| / sd seen. Diffuse (N(0, 1) queries) and peaky (x 3) weights, 1 .. 300 keys.
TEST(Q4KvTest, AttentionStaysWithinThePropagatedRoundingError) {
  const int64_t hd = 64, n_kv = 1, n_group = 4, bs = 16;
  std::mt19937 rng(21);
  for (KvDtype d : kQ4Dtypes) {
    double worst_ratio = 0;
    for (int64_t n_ctx : {1, 7, 100, 300}) {
      for (float qs : {1.0f, 3.0f}) {
        const int64_t nb = (n_ctx + bs - 1) / bs;
        TwinKv kv(d, nb, bs, n_kv, hd, &rng);
        PagedKv raw{kv.k_raw.data(), kv.v_raw.data(), KvDtype::kF32, nb, bs, n_kv, hd};
        std::vector<int32_t> bt(nb);
        std::iota(bt.begin(), bt.end(), 0);
        const auto q = Randn(n_group * hd, &rng, qs);
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        std::vector<float> want(q.size()), got(q.size()), scores(n_group * n_ctx);
        GroupJob job{bt.data(), 0, 0, n_ctx, q.data(), want.data()};
        AttendGroupReference(raw, job, n_group, scale, scores.data());
        job.out = got.data();
        AttendGroupReference(kv.q4, job, n_group, scale, scores.data());
        // Rows of position t (block table is the identity): row t of head 0.
        auto row = [&](const std::vector<float>& base, int64_t t) { return base.data() + t * hd; };
        auto steps = [&](const float* x) {
          std::vector<double> h(hd);
          for (int64_t e = 0; e < hd; ++e) h[e] = BlockStep(d, x + e / 32 * 32);
          return h;
        };
        for (int64_t g = 0; g < n_group; ++g) {
          const float* qg = q.data() + g * hd;
          std::vector<double> p(n_ctx), var_s(n_ctx);
          std::vector<std::vector<double>> hv(n_ctx);
          double mx = -1e300;
          for (int64_t t = 0; t < n_ctx; ++t) {
            const float* k = row(kv.k_raw, t);
            const auto hk = steps(k);
            double dot = 0, vs = 0;
            for (int64_t e = 0; e < hd; ++e) {
              dot += double(qg[e]) * k[e];
              vs += double(qg[e]) * qg[e] * hk[e] * hk[e] / 12;
            }
            p[t] = dot * scale;
            var_s[t] = vs * scale * scale;
            mx = std::max(mx, p[t]);
            hv[t] = steps(row(kv.v_raw, t));
          }
          double sum = 0;
          for (double& x : p) sum += (x = std::exp(x - mx));
          for (double& x : p) x /= sum;
          for (int64_t e = 0; e < hd; ++e) {
            const double o = want[g * hd + e];
            double var = 0;
            for (int64_t t = 0; t < n_ctx; ++t) {
              const double dv = row(kv.v_raw, t)[e] - o;
              var += p[t] * p[t] * (dv * dv * var_s[t] + hv[t][e] * hv[t][e] / 12);
            }
            const double sd = std::sqrt(var), err = std::fabs(got[g * hd + e] - o);
            ASSERT_LE(err, 6 * sd + 1e-5) << KvDtypeName(d) << " ctx " << n_ctx << " q x" << qs
                                          << " head " << g << " e " << e << " sd " << sd;
            if (sd > 0) worst_ratio = std::max(worst_ratio, err / sd);
          }
        }
      }
    }
    std::printf("%s: largest |error| / sd %.2f\n", KvDtypeName(d), worst_ratio);
    EXPECT_GT(worst_ratio, 0.0) << KvDtypeName(d) << " rounds nothing?";
  }
}

}  // namespace
}  // namespace tachyon::kernels
