#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/attention_tile.h"
#include "util/cpu_features.h"
#include "util/thread_pool.h"

namespace tachyon::kernels {
namespace {

const KvDtype kAllDtypes[] = {KvDtype::kF32, KvDtype::kF16, KvDtype::kBf16, KvDtype::kQ8_0};

std::vector<SimdLevel> Levels() {
  std::vector<SimdLevel> l = {SimdLevel::kScalar};
  if (DetectedCpuFeatures().HasAvx2Set()) l.push_back(SimdLevel::kAvx2);
  if (DetectedCpuFeatures().HasAvx512Set()) l.push_back(SimdLevel::kAvx512);
  return l;
}

// head_dims to test for a dtype: odd ones for the float types, multiples of 32 for q8_0.
std::vector<int64_t> HeadDims(KvDtype dtype) {
  if (dtype == KvDtype::kQ8_0) return {32, 64, 96, 128};
  return {1, 2, 3, 7, 15, 16, 17, 31, 33, 64, 127, 128, 129};
}

// A paged KV store of one layer in `dtype`, filled with N(0, 1) values rounded through the
// dtype; `kr` / `vr` keep the rounded values as floats in the same layout (f32 rows).
struct TestKv {
  std::vector<uint8_t> k, v;
  std::vector<float> kr, vr;
  PagedKv view;
  TestKv(KvDtype dtype, int64_t n_blocks, int64_t block_size, int64_t n_kv_heads, int64_t head_dim,
         std::mt19937* rng) {
    std::normal_distribution<float> dist(0.0f, 1.0f);
    const int64_t rows = n_blocks * block_size * n_kv_heads;
    const size_t rb = KvRowBytes(dtype, head_dim);
    k.resize(rows * rb);
    v.resize(rows * rb);
    kr.resize(rows * head_dim);
    vr.resize(rows * head_dim);
    std::vector<float> x(head_dim);
    for (int64_t r = 0; r < rows; ++r) {
      for (auto [bytes, rounded] : {std::pair{&k, &kr}, std::pair{&v, &vr}}) {
        for (auto& e : x) e = dist(*rng);
        StoreKvRowReference(dtype, x.data(), bytes->data() + r * rb, head_dim);
        LoadKvRowReference(dtype, bytes->data() + r * rb, rounded->data() + r * head_dim, head_dim);
      }
    }
    view = {k.data(), v.data(), dtype, n_blocks, block_size, n_kv_heads, head_dim};
  }
  // Rounded K (or V) of position p, head h, under block table bt.
  const float* Row(const std::vector<float>& base, const std::vector<int32_t>& bt, int64_t p,
                   int64_t h) const {
    const int64_t b = bt[p / view.block_size];
    return base.data() +
           ((b * view.n_kv_heads + h) * view.block_size + p % view.block_size) * view.head_dim;
  }
};

std::vector<int32_t> ShuffledTable(int64_t n_blocks, std::mt19937* rng) {
  std::vector<int32_t> bt(n_blocks);
  std::iota(bt.begin(), bt.end(), 0);
  std::shuffle(bt.begin(), bt.end(), *rng);
  return bt;
}

std::vector<float> Randn(size_t n, std::mt19937* rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(*rng);
  return v;
}

TEST(KvDtypeTest, NamesParseAndSizes) {
  for (KvDtype d : kAllDtypes) {
    auto parsed = ParseKvDtype(KvDtypeName(d));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, d);
  }
  EXPECT_EQ(*ParseKvDtype("F16"), KvDtype::kF16);
  auto bad = ParseKvDtype("int4");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("q8_0"), std::string::npos);
  EXPECT_EQ(KvRowBytes(KvDtype::kF32, 64), 256u);
  EXPECT_EQ(KvRowBytes(KvDtype::kF16, 64), 128u);
  EXPECT_EQ(KvRowBytes(KvDtype::kBf16, 7), 14u);
  EXPECT_EQ(KvRowBytes(KvDtype::kQ8_0, 64), 68u);
  EXPECT_TRUE(CheckKvDtype(KvDtype::kQ8_0, 128).ok());
  const Status st = CheckKvDtype(KvDtype::kQ8_0, 48);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("multiple of 32"), std::string::npos);
  EXPECT_TRUE(CheckKvDtype(KvDtype::kF16, 48).ok());
  EXPECT_FALSE(CheckKvDtype(KvDtype::kF16, 0).ok());
}

// The dispatched (SIMD) conversion writes exactly the reference's bytes, and a stored row
// reads back within the dtype's rounding.
TEST(KvDtypeTest, StoreMatchesReferenceBytes) {
  std::mt19937 rng(3);
  for (KvDtype d : kAllDtypes) {
    std::vector<int64_t> sizes = {32, 64, 96, 1024};
    if (d != KvDtype::kQ8_0) {
      sizes = {1, 2, 3, 7, 15, 16, 17, 31, 33, 127, 129, 1023};
    }
    for (int64_t n : sizes) {
      std::vector<float> x = Randn(n, &rng);
      for (int64_t i = 0; i < n; i += 5) x[i] *= 1e-6f;  // small values (f16 subnormals)
      if (d == KvDtype::kQ8_0) {
        // amax 127 gives scale 1: x.5 values are exact ties, rounded away from zero.
        x[0] = 127.0f;
        x[1] = 0.5f;
        x[2] = -2.5f;
        x[3] = 3.5f;
      }
      const size_t rb = KvRowBytes(d, n);
      std::vector<uint8_t> ref(rb), got(rb, 0xAB);
      StoreKvRowReference(d, x.data(), ref.data(), n);
      StoreKvRow(d, x.data(), got.data(), n);
      ASSERT_EQ(0, std::memcmp(ref.data(), got.data(), rb)) << KvDtypeName(d) << " n " << n;
      std::vector<float> back(n);
      LoadKvRowReference(d, got.data(), back.data(), n);
      const float rel = d == KvDtype::kF32    ? 0.0f
                        : d == KvDtype::kF16  ? 1.0f / 2048
                        : d == KvDtype::kBf16 ? 1.0f / 256
                                              : 0.0f;
      for (int64_t i = 0; i < n; ++i) {
        if (d == KvDtype::kQ8_0) {
          // Half a quantization step of the 32-block, plus the f16 rounding of the scale.
          float amax = 0;
          for (int64_t j = i / 32 * 32; j < i / 32 * 32 + 32; ++j)
            amax = std::max(amax, std::fabs(x[j]));
          ASSERT_NEAR(back[i], x[i], amax / 127 * 0.5f + amax * 1e-3f) << "n " << n << " i " << i;
        } else {
          ASSERT_NEAR(back[i], x[i], rel * std::fabs(x[i]) + 1e-7f) << KvDtypeName(d) << " i " << i;
        }
      }
      if (d == KvDtype::kQ8_0) {
        EXPECT_EQ(back[1], 1.0f);
        EXPECT_EQ(back[2], -3.0f);
        EXPECT_EQ(back[3], 4.0f);
      }
    }
  }
}

// Dense causal attention from the definition over the rounded floats, one sequence.
std::vector<float> DenseAttention(const TestKv& kv, const std::vector<int32_t>& bt, const float* q,
                                  int64_t pos_start, int64_t n_tokens, int64_t n_heads,
                                  int64_t window) {
  const int64_t hd = kv.view.head_dim, group = n_heads / kv.view.n_kv_heads;
  std::vector<float> out(n_tokens * n_heads * hd, 0.0f);
  for (int64_t i = 0; i < n_tokens; ++i) {
    const int64_t pos = pos_start + i;
    const int64_t lo = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
    for (int64_t h = 0; h < n_heads; ++h) {
      const float* qh = q + (i * n_heads + h) * hd;
      std::vector<double> w;
      for (int64_t p = lo; p <= pos; ++p) {
        const float* k = kv.Row(kv.kr, bt, p, h / group);
        double d = 0;
        for (int64_t j = 0; j < hd; ++j) d += double(qh[j]) * k[j];
        w.push_back(d / std::sqrt(double(hd)));
      }
      const double mx = *std::max_element(w.begin(), w.end());
      double sum = 0;
      for (auto& x : w) sum += (x = std::exp(x - mx));
      std::vector<double> o(hd, 0.0);
      for (int64_t p = lo; p <= pos; ++p) {
        const float* v = kv.Row(kv.vr, bt, p, h / group);
        for (int64_t j = 0; j < hd; ++j) o[j] += w[p - lo] / sum * v[j];
      }
      for (int64_t j = 0; j < hd; ++j) out[(i * n_heads + h) * hd + j] = static_cast<float>(o[j]);
    }
  }
  return out;
}

// The reference reads each dtype through LoadKvRowReference: it must equal dense attention
// over the rounded values.
TEST(AttentionTest, ReferenceMatchesDenseForEveryDtype) {
  std::mt19937 rng(11);
  for (KvDtype d : kAllDtypes) {
    const int64_t hd = 64, n_kv = 2, n_group = 3, bs = 16, nb = 5;
    TestKv kv(d, nb, bs, n_kv, hd, &rng);
    auto bt = ShuffledTable(nb, &rng);
    const int64_t pos = 70;
    auto q = Randn(n_kv * n_group * hd, &rng);
    auto want = DenseAttention(kv, bt, q.data(), pos, 1, n_kv * n_group, 0);
    std::vector<float> got(q.size()), scores(n_group * (pos + 1));
    for (int64_t h = 0; h < n_kv; ++h) {
      GroupJob job{
          bt.data(), h, 0, pos + 1, q.data() + h * n_group * hd, got.data() + h * n_group * hd};
      AttendGroupReference(kv.view, job, n_group, 1.0f / std::sqrt(float(hd)), scores.data());
    }
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-5f) << KvDtypeName(d) << " i " << i;
    }
  }
}

// Every tile kernel against the reference, per dtype: odd head_dims, GQA ratios 1/2/3/4/7/8,
// block sizes 1/16/32, prompts from position 0, decode rows and chunks after cached blocks,
// with and without a sliding window.
TEST(AttentionTest, TileKernelsMatchReference) {
  struct Case {
    int64_t pos_start, n_rows, window;
  };
  const Case cases[] = {{0, 1, 0}, {0, 9, 0}, {37, 1, 0}, {21, 12, 0}, {30, 5, 7}};
  const int64_t block_sizes[] = {1, 16, 32};
  const std::vector<SimdLevel> levels = Levels();
  std::mt19937 rng(42);
  int combo = 0;
  for (KvDtype d : kAllDtypes) {
    for (int64_t hd : HeadDims(d)) {
      for (int64_t n_group : {1, 2, 3, 4, 7, 8}) {
        const int64_t bs = block_sizes[combo++ % 3];
        const int64_t n_kv = 2, kv_head = 1, max_pos = 42;
        const int64_t nb = (max_pos + bs - 1) / bs + 1;
        TestKv kv(d, nb, bs, n_kv, hd, &rng);
        auto bt = ShuffledTable(nb, &rng);
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        for (const Case& c : cases) {
          const int64_t stride = n_kv * n_group * hd;
          auto q = Randn(c.n_rows * stride, &rng);
          // The reference, once per case: [n_rows, n_group * hd].
          std::vector<float> want(c.n_rows * n_group * hd);
          std::vector<float> scores(n_group * (c.pos_start + c.n_rows));
          for (int64_t r = 0; r < c.n_rows; ++r) {
            const int64_t pos = c.pos_start + r;
            GroupJob gj{bt.data(),
                        kv_head,
                        c.window > 0 ? std::max<int64_t>(0, pos + 1 - c.window) : 0,
                        pos + 1,
                        q.data() + r * stride + kv_head * n_group * hd,
                        want.data() + r * n_group * hd};
            AttendGroupReference(kv.view, gj, n_group, scale, scores.data());
          }
          for (SimdLevel level : levels) {
            std::vector<float> got(q.size(), -7.0f);
            TileJob job;
            job.block_table = bt.data();
            job.kv_head = kv_head;
            job.pos_start = c.pos_start;
            job.n_rows = c.n_rows;
            job.row_stride = stride;
            job.q = q.data() + kv_head * n_group * hd;
            job.out = got.data() + kv_head * n_group * hd;
            const TileParams tp{n_group, scale, c.window};
            std::vector<float> scratch(TileScratchFloats(kv.view, job, tp));
            AttendTileAtLevel(level)(kv.view, job, tp, scratch.data());
            for (int64_t r = 0; r < c.n_rows; ++r) {
              for (int64_t i = 0; i < n_group * hd; ++i) {
                const float w = want[r * n_group * hd + i];
                ASSERT_NEAR(job.out[r * stride + i], w, 1e-4f * (1 + std::fabs(w)))
                    << SimdLevelName(level) << " " << KvDtypeName(d) << " hd " << hd << " group "
                    << n_group << " bs " << bs << " pos " << c.pos_start + r << " i " << i;
              }
              ASSERT_EQ(got[r * stride], -7.0f);  // heads of the other KV head untouched
            }
          }
        }
      }
    }
  }
}

// Rounding K/V to each dtype moves attention by at most its per-dtype tolerance from the
// f32 result (N(0, 1) keys, values and queries, 100 positions).
TEST(AttentionTest, DtypesStayWithinToleranceOfF32) {
  struct Tol {
    KvDtype d;
    float max_abs;
  };
  const Tol tols[] = {{KvDtype::kF16, 2e-3f}, {KvDtype::kBf16, 2e-2f}, {KvDtype::kQ8_0, 3e-2f}};
  const int64_t hd = 128, n_kv = 1, n_group = 4, bs = 16, nb = 7, pos = 99;
  for (const Tol& t : tols) {
    std::mt19937 rng_a(5), rng_b(5);  // same draws: same underlying floats
    TestKv ref(KvDtype::kF32, nb, bs, n_kv, hd, &rng_a);
    TestKv low(t.d, nb, bs, n_kv, hd, &rng_b);
    std::mt19937 rng(6);
    auto bt = ShuffledTable(nb, &rng);
    auto q = Randn(n_group * hd, &rng);
    std::vector<float> a(q.size()), b(q.size()), scores(n_group * (pos + 1));
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    GroupJob job{bt.data(), 0, 0, pos + 1, q.data(), a.data()};
    AttendGroupReference(ref.view, job, n_group, scale, scores.data());
    job.out = b.data();
    AttendGroupReference(low.view, job, n_group, scale, scores.data());
    float worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
    EXPECT_LT(worst, t.max_abs) << KvDtypeName(t.d);
    EXPECT_GT(worst, 0.0f) << KvDtypeName(t.d) << " rounds nothing?";
  }
}

TEST(AttentionTest, PagedBatchMatchesDenseAttention) {
  const int64_t bs = 4, n_kv = 2, n_heads = 8, hd = 32;
  // Three sequences with disjoint blocks: a prompt, a decode step, a chunk after a cache.
  struct Case {
    int64_t pos_start, n_tokens;
  };
  const std::vector<Case> cases = {{0, 41}, {29, 1}, {13, 9}};
  for (SimdLevel level : Levels()) {
    for (KvDtype d : kAllDtypes) {
      std::mt19937 rng(7);
      TestKv kv(d, 40, bs, n_kv, hd, &rng);
      auto all_blocks = ShuffledTable(40, &rng);
      for (int64_t window : {0, 5}) {
        for (int threads : {1, 2, 3}) {
          ThreadPool pool(threads);
          AttentionScratch scratch;
          std::vector<std::vector<int32_t>> tables;
          std::vector<std::vector<float>> qs, outs;
          std::vector<AttentionSeq> seqs;
          size_t next_block = 0;
          for (const Case& c : cases) {
            const int64_t nb = (c.pos_start + c.n_tokens + bs - 1) / bs;
            tables.emplace_back(all_blocks.begin() + next_block,
                                all_blocks.begin() + next_block + nb);
            next_block += nb;
            qs.push_back(Randn(c.n_tokens * n_heads * hd, &rng));
            outs.emplace_back(qs.back().size(), -1.0f);
          }
          for (size_t s = 0; s < cases.size(); ++s) {
            seqs.push_back({tables[s].data(), cases[s].pos_start, cases[s].n_tokens, qs[s].data(),
                            outs[s].data()});
          }
          AttentionParams params{n_heads, 1.0f / std::sqrt(float(hd)), window};
          PagedAttentionAtLevel(level, kv.view, params, seqs.data(), seqs.size(), &pool, &scratch);
          for (size_t s = 0; s < cases.size(); ++s) {
            auto want = DenseAttention(kv, tables[s], qs[s].data(), cases[s].pos_start,
                                       cases[s].n_tokens, n_heads, window);
            for (size_t i = 0; i < want.size(); ++i) {
              ASSERT_NEAR(outs[s][i], want[i], 1e-4)
                  << SimdLevelName(level) << " " << KvDtypeName(d) << " seq " << s << " i " << i
                  << " window " << window << " threads " << threads;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tachyon::kernels
