// Batch invariance: a row's results must not depend on how many rows share its step. MatMul
// of m activation rows and paged attention of a chunk of a prompt must give, for each row,
// the same bits as the same row computed in a step of any other size (speculative decoding
// checks its greedy output against plain decoding; chunked prefill against one pass). Every
// SIMD level this machine has is checked; at kAmx every matmul is put on the AMX path (the AMX
// tile paths round to bf16, the AVX-512 ones to 8 bits: see matmul.h) and attention off it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/testing/kernel_testing.h"
#include "kernels/testing/matmul_problem.h"
#include "util/cpu_features.h"
#include "util/thread_pool.h"

namespace tachyon::kernels {
namespace {

// First index where a and b differ bitwise, or -1.
int64_t FirstBitDifference(const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (std::memcmp(a + i, b + i, sizeof(float)) != 0) return i;
  }
  return -1;
}

struct AmxRowsGuard {
  ~AmxRowsGuard() { SetAmxMinRows(0); }
};

// y for m rows starting at activation row i0, against the same rows of one call over all of
// them (threaded), for m across every kernel regime (register kernels below GemmMinRows, the
// GEMM from there, several GEMM row groups and chunks).
void CheckMatMulRows(SimdLevel level, const MatMulProblem& p, ThreadPool* pool,
                     const std::string& what) {
  std::vector<float> all(p.m * p.rows);
  MatMulAtLevel(level, p.weight, p.x.data(), p.m, all.data(), pool);
  for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 16, 17, 24, 33}) {
    if (m > p.m) break;
    const int64_t i0 = (m * 7) % (p.m - m + 1);
    std::vector<float> y(m * p.rows, -1.0f);
    MatMulAtLevel(level, p.weight, p.x.data() + i0 * p.cols, m, y.data(), nullptr);
    const int64_t at = FirstBitDifference(y.data(), all.data() + i0 * p.rows, m * p.rows);
    ASSERT_EQ(at, -1) << what << " level " << SimdLevelName(level) << " m " << m << " row "
                      << (at < 0 ? 0 : i0 + at / p.rows) << " out " << (at < 0 ? 0 : at % p.rows)
                      << ": " << y[at < 0 ? 0 : at] << " vs "
                      << all[i0 * p.rows + (at < 0 ? 0 : at)];
  }
}

TEST(BatchInvariance, MatMulRowsDoNotDependOnTheRowCount) {
  AmxRowsGuard guard;
  ThreadPool pool(2);
  for (SimdLevel level : SimdLevelsUpTo(SimdLevel::kAmx)) {
    // At kAmx every m runs the AMX tile path (its rounding differs from the 8-bit kernels').
    SetAmxMinRows(level == SimdLevel::kAmx ? 1 : 0);
    for (GgmlType t : kAllMatMulTypes) {
      const bool k_quant = GetTypeTraits(static_cast<uint32_t>(t))->block_size == 256;
      for (int64_t cols :
           k_quant ? std::vector<int64_t>{256, 768} : std::vector<int64_t>{96, 512}) {
        MatMulProblem p = MakeMatMulProblem(t, 40, cols, 40, static_cast<uint32_t>(cols) + 7);
        const std::string name = std::string(TypeName(t)) + " cols " + std::to_string(cols);
        CheckMatMulRows(level, p, &pool, name + " GGUF layout");
        if (HasPackedLayout(t)) {
          PackProblem(p);
          CheckMatMulRows(level, p, &pool, name + " packed");
        }
      }
    }
  }
}

// Several weights in one call (q/k/v, gate/up) give the same rows at every m too.
TEST(BatchInvariance, MatMulMultiRowsDoNotDependOnTheRowCount) {
  ThreadPool pool(2);
  MatMulProblem a = MakeMatMulProblem(GgmlType::kQ4_0, 48, 512, 20, 1);
  MatMulProblem b = MakeMatMulProblem(GgmlType::kQ4_0, 16, 512, 20, 2);
  PackProblem(a);
  PackProblem(b);
  for (SimdLevel level : SimdLevelsUpTo(SimdLevel::kAmx)) {
    if (level == SimdLevel::kAmx) continue;  // covered per weight above
    const Weight* ws[] = {&a.weight, &b.weight};
    std::vector<float> ya(20 * 48), yb(20 * 16);
    float* ys[] = {ya.data(), yb.data()};
    MatMulMultiAtLevel(level, ws, a.x.data(), 20, ys, &pool);
    for (int64_t m : {1, 3, 8, 13}) {
      std::vector<float> ra(m * 48), rb(m * 16);
      float* rs[] = {ra.data(), rb.data()};
      MatMulMultiAtLevel(level, ws, a.x.data(), m, rs, nullptr);
      EXPECT_EQ(FirstBitDifference(ra.data(), ya.data(), m * 48), -1) << "m " << m;
      EXPECT_EQ(FirstBitDifference(rb.data(), yb.data(), m * 16), -1) << "m " << m;
    }
  }
}

// decode_rows = r: the first r rows are the AVX-512 kernels' whatever m (at kAmx the AMX path
// would take them from its threshold on), the others those of a call over them alone.
TEST(BatchInvariance, DecodeRowsTakeTheRowCountInvariantKernels) {
  ThreadPool pool(2);
  for (GgmlType t : {GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kF16, GgmlType::kBF16}) {
    const bool k_quant = GetTypeTraits(static_cast<uint32_t>(t))->block_size == 256;
    MatMulProblem p = MakeMatMulProblem(t, 48, k_quant ? 256 : 128, 80, 9);
    if (HasPackedLayout(t)) PackProblem(p);
    const SimdLevel decode_level = std::min(BestSimdLevel(), SimdLevel::kAvx512);
    for (int64_t r : {1, 9, 33, 80}) {
      const std::string what = std::string(TypeName(t)) + " decode_rows " + std::to_string(r);
      std::vector<float> got(p.m * p.rows, -1.0f), want(p.m * p.rows, -2.0f);
      MatMul(p.weight, p.x.data(), p.m, got.data(), &pool, r);
      MatMulAtLevel(decode_level, p.weight, p.x.data(), r, want.data(), &pool);
      MatMul(p.weight, p.x.data() + r * p.cols, p.m - r, want.data() + r * p.rows, &pool);
      const int64_t at = FirstBitDifference(got.data(), want.data(), p.m * p.rows);
      EXPECT_EQ(at, -1) << what << " row " << (at < 0 ? 0 : at / p.rows);
    }
  }
}

// One layer's paged KV in `dtype` with random rows.
struct Kv {
  std::vector<uint8_t> k, v;
  PagedKv view;
  Kv(KvDtype dtype, int64_t n_blocks, int64_t bs, int64_t n_kv, int64_t hd, std::mt19937* rng) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const size_t rb = KvRowBytes(dtype, hd);
    const int64_t rows = n_blocks * bs * n_kv;
    k.resize(rows * rb);
    v.resize(rows * rb);
    std::vector<float> x(hd);
    for (int64_t r = 0; r < rows; ++r) {
      for (auto* dst : {&k, &v}) {
        for (float& e : x) e = nd(*rng);
        StoreKvRow(dtype, x.data(), dst->data() + r * rb, hd);
      }
    }
    view = {k.data(), v.data(), dtype, n_blocks, bs, n_kv, hd};
  }
};

// Every SIMD level, with the default key split and with 128.
std::vector<std::pair<SimdLevel, int64_t>> LevelsAndSplits() {
  std::vector<std::pair<SimdLevel, int64_t>> out;
  for (SimdLevel level : SimdLevelsUpTo(SimdLevel::kAmx)) {
    for (int64_t split : {0, 128}) out.emplace_back(level, split);
  }
  return out;
}

struct AttnCase {
  KvDtype dtype;
  int64_t head_dim, n_kv, n_group, window;
};

// A prompt's new tokens [pos0, pos0 + n) attended in chunks of c positions (one
// PagedAttention call per chunk, the earlier positions already cached) equal one call over all
// of them, bit for bit; so does the last row alone beside another sequence's chunk. A pooled
// chunk of one KV head's few rows is one job for two threads, so it runs as head slices.
TEST(BatchInvariance, AttentionRowsDoNotDependOnTheChunk) {
  struct Restore {
    ~Restore() {
      SetAttentionAmxMinQueries(0);
      SetAttentionKeySplit(0);
    }
  } restore;
  const AttnCase cases[] = {
      {KvDtype::kF16, 64, 2, 3, 0},  {KvDtype::kF16, 64, 2, 3, 70},  {KvDtype::kF32, 17, 2, 1, 0},
      {KvDtype::kBf16, 64, 1, 7, 0}, {KvDtype::kQ8_0, 64, 2, 4, 70}, {KvDtype::kBf16, 64, 1, 24, 0},
      {KvDtype::kF16, 16, 1, 66, 0}, {KvDtype::kF32, 40, 1, 2, 9},   {KvDtype::kQ4_0, 64, 2, 4, 70},
      {KvDtype::kQ4_1, 96, 1, 6, 0},
  };
  const int64_t bs = 16, pos0 = 100, n = 40, n_blocks = (pos0 + n + bs - 1) / bs;
  ThreadPool pool(2);
  std::mt19937 rng(11);
  for (const AttnCase& c : cases) {
    Kv kv(c.dtype, n_blocks + 2, bs, c.n_kv, c.head_dim, &rng);
    std::vector<int32_t> table(n_blocks);
    for (int64_t b = 0; b < n_blocks; ++b)
      table[b] = static_cast<int32_t>((b * 5 + 1) % (n_blocks + 2));
    const int64_t n_heads = c.n_kv * c.n_group, w = n_heads * c.head_dim;
    std::vector<float> q(n * w);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (float& x : q) x = nd(rng);
    AttentionParams params;
    params.n_heads = n_heads;
    params.scale = 0.125f;
    params.sliding_window = c.window;
    // Key split 128: positions 100-139 cross a part boundary, so rows see one or two parts.
    for (const auto& [level, split] : LevelsAndSplits()) {
      SetAttentionKeySplit(split);
      // kAmx: the AMX tile kernel is kept off (its rounding is not the decode kernel's, and its
      // own invariance is not claimed: docs/kernels.md, Batch invariance).
      SetAttentionAmxMinQueries(level == SimdLevel::kAmx ? int64_t{1} << 40 : 0);
      const std::string what = std::string(KvDtypeName(c.dtype)) + " hd " +
                               std::to_string(c.head_dim) + " group " + std::to_string(c.n_group) +
                               " window " + std::to_string(c.window) + " split " +
                               std::to_string(split) + " " + SimdLevelName(level);
      AttentionScratch scratch;
      std::vector<float> want(n * w, -1.0f);
      AttentionSeq one{table.data(), pos0, n, q.data(), want.data()};
      PagedAttentionAtLevel(level, kv.view, params, &one, 1, &pool, &scratch);
      for (int64_t chunk : {1, 2, 3, 5, 16, 21}) {
        std::vector<float> got(n * w, -2.0f);
        for (int64_t s = 0; s < n; s += chunk) {
          const int64_t len = std::min(chunk, n - s);
          AttentionSeq part{table.data(), pos0 + s, len, q.data() + s * w, got.data() + s * w};
          PagedAttentionAtLevel(level, kv.view, params, &part, 1, s % 2 ? nullptr : &pool,
                                &scratch);
        }
        const int64_t at = FirstBitDifference(got.data(), want.data(), n * w);
        ASSERT_EQ(at, -1) << what << " chunk " << chunk << " row " << (at < 0 ? 0 : at / w);
      }
      // The last row as a decode step batched with another sequence's 9-row chunk.
      std::vector<float> last(w, -3.0f), other(9 * w);
      AttentionSeq two[2] = {{table.data(), pos0 + 11, 9, q.data(), other.data()},
                             {table.data(), pos0 + n - 1, 1, q.data() + (n - 1) * w, last.data()}};
      PagedAttentionAtLevel(level, kv.view, params, two, 2, &pool, &scratch);
      EXPECT_EQ(FirstBitDifference(last.data(), want.data() + (n - 1) * w, w), -1) << what;
      // At the AMX thresholds, the rows of a sequence marked decode_rows are the decode
      // kernel's whatever the job: the last 20 rows in one call, beside a 9-row chunk.
      SetAttentionAmxMinQueries(0);
      std::vector<float> tail(20 * w, -4.0f);
      AttentionSeq mixed[2] = {{table.data(), pos0 + 11, 9, q.data(), other.data()},
                               {table.data(), pos0 + n - 20, 20, q.data() + (n - 20) * w,
                                tail.data(), /*decode_rows=*/true}};
      PagedAttentionAtLevel(level, kv.view, params, mixed, 2, &pool, &scratch);
      const int64_t at = FirstBitDifference(tail.data(), want.data() + (n - 20) * w, 20 * w);
      EXPECT_EQ(at, -1) << what << " decode rows, row " << (at < 0 ? 0 : n - 20 + at / w);
    }
  }
}

}  // namespace
}  // namespace tachyon::kernels
