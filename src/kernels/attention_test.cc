#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "util/cpu_features.h"
#include "util/thread_pool.h"

namespace tachyon::kernels {
namespace {

// A paged KV store whose blocks are handed out in a shuffled order.
struct TestKv {
  std::vector<float> k, v;
  PagedKv view;
  TestKv(int64_t n_blocks, int64_t block_size, int64_t n_kv_heads, int64_t head_dim,
         std::mt19937* rng) {
    std::normal_distribution<float> dist(0.0f, 1.0f);
    const size_t n = n_blocks * block_size * n_kv_heads * head_dim;
    k.resize(n);
    v.resize(n);
    for (auto& x : k) x = dist(*rng);
    for (auto& x : v) x = dist(*rng);
    view = {k.data(), v.data(), n_blocks, block_size, n_kv_heads, head_dim};
  }
  // K (or V) of position p, head h, under block table bt.
  const float* Row(const std::vector<float>& base, const std::vector<int32_t>& bt, int64_t p,
                   int64_t h) const {
    const int64_t b = bt[p / view.block_size];
    return base.data() +
           ((b * view.block_size + p % view.block_size) * view.n_kv_heads + h) * view.head_dim;
  }
};

std::vector<int32_t> ShuffledTable(int64_t n_blocks, std::mt19937* rng) {
  std::vector<int32_t> bt(n_blocks);
  std::iota(bt.begin(), bt.end(), 0);
  std::shuffle(bt.begin(), bt.end(), *rng);
  return bt;
}

void ExpectVariantMatches(AttendGroupFn fn, const char* name) {
  std::mt19937 rng(42);
  for (int64_t hd : {1, 2, 3, 7, 15, 16, 17, 31, 33, 64, 127, 129}) {
    for (int64_t n_group : {1, 3, 4}) {
      for (int64_t ctx : {1, 2, 17, 100}) {
        const int64_t bs = 16;
        const int64_t n_blocks = (ctx + bs - 1) / bs + 2;
        TestKv kv(n_blocks, bs, 2, hd, &rng);
        auto bt = ShuffledTable(n_blocks, &rng);
        std::vector<float> q(n_group * hd), ref(n_group * hd), got(n_group * hd);
        std::normal_distribution<float> dist(0.0f, 1.0f);
        for (auto& x : q) x = dist(rng);
        std::vector<float> scores(n_group * ctx);
        GroupJob job{bt.data(), 1, ctx > 2 ? 1 : 0, ctx, q.data(), ref.data()};
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        AttendGroupReference(kv.view, job, n_group, scale, scores.data());
        job.out = got.data();
        fn(kv.view, job, n_group, scale, scores.data());
        for (size_t i = 0; i < ref.size(); ++i) {
          ASSERT_NEAR(got[i], ref[i], 1e-4f * (1.0f + std::fabs(ref[i])))
              << name << " hd=" << hd << " group=" << n_group << " ctx=" << ctx << " i=" << i;
        }
      }
    }
  }
}

TEST(AttentionTest, Avx2MatchesReference) {
  if (!DetectedCpuFeatures().HasAvx2Set()) GTEST_SKIP() << "CPU lacks AVX2";
  ExpectVariantMatches(AttendGroupAvx2, "avx2");
}

TEST(AttentionTest, Avx512MatchesReference) {
  if (!DetectedCpuFeatures().HasAvx512Set()) GTEST_SKIP() << "CPU lacks AVX-512";
  ExpectVariantMatches(AttendGroupAvx512, "avx512");
}

// Dense causal attention written directly from the definition, for one sequence.
std::vector<float> DenseAttention(const TestKv& kv, const std::vector<int32_t>& bt,
                                  const std::vector<float>& q, int64_t pos_start,
                                  int64_t n_tokens, int64_t n_heads, int64_t window) {
  const int64_t hd = kv.view.head_dim, group = n_heads / kv.view.n_kv_heads;
  std::vector<float> out(n_tokens * n_heads * hd, 0.0f);
  for (int64_t i = 0; i < n_tokens; ++i) {
    const int64_t pos = pos_start + i;
    const int64_t lo = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
    for (int64_t h = 0; h < n_heads; ++h) {
      const float* qh = q.data() + (i * n_heads + h) * hd;
      std::vector<double> w;
      for (int64_t p = lo; p <= pos; ++p) {
        const float* k = kv.Row(kv.k, bt, p, h / group);
        double d = 0;
        for (int64_t j = 0; j < hd; ++j) d += double(qh[j]) * k[j];
        w.push_back(d / std::sqrt(double(hd)));
      }
      const double mx = *std::max_element(w.begin(), w.end());
      double sum = 0;
      for (auto& x : w) sum += (x = std::exp(x - mx));
      for (int64_t p = lo; p <= pos; ++p) {
        const float* v = kv.Row(kv.v, bt, p, h / group);
        for (int64_t j = 0; j < hd; ++j) out[(i * n_heads + h) * hd + j] += w[p - lo] / sum * v[j];
      }
    }
  }
  return out;
}

TEST(AttentionTest, PagedBatchMatchesDenseAttention) {
  std::mt19937 rng(7);
  const int64_t bs = 4, n_kv = 2, n_heads = 6, hd = 24;
  TestKv kv(40, bs, n_kv, hd, &rng);
  auto all_blocks = ShuffledTable(40, &rng);
  // Three sequences with disjoint blocks: a prompt, a decode step, a chunk after a cache.
  struct Case {
    int64_t pos_start, n_tokens;
  };
  const std::vector<Case> cases = {{0, 11}, {29, 1}, {13, 9}};
  std::normal_distribution<float> dist(0.0f, 1.0f);
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
        tables.emplace_back(all_blocks.begin() + next_block, all_blocks.begin() + next_block + nb);
        next_block += nb;
        qs.emplace_back(c.n_tokens * n_heads * hd);
        for (auto& x : qs.back()) x = dist(rng);
        outs.emplace_back(qs.back().size(), -1.0f);
      }
      for (size_t s = 0; s < cases.size(); ++s) {
        seqs.push_back({tables[s].data(), cases[s].pos_start, cases[s].n_tokens, qs[s].data(),
                        outs[s].data()});
      }
      AttentionParams params{n_heads, 1.0f / std::sqrt(float(hd)), window};
      PagedAttention(kv.view, params, seqs.data(), seqs.size(), &pool, &scratch);
      for (size_t s = 0; s < cases.size(); ++s) {
        auto want = DenseAttention(kv, tables[s], qs[s], cases[s].pos_start, cases[s].n_tokens,
                                   n_heads, window);
        for (size_t i = 0; i < want.size(); ++i) {
          ASSERT_NEAR(outs[s][i], want[i], 1e-4) << "seq " << s << " i " << i << " window "
                                                  << window << " threads " << threads;
        }
      }
    }
  }
}

}  // namespace
}  // namespace tachyon::kernels
