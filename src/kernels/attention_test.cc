#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/attention_tile.h"
#include "kernels/testing/kernel_testing.h"
#include "tensor/fp16.h"
#include "util/cpu_features.h"
#include "util/thread_pool.h"

namespace tachyon::kernels {
namespace {

const KvDtype kAllDtypes[] = {KvDtype::kF32,  KvDtype::kF16,  KvDtype::kBf16,
                              KvDtype::kQ8_0, KvDtype::kQ4_0, KvDtype::kQ4_1};

// head_dims to test for a dtype: odd ones for the float types, multiples of 32 for the
// blocked ones (q8_0, q4_0, q4_1).
std::vector<int64_t> HeadDims(KvDtype dtype) {
  if (KvDtypeIsBlocked(dtype)) return {32, 64, 96, 128};
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

// New tokens of one sequence of a batch: positions [pos_start, pos_start + n_tokens).
struct SeqCase {
  int64_t pos_start, n_tokens;
};

// A PagedAttention batch over `cases`: each sequence takes the next run of `blocks` for its
// table, random queries of `q_width` floats per token and outputs filled with -1.
struct TestBatch {
  std::vector<std::vector<int32_t>> tables;
  std::vector<std::vector<float>> qs, outs;
  std::vector<AttentionSeq> seqs;
  TestBatch(const std::vector<SeqCase>& cases, const std::vector<int32_t>& blocks, int64_t bs,
            int64_t q_width, std::mt19937* rng) {
    size_t next_block = 0;
    for (const SeqCase& c : cases) {
      const int64_t nb = (c.pos_start + c.n_tokens + bs - 1) / bs;
      tables.emplace_back(blocks.begin() + next_block, blocks.begin() + next_block + nb);
      next_block += nb;
      qs.push_back(Randn(c.n_tokens * q_width, rng));
      outs.emplace_back(qs.back().size(), -1.0f);
    }
    for (size_t s = 0; s < cases.size(); ++s) {  // pointers into the finished vectors
      seqs.push_back({tables[s].data(), cases[s].pos_start, cases[s].n_tokens, qs[s].data(),
                      outs[s].data()});
    }
  }
  TestBatch(const TestBatch&) = delete;
  TestBatch& operator=(const TestBatch&) = delete;
};

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
  EXPECT_EQ(KvRowBytes(KvDtype::kQ4_0, 64), 36u);  // 2 x {f16 d, 16 bytes}
  EXPECT_EQ(KvRowBytes(KvDtype::kQ4_1, 64), 40u);  // 2 x {f16 d, f16 m, 16 bytes}
  for (KvDtype d : {KvDtype::kQ4_0, KvDtype::kQ4_1}) {
    EXPECT_TRUE(KvDtypeIsBlocked(d));
    EXPECT_TRUE(CheckKvDtype(d, 64).ok());
    for (int64_t hd : {8, 48, 80, 100}) {
      const Status q4 = CheckKvDtype(d, hd);
      ASSERT_FALSE(q4.ok()) << KvDtypeName(d) << " " << hd;
      EXPECT_NE(q4.ToString().find(std::string(KvDtypeName(d)) + " needs head_dim to be a "
                                                                 "multiple of 32"),
                std::string::npos)
          << q4.ToString();
    }
  }
  EXPECT_FALSE(KvDtypeIsBlocked(KvDtype::kBf16));
  EXPECT_NE(bad.status().ToString().find("q4_0, q4_1"), std::string::npos);
}

// The dispatched (SIMD) conversion writes exactly the reference's bytes, and a stored row
// reads back within the dtype's rounding.
TEST(KvDtypeTest, StoreMatchesReferenceBytes) {
  std::mt19937 rng(3);
  for (KvDtype d : kAllDtypes) {
    std::vector<int64_t> sizes = {32, 64, 96, 1024};
    if (!KvDtypeIsBlocked(d)) {
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
      if (d == KvDtype::kQ4_0 || d == KvDtype::kQ4_1) continue;  // bounds: attention_q4_test.cc
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

// A tile job of the tests below: rows [pos_start, pos_start + n_rows), sliding window.
struct JobCase {
  int64_t pos_start, n_rows, window;
};

// The reference outputs of the job's query rows for KV head kv_head: [n_rows, n_group * hd]
// (q: rows of `stride` floats holding every KV head's group).
std::vector<float> ReferenceJob(const TestKv& kv, const std::vector<int32_t>& bt, int64_t kv_head,
                                int64_t n_group, int64_t hd, const JobCase& c,
                                const std::vector<float>& q, int64_t stride, float scale) {
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
  return want;
}

// Runs the level's tile kernel on the job (scratch pre-filled with `fill`), checks each output
// against `want` (1e-4 relative) and that the other KV head's outputs (of two) stay untouched.
void CheckTileJob(SimdLevel level, const TestKv& kv, const std::vector<int32_t>& bt,
                  int64_t kv_head, int64_t n_group, int64_t hd, const JobCase& c,
                  const std::vector<float>& q, int64_t stride, float scale,
                  const std::vector<float>& want, float fill, const std::string& where) {
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
  std::vector<float> scratch(TileScratchFloats(kv.view, job, tp), fill);
  AttendTileAtLevel(level)(kv.view, job, tp, scratch.data());
  const int64_t other = (kv_head == 0 ? 1 : 0) * n_group * hd;
  for (int64_t r = 0; r < c.n_rows; ++r) {
    for (int64_t i = 0; i < n_group * hd; ++i) {
      const float w = want[r * n_group * hd + i];
      ASSERT_NEAR(job.out[r * stride + i], w, 1e-4f * (1 + std::fabs(w)))
          << SimdLevelName(level) << " " << where << " pos " << c.pos_start + r << " i " << i;
    }
    ASSERT_EQ(got[r * stride + other], -7.0f) << where;  // the other KV head untouched
  }
}

// Every tile kernel against the reference, per dtype: odd head_dims, GQA ratios 1/2/3/4/7/8,
// block sizes 1/16/32, prompts from position 0, decode rows and chunks after cached blocks,
// with and without a sliding window.
TEST(AttentionTest, TileKernelsMatchReference) {
  const JobCase cases[] = {{0, 1, 0}, {0, 9, 0}, {37, 1, 0}, {21, 12, 0}, {30, 5, 7}};
  const int64_t block_sizes[] = {1, 16, 32};
  const std::vector<SimdLevel> levels = SimdLevelsUpTo(SimdLevel::kAvx512);
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
        for (const JobCase& c : cases) {
          const int64_t stride = n_kv * n_group * hd;
          auto q = Randn(c.n_rows * stride, &rng);
          const auto want = ReferenceJob(kv, bt, kv_head, n_group, hd, c, q, stride, scale);
          for (SimdLevel level : levels) {
            CheckTileJob(level, kv, bt, kv_head, n_group, hd, c, q, stride, scale, want, 0.0f,
                         std::string(KvDtypeName(d)) + " hd " + std::to_string(hd) + " group " +
                             std::to_string(n_group) + " bs " + std::to_string(bs));
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

// Decode-shaped jobs (n_rows * n_group <= internal::kDecodeMaxQueries: the AVX-512 / AVX2
// decode kernels) at every level against the reference over contexts of many KV tiles: every
// dtype, head_dims with and without tails (bf16 at multiples of 32: the even / odd pair path),
// GQA groups 1/2/3/4/5/8/16 (slot groups of 8, 4, 2, 1 and a padded 3), block sizes that split
// tiles (7, 16), single rows and a few rows (speculative verify), sliding windows across
// tiles, scratch filled with NaN. With random keys the running maximum grows at some tiles
// (accumulator rescaled) and not at others; a third of the queries are scaled by 3 (peakier
// weights, where a wrong maximum or rescale shows most).
TEST(AttentionTest, DecodeJobsMatchReferenceOverManyTiles) {
  const JobCase cases[] = {{0, 1, 0},   {63, 1, 0},  {64, 1, 0}, {200, 1, 0},
                           {150, 3, 0}, {190, 2, 70}, {129, 1, 64}};
  const std::vector<SimdLevel> levels = SimdLevelsUpTo(SimdLevel::kAvx512);
  std::mt19937 rng(17);
  int combo = 0;
  for (KvDtype d : kAllDtypes) {
    const std::vector<int64_t> hds = KvDtypeIsBlocked(d) ? std::vector<int64_t>{32, 64, 96}
                                                         : std::vector<int64_t>{17, 64, 80, 96};
    for (int64_t hd : hds) {
      for (int64_t n_group : {1, 2, 3, 4, 5, 8, 16}) {
        const int64_t bs = combo++ % 2 ? 16 : 7;
        const int64_t n_kv = 2, kv_head = 0, max_pos = 210;
        const int64_t nb = (max_pos + bs - 1) / bs + 1;
        TestKv kv(d, nb, bs, n_kv, hd, &rng);
        auto bt = ShuffledTable(nb, &rng);
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        for (const JobCase& c : cases) {
          const int64_t stride = n_kv * n_group * hd;
          auto q = Randn(c.n_rows * stride, &rng);
          if (combo % 3 == 0) {
            for (float& x : q) x *= 3.0f;  // peakier weights: the max matters more
          }
          const auto want = ReferenceJob(kv, bt, kv_head, n_group, hd, c, q, stride, scale);
          for (SimdLevel level : levels) {
            // Scratch starts as NaN: the kernel must not read what it did not write.
            CheckTileJob(level, kv, bt, kv_head, n_group, hd, c, q, stride, scale, want,
                         std::numeric_limits<float>::quiet_NaN(),
                         std::string(KvDtypeName(d)) + " hd " + std::to_string(hd) + " group " +
                             std::to_string(n_group) + " bs " + std::to_string(bs) +
                             " window " + std::to_string(c.window));
            if (HasFatalFailure()) return;
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

// A PagedAttention batch of `cases` (TestBatch over `blocks`, random queries) at `level` on
// `threads` threads: every output within 1e-4 of DenseAttention.
::testing::AssertionResult BatchMatchesDense(SimdLevel level, const TestKv& kv,
                                             const std::vector<SeqCase>& cases,
                                             const std::vector<int32_t>& blocks, int64_t n_heads,
                                             int64_t window, int threads, std::mt19937* rng) {
  ThreadPool pool(threads);
  AttentionScratch scratch;
  const int64_t hd = kv.view.head_dim;
  TestBatch batch(cases, blocks, kv.view.block_size, n_heads * hd, rng);
  const auto& [tables, qs, outs, seqs] = batch;
  AttentionParams params{n_heads, 1.0f / std::sqrt(float(hd)), window};
  PagedAttentionAtLevel(level, kv.view, params, seqs.data(), seqs.size(), &pool, &scratch);
  for (size_t s = 0; s < cases.size(); ++s) {
    const auto want = DenseAttention(kv, tables[s], qs[s].data(), cases[s].pos_start,
                                     cases[s].n_tokens, n_heads, window);
    for (size_t i = 0; i < want.size(); ++i) {
      if (!(std::fabs(outs[s][i] - want[i]) <= 1e-4f)) {
        return ::testing::AssertionFailure()
               << "seq " << s << " i " << i << ": " << outs[s][i] << " vs " << want[i];
      }
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(AttentionTest, PagedBatchMatchesDenseAttention) {
  const int64_t bs = 4, n_kv = 2, n_heads = 8, hd = 32;
  // Three sequences with disjoint blocks: a prompt, a decode step, a chunk after a cache.
  const std::vector<SeqCase> cases = {{0, 41}, {29, 1}, {13, 9}};
  for (SimdLevel level : SimdLevelsUpTo(SimdLevel::kAvx512)) {
    for (KvDtype d : kAllDtypes) {
      std::mt19937 rng(7);
      TestKv kv(d, 40, bs, n_kv, hd, &rng);
      auto all_blocks = ShuffledTable(40, &rng);
      for (int64_t window : {0, 5}) {
        for (int threads : {1, 2, 3}) {
          ASSERT_TRUE(
              BatchMatchesDense(level, kv, cases, all_blocks, n_heads, window, threads, &rng))
              << SimdLevelName(level) << " " << KvDtypeName(d) << " window " << window
              << " threads " << threads;
        }
      }
    }
  }
}

// Decode-kernel jobs whose keys cross a multiple of the key split run as parts that are merged
// (PagedAttention): with a split of 128 keys, prompts, decode rows at long contexts, chunks
// after a cache and sliding windows that leave early parts unseen match dense attention on
// 1-3 threads (one thread runs each job's parts in sequence; with fewer than 16 jobs per thread
// the parts are spread); so does the default split (512) at a context of 1300.
TEST(AttentionTest, KeyPartsMatchDenseAttention) {
  struct Restore {
    ~Restore() { SetAttentionKeySplit(0); }
  } restore;
  const int64_t bs = 16, n_kv = 2;
  const std::vector<SeqCase> cases = {{0, 300}, {450, 1}, {200, 9}, {383, 2}};
  const std::vector<SeqCase> long_cases = {{1300, 1}, {1020, 12}};
  for (SimdLevel level : SimdLevelsUpTo(SimdLevel::kAvx512)) {
    for (KvDtype d : kAllDtypes) {
      for (const int64_t split : {128, 0}) {
        // The default split at long contexts: two dtypes (a plain and a blocked one) suffice
        // for the planning, which does not depend on the dtype.
        if (!split && d != KvDtype::kF16 && d != KvDtype::kQ4_0) continue;
        SetAttentionKeySplit(split);
        const std::vector<SeqCase>& cs = split ? cases : long_cases;
        const int64_t hd = 64, n_group = split ? 3 : 4, n_heads = n_kv * n_group;
        int64_t n_blocks = 0;
        for (const SeqCase& c : cs) n_blocks += (c.pos_start + c.n_tokens + bs - 1) / bs;
        std::mt19937 rng(23);
        TestKv kv(d, n_blocks, bs, n_kv, hd, &rng);
        auto all_blocks = ShuffledTable(n_blocks, &rng);
        for (int64_t window : {0, 150}) {
          for (int threads : {1, 2, 3}) {
            ASSERT_TRUE(
                BatchMatchesDense(level, kv, cs, all_blocks, n_heads, window, threads, &rng))
                << SimdLevelName(level) << " " << KvDtypeName(d) << " split " << split << " window "
                << window << " threads " << threads;
          }
        }
      }
    }
  }
}

// A lone sequence with one KV head is fewer jobs than threads, with three KV heads on two
// threads one job too many: PagedAttention splits decode-kernel jobs over slices of their query
// heads (with key parts, each part of each slice is an item). On 2-4 threads the rows match
// dense attention and equal a one-thread call (no slices) bit for bit: decode rows and a 3-row
// verify, groups of 3 and 4 (uneven slices), below and across the key split.
TEST(AttentionTest, HeadSlicesMatchOneThread) {
  struct Restore {
    ~Restore() { SetAttentionKeySplit(0); }
  } restore;
  const int64_t bs = 16, hd = 64;
  for (SimdLevel level : SimdLevelsUpTo(SimdLevel::kAvx512)) {
    for (KvDtype d : {KvDtype::kF16, KvDtype::kQ8_0, KvDtype::kQ4_1}) {
      for (const int64_t split : {128, 0}) {
        SetAttentionKeySplit(split);
        // Split 128: one part (100), two (200), three (300); the default: one (300), three (1100).
        const std::vector<std::vector<SeqCase>> cases =
            split ? std::vector<std::vector<SeqCase>>{{{99, 1}}, {{197, 3}}, {{299, 1}}}
                  : std::vector<std::vector<SeqCase>>{{{299, 1}}, {{1097, 3}}};
        for (const auto [n_kv, n_group] : {std::pair{1, 3}, std::pair{1, 4}, std::pair{3, 3}}) {
          for (const std::vector<SeqCase>& cs : cases) {
            const int64_t n_blocks = (cs[0].pos_start + cs[0].n_tokens + bs - 1) / bs;
            const int64_t n_heads = n_kv * n_group;
            std::mt19937 rng(31);
            TestKv kv(d, n_blocks, bs, n_kv, hd, &rng);
            const std::vector<int32_t> blocks = ShuffledTable(n_blocks, &rng);
            const AttentionParams params{n_heads, 1.0f / std::sqrt(float(hd)), 0};
            std::mt19937 q_rng(5);
            TestBatch one(cs, blocks, bs, n_heads * hd, &q_rng);
            AttentionScratch scratch;
            PagedAttentionAtLevel(level, kv.view, params, one.seqs.data(), 1, nullptr, &scratch);
            const std::string what = std::string(SimdLevelName(level)) + " " + KvDtypeName(d) +
                                     " split " + std::to_string(split) + " KV heads " +
                                     std::to_string(n_kv) + " group " + std::to_string(n_group) +
                                     " context " + std::to_string(cs[0].pos_start + cs[0].n_tokens);
            const auto want = DenseAttention(kv, one.tables[0], one.qs[0].data(), cs[0].pos_start,
                                             cs[0].n_tokens, n_heads, 0);
            for (size_t i = 0; i < want.size(); ++i) {
              ASSERT_NEAR(one.outs[0][i], want[i], 1e-4f) << what << " i " << i;
            }
            for (int threads : {2, 3, 4}) {
              ThreadPool pool(threads);
              std::mt19937 q_rng2(5);
              TestBatch many(cs, blocks, bs, n_heads * hd, &q_rng2);
              PagedAttentionAtLevel(level, kv.view, params, many.seqs.data(), 1, &pool, &scratch);
              ASSERT_EQ(std::memcmp(many.outs[0].data(), one.outs[0].data(),
                                    sizeof(float) * one.outs[0].size()),
                        0)
                  << what << " threads " << threads;
            }
          }
        }
      }
    }
  }
}

// ---- AMX (bf16 tile multiplies) -------------------------------------------------------------
//
// AttendTileAmx works in log2 units: c = AmxQueryScale(scale) = scale * log2(e) (f32), scores
// s_j = (c q) · k_j, weights 2^(s_j - m) in f32, out = sum_j p_j v_j / sum_j p_j. Every operand
// of the two tile products is split into bf16 parts, x = x_hi + x_lo + r with x_hi = bf16(x),
// x_lo = bf16(x - x_hi), |r| <= u^2 |x| (u = 2^-8, the unit roundoff of bf16's 8 significant
// bits; bf16 K/V are exact in one part), and a product takes hi·hi + lo·hi + hi·lo, leaving out
// lo·lo (<= u^2 (1 + u)^2 |x y|): each partial sum is good to 3.02 u^2 relative, plus the f32
// accumulation. Against the f32 reference (AttendGroupReference, double) one output then
// differs by at most:
//
//   scores:  |s'_j - s_j| <= E = (3.02 u^2 + 1.01 (3 hd + 1) 2^-24 + 8 2^-24) S,
//            S = max_j sum_d |c q_d k_jd| (f32 accumulation of 3 hd products; c, c q and the
//            reference's own f32 roundings)
//   weights: p'_j = w_j (1 + a_j) up to a common factor, |a_j| <= A = 2^E (1 + 1e-5) - 1
//            (1e-5: the f32 2^x polynomial, < 4e-6, and the subtraction s - m); the split P
//            and V operands add a factor (1 + r_j), |r_j| <= 3.02 u^2, in the numerator only.
//   out - ref = [sum_j w_j a_j (v_j - ref) + sum_j w_j (1 + a_j) r_j v_j] / sum_j w_j (1 + a_j)
//   |out - ref| <= ((2A + 3.02 u^2 (1 + A)) / (1 - A) + 2 g) C + 1e-6,   C = sum_j w_j |v_jd|,
//
// with g = (3 n_keys + hd + 4) 2^-24 for the f32 sums of acc and l. The bound is
// data-dependent (S, C) and about 5e-4 C at head_dim 64 with N(0, 1) data; a wrong mask, key or
// column lands far outside it.
std::vector<float> AmxBoundOne(const float* q, const std::vector<const float*>& ks,
                               const std::vector<const float*>& vs, int64_t hd, float scale) {
  const double u = 1.0 / 256, eps = std::ldexp(1.0, -24);
  const double c = internal::AmxQueryScale(scale);
  const size_t n = ks.size();
  std::vector<double> w(n);
  double max_abs = 0;
  for (size_t j = 0; j < n; ++j) {
    double dot = 0, abs = 0;
    for (int64_t d = 0; d < hd; ++d) {
      dot += double(q[d]) * ks[j][d];
      abs += std::fabs(double(q[d]) * ks[j][d]);
    }
    w[j] = dot * scale;
    max_abs = std::max(max_abs, abs * c);
  }
  const double mx = *std::max_element(w.begin(), w.end());
  double sum = 0;
  for (double& e : w) sum += (e = std::exp(e - mx));
  for (double& e : w) e /= sum;
  const double e = (3.02 * u * u + 1.01 * (3 * hd + 1) * eps + 8 * eps) * max_abs;
  const double a = std::exp2(e) * (1 + 1e-5) - 1;
  const double g = (3 * n + hd + 4) * eps;
  const double factor = (2 * a + 3.02 * u * u * (1 + a)) / (1 - a) + 2 * g;
  std::vector<float> bound(hd);
  for (int64_t d = 0; d < hd; ++d) {
    double cw = 0;
    for (size_t j = 0; j < n; ++j) cw += w[j] * std::fabs(vs[j][d]);
    bound[d] = static_cast<float>(factor * cw + 1e-6);
  }
  return bound;
}

// The bounds of a tile job's outputs: [n_rows, n_group * hd].
std::vector<float> AmxBoundTile(const TestKv& kv, const std::vector<int32_t>& bt, const float* q,
                                int64_t stride, int64_t kv_head, int64_t n_group,
                                int64_t pos_start, int64_t n_rows, int64_t window, float scale) {
  const int64_t hd = kv.view.head_dim;
  std::vector<float> bound(n_rows * n_group * hd);
  for (int64_t r = 0; r < n_rows; ++r) {
    const int64_t pos = pos_start + r;
    const int64_t lo = window > 0 ? std::max<int64_t>(0, pos + 1 - window) : 0;
    std::vector<const float*> ks, vs;
    for (int64_t t = lo; t <= pos; ++t) {
      ks.push_back(kv.Row(kv.kr, bt, t, kv_head));
      vs.push_back(kv.Row(kv.vr, bt, t, kv_head));
    }
    for (int64_t g = 0; g < n_group; ++g) {
      const auto b = AmxBoundOne(q + r * stride + (kv_head * n_group + g) * hd, ks, vs, hd, scale);
      std::copy(b.begin(), b.end(), bound.begin() + (r * n_group + g) * hd);
    }
  }
  return bound;
}

// The AMX tile kernel against the f32 reference within the derived bound: every dtype, head_dims from 1 to 256 (padded to multiples of 32
// inside), GQA ratios 1/2/3/4/7/8, prompts from 0, decode rows, cached prefixes over several
// 64-key KV tiles, partial tiles, sliding windows across tiles.
TEST(AttentionAmxTest, TileMatchesReferenceWithinBound) {
  if (!DetectedCpuFeatures().HasAmxSet()) GTEST_SKIP() << "CPU without AMX";
  struct Case {
    int64_t pos_start, n_rows, window;  // n_rows 0: a full tile (64 / n_group rows)
  };
  const Case cases[] = {{0, 9, 0},   {37, 1, 0},  {21, 12, 0},
                        {30, 5, 7},  {100, 0, 0}, {130, 0, 70}};
  const int64_t groups[] = {1, 2, 3, 4, 7, 8};
  const int64_t block_sizes[] = {1, 16, 32};
  std::mt19937 rng(77);
  int combo = 0;
  for (KvDtype d : kAllDtypes) {
    std::vector<int64_t> dims = {1, 8, 17, 32, 64, 80, 128, 129, 256};
    if (KvDtypeIsBlocked(d)) dims = {32, 64, 96, 128, 256};
    for (int64_t hd : dims) {
      {
        const int64_t n_group = groups[combo % 6];
        const int64_t bs = block_sizes[combo++ % 3];
        const int64_t n_kv = 2, kv_head = 1, max_pos = 130 + 64;
        const int64_t nb = (max_pos + bs - 1) / bs + 1;
        TestKv kv(d, nb, bs, n_kv, hd, &rng);
        auto bt = ShuffledTable(nb, &rng);
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        for (const Case& c : cases) {
          const int64_t n_rows = c.n_rows > 0 ? c.n_rows : std::max<int64_t>(1, 64 / n_group);
          const int64_t stride = n_kv * n_group * hd;
          auto q = Randn(n_rows * stride, &rng);
          const auto bound = AmxBoundTile(kv, bt, q.data(), stride, kv_head, n_group,
                                          c.pos_start, n_rows, c.window, scale);
          // The f32 reference.
          const auto want = ReferenceJob(kv, bt, kv_head, n_group, hd,
                                         JobCase{c.pos_start, n_rows, c.window}, q, stride, scale);
          std::vector<float> got(q.size(), -7.0f);
          TileJob job;
          job.block_table = bt.data();
          job.kv_head = kv_head;
          job.pos_start = c.pos_start;
          job.n_rows = n_rows;
          job.row_stride = stride;
          job.q = q.data() + kv_head * n_group * hd;
          job.out = got.data() + kv_head * n_group * hd;
          const TileParams tp{n_group, scale, c.window};
          std::vector<float> scratch(TileScratchFloats(kv.view, job, tp), std::nanf(""));
          AttendTileAmx(kv.view, job, tp, scratch.data());
          for (int64_t r = 0; r < n_rows; ++r) {
            for (int64_t i = 0; i < n_group * hd; ++i) {
              const size_t o = r * n_group * hd + i;
              const float v = job.out[r * stride + i];
              ASSERT_NEAR(v, want[o], bound[o])
                  << KvDtypeName(d) << " hd " << hd << " group " << n_group << " bs " << bs
                  << " pos " << c.pos_start + r << " i " << i;
            }
            ASSERT_EQ(got[r * stride], -7.0f);  // heads of the other KV head untouched
          }
        }
      }
    }
  }
}

// The kAmx level runs AttendTileAmx for jobs UseAmxTile accepts and the AVX-512 kernel for
// the rest (decode rows of small groups, tiny heads), bit for bit.
TEST(AttentionAmxTest, LevelPicksAmxOrAvx512PerJob) {
  if (!DetectedCpuFeatures().HasAmxSet()) GTEST_SKIP() << "CPU without AMX";
  // TACHYON_CPU=avx2 caps the kAmx level to AVX2, whose kernels are not AVX-512's.
  if (BestSimdLevel() < SimdLevel::kAmx) GTEST_SKIP() << "SIMD level capped below AMX";
  std::mt19937 rng(9);
  int amx_jobs = 0, avx512_jobs = 0;
  for (int64_t hd : {8, 64}) {
    for (int64_t n_group : {1, 4, 8}) {
      for (int64_t n_rows : {1, 2, 4, 16}) {
        TestKv kv(KvDtype::kF16, 8, 16, 1, hd, &rng);
        auto bt = ShuffledTable(8, &rng);
        const int64_t stride = n_group * hd;
        auto q = Randn(n_rows * stride, &rng);
        TileJob job;
        job.block_table = bt.data();
        job.pos_start = 50;
        job.n_rows = n_rows;
        job.row_stride = stride;
        job.q = q.data();
        const TileParams tp{n_group, 1.0f / std::sqrt(float(hd)), 0};
        std::vector<float> scratch(TileScratchFloats(kv.view, job, tp));
        std::vector<float> got(q.size()), want(q.size());
        job.out = got.data();
        AttendTileAtLevel(SimdLevel::kAmx)(kv.view, job, tp, scratch.data());
        job.out = want.data();
        const bool amx = UseAmxTile(hd, n_rows * n_group);
        (amx ? AttendTileAmx : AttendTileAvx512)(kv.view, job, tp, scratch.data());
        (amx ? amx_jobs : avx512_jobs)++;
        ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
            << "hd " << hd << " group " << n_group << " rows " << n_rows;
      }
    }
  }
  EXPECT_GT(amx_jobs, 0);
  EXPECT_GT(avx512_jobs, 0);
}

// The batch driver at the kAmx level (AMX tiles where UseAmxTile says so, AVX-512 for the decode
// row) against dense attention within the AMX bound, over three sequences, 1-3 threads, with
// and without a sliding window.
TEST(AttentionAmxTest, PagedBatchWithinBound) {
  if (!DetectedCpuFeatures().HasAmxSet()) GTEST_SKIP() << "CPU without AMX";
  const int64_t bs = 16, n_kv = 2, n_heads = 8, hd = 64, n_group = n_heads / n_kv;
  const std::vector<SeqCase> cases = {{0, 100}, {29, 1}, {70, 23}};
  for (KvDtype d : {KvDtype::kF16, KvDtype::kQ8_0, KvDtype::kQ4_0}) {
    std::mt19937 rng(17);
    TestKv kv(d, 40, bs, n_kv, hd, &rng);
    auto all_blocks = ShuffledTable(40, &rng);
    for (int64_t window : {0, 40}) {
      for (int threads : {1, 3}) {
        ThreadPool pool(threads);
        AttentionScratch scratch;
        TestBatch batch(cases, all_blocks, bs, n_heads * hd, &rng);
        const auto& [tables, qs, outs, seqs] = batch;
        const float scale = 1.0f / std::sqrt(float(hd));
        AttentionParams params{n_heads, scale, window};
        PagedAttentionAtLevel(SimdLevel::kAmx, kv.view, params, seqs.data(), seqs.size(), &pool,
                              &scratch);
        for (size_t s = 0; s < cases.size(); ++s) {
          const int64_t stride = n_heads * hd;
          const auto dense = DenseAttention(kv, tables[s], qs[s].data(), cases[s].pos_start,
                                            cases[s].n_tokens, n_heads, window);
          for (int64_t h = 0; h < n_kv; ++h) {
            const auto bound = AmxBoundTile(kv, tables[s], qs[s].data(), stride, h, n_group,
                                            cases[s].pos_start, cases[s].n_tokens, window, scale);
            for (int64_t r = 0; r < cases[s].n_tokens; ++r) {
              for (int64_t i = 0; i < n_group * hd; ++i) {
                const size_t at = r * stride + h * n_group * hd + i;
                ASSERT_NEAR(outs[s][at], dense[at], bound[r * n_group * hd + i])
                    << KvDtypeName(d) << " seq " << s << " row " << r << " i " << i
                    << " window " << window << " threads " << threads;
              }
            }
          }
        }
      }
    }
  }
}

// Scores that rise along the context (about 15 in log2 units per 64 keys) move every row's
// maximum past the lazy threshold again and again: the rescaled accumulators and partial sums
// of AttendTileAmx against the reference within the bound, for prompts from 0 over several
// tile passes and for a chunk after cached positions, with and without a sliding window.
TEST(AttentionAmxTest, RisingScoresRescaleWithinBound) {
  if (!DetectedCpuFeatures().HasAmxSet()) GTEST_SKIP() << "CPU without AMX";
  const int64_t bs = 16, hd = 64, n_group = 4, n_blocks = 20;
  for (KvDtype d : {KvDtype::kF32, KvDtype::kF16}) {
    std::mt19937 rng(23);
    TestKv kv(d, n_blocks, bs, 1, hd, &rng);
    std::vector<int32_t> bt(n_blocks);
    std::iota(bt.begin(), bt.end(), 0);
    const size_t rb = KvRowBytes(d, hd);
    std::normal_distribution<float> dist(0.0f, 0.3f);
    std::vector<float> x(hd);
    for (int64_t t = 0; t < n_blocks * bs; ++t) {  // block t / bs is block_table[t / bs]
      for (float& e : x) e = 0.02f * static_cast<float>(t) + dist(rng);
      StoreKvRowReference(d, x.data(), kv.k.data() + t * rb, hd);
      LoadKvRowReference(d, kv.k.data() + t * rb, kv.kr.data() + t * hd, hd);
    }
    const float scale = 1.0f / std::sqrt(float(hd));
    struct Case {
      int64_t pos_start, n_rows, window;
    };
    for (const auto [pos_start, n_rows, window] : {Case{0, 75, 0}, {250, 9, 0}, {200, 40, 100}}) {
      std::vector<float> q(n_rows * n_group * hd);
      for (float& e : q) e = 1.0f + dist(rng);
      const int64_t stride = n_group * hd;
      std::vector<float> want(q.size()), got(q.size()), scores(n_group * (pos_start + n_rows));
      for (int64_t r = 0; r < n_rows; ++r) {
        const int64_t pos = pos_start + r;
        GroupJob gj{bt.data(), 0, window > 0 ? std::max<int64_t>(0, pos + 1 - window) : 0,
                    pos + 1,   q.data() + r * stride, want.data() + r * stride};
        AttendGroupReference(kv.view, gj, n_group, scale, scores.data());
      }
      TileJob job;
      job.block_table = bt.data();
      job.pos_start = pos_start;
      job.n_rows = n_rows;
      job.row_stride = stride;
      job.q = q.data();
      job.out = got.data();
      const TileParams tp{n_group, scale, window};
      std::vector<float> scratch(TileScratchFloats(kv.view, job, tp), std::nanf(""));
      AttendTileAmx(kv.view, job, tp, scratch.data());
      const auto bound = AmxBoundTile(kv, bt, q.data(), stride, 0, n_group, pos_start, n_rows,
                                      window, scale);
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], bound[i])
            << KvDtypeName(d) << " pos " << pos_start + static_cast<int64_t>(i) / stride
            << " window " << window << " i " << i % stride;
      }
    }
  }
}

}  // namespace
}  // namespace tachyon::kernels
