// Batch invariance end to end: a prompt run through Model::Forward in chunks of any size gives
// every position the same logits, bit for bit, as one pass (the kernels' row results do not
// depend on the step's row count: kernels/batch_invariance_test.cc). Synthetic models of every
// weight layout the kernels distinguish (packed Q4_0 / Q8_0 / Q4_K / Q6_K, GGUF-layout Q4_1 /
// Q5_K, float), dense and with sliding windows (gemma3), at the process's SIMD level; the CLI
// test tests/python/test_batch_invariance.py runs every level and the real SmolLM2.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "model/model.h"
#include "model/synth.h"
#include "model/test_util.h"
#include "util/cpu_features.h"

namespace tachyon::model {
namespace {

using testing::Blocks;

// Logits of every position of `ids`, run in chunks of `chunk` tokens (positions 0..n-1).
std::vector<float> ChunkedLogits(Model& m, const std::vector<int32_t>& ids, int64_t chunk,
                                 ThreadPool* pool) {
  const int64_t n = static_cast<int64_t>(ids.size()), bs = 16;
  auto kv = m.CreateKvCache((n + bs - 1) / bs + 1, bs, KvDtype::kF16);
  EXPECT_TRUE(kv.ok());
  std::vector<float> all;
  ForwardOutput out;
  for (int64_t s = 0; s < n; s += chunk) {
    const int64_t len = std::min(chunk, n - s);
    Batch b;
    b.tokens.assign(ids.begin() + s, ids.begin() + s + len);
    b.seqs.push_back({0, len, s, Blocks(1, (n + bs - 1) / bs), len});
    Status st = m.Forward(b, kv->get(), pool, &out);
    EXPECT_TRUE(st.ok()) << st.ToString();
    all.insert(all.end(), out.logits.begin(), out.logits.begin() + len * out.n_vocab);
  }
  return all;
}

TEST(BatchInvariance, ChunkedPromptGivesTheSameLogitsAsOnePass) {
  // At kAmx the tile paths (bf16) take over from a row count on: every matmul on the AMX path,
  // attention on the decode kernel (the AMX attention kernel's invariance is not claimed).
  kernels::SetAmxMinRows(1);
  kernels::SetAttentionAmxMinQueries(int64_t{1} << 40);
  struct Restore {
    ~Restore() {
      kernels::SetAmxMinRows(0);
      kernels::SetAttentionAmxMinQueries(0);
    }
  } restore;
  const std::pair<std::string, std::string> cases[] = {{"llama", "Q4_0"},  {"llama", "Q4_K_M"},
                                                       {"llama", "Q4_1"},  {"qwen3", "Q5_K"},
                                                       {"gemma3", "Q8_0"}, {"llama", "F16"}};
  ThreadPool pool(2);
  for (const auto& [arch, type] : cases) {
    SCOPED_TRACE(arch + " " + type + " at " + SimdLevelName(BestSimdLevel()));
    SynthOptions o;
    o.arch = arch;
    o.shape = "tiny";
    o.type = type;
    o.seed = 3;
    const std::string path =
        (std::filesystem::temp_directory_path() /
         ("tachyon_batch_inv_" + std::to_string(getpid()) + "_" + arch + "_" + type + ".gguf"))
            .string();
    ASSERT_TRUE(WriteSynthModel(o, path, &pool).ok());
    auto m = Model::Load(path);
    std::filesystem::remove(path);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    std::vector<int32_t> ids;
    for (int i = 0; i < 37; ++i) ids.push_back((i * 53 + 7) % 512);
    const std::vector<float> want = ChunkedLogits(**m, ids, 37, &pool);
    // 1 row (decode kernels), 3 (a lone attention slot, before), 8 (the GEMM kernels).
    for (int64_t chunk : {1, 3, 8}) {
      const std::vector<float> got = ChunkedLogits(**m, ids, chunk, chunk % 2 ? &pool : nullptr);
      ASSERT_EQ(got.size(), want.size());
      size_t at = 0;
      while (at < got.size() && std::memcmp(&got[at], &want[at], sizeof(float)) == 0) ++at;
      EXPECT_EQ(at, got.size()) << "chunk " << chunk << ": position " << at / 512 << " token "
                                << at % 512 << ": " << got[at] << " vs " << want[at];
    }
  }
}

// A synthetic model of `type` written to a temporary file and loaded.
std::unique_ptr<Model> LoadSynth(const std::string& arch, const std::string& type,
                                 ThreadPool* pool) {
  SynthOptions o;
  o.arch = arch;
  o.shape = "tiny";
  o.type = type;
  o.seed = 5;
  const std::string path =
      (std::filesystem::temp_directory_path() /
       ("tachyon_decode_inv_" + std::to_string(getpid()) + "_" + type + ".gguf"))
          .string();
  EXPECT_TRUE(WriteSynthModel(o, path, pool).ok());
  auto m = Model::Load(path);
  std::filesystem::remove(path);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(*m) : nullptr;
}

// First index where a and b differ bitwise, or -1.
int64_t FirstDifference(const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (std::memcmp(a + i, b + i, sizeof(float)) != 0) return i;
  }
  return -1;
}

// Tokens of sequence `s`: n ids from `from` on.
std::vector<int32_t> SeqIds(int s, int64_t from, int64_t n) {
  std::vector<int32_t> ids;
  for (int64_t i = from; i < from + n; ++i)
    ids.push_back(static_cast<int32_t>((i * 37 + s * 101 + 5) % 512));
  return ids;
}

// A decode row (a position past its sequence's prompt, SequenceSlice::decode_start) gets the
// same logits, bit for bit, computed alone, as the first of k + 1 verify rows, and beside a
// 40-row prompt chunk of another sequence and a third sequence's 40 recomputed output rows
// (the step's rows then cross every AMX matmul threshold and its attention jobs the AMX
// attention's). The verify rows equal the decode rows that would follow them one by one.
TEST(BatchInvariance, DecodeRowsDoNotDependOnTheStep) {
  ThreadPool pool(2);
  const int64_t bs = 16, prompt = 20, k = 8;
  for (const std::string type : {"Q4_0", "Q4_K_M", "F16"}) {
    SCOPED_TRACE(type + " at " + SimdLevelName(BestSimdLevel()));
    std::unique_ptr<Model> m = LoadSynth("llama", type, &pool);
    ASSERT_NE(m, nullptr);
    auto kv = m->CreateKvCache(32, bs, KvDtype::kF16);
    ASSERT_TRUE(kv.ok());
    const int64_t nv = m->config().n_vocab;
    // Sequences: A (blocks 1..4, prompt 20), B (a 40-token prompt chunk, blocks 5..8), C
    // (prompt 8, then 40 output tokens recomputed, blocks 9..12).
    auto slice = [&](int s, int64_t token_start, int64_t pos, int64_t n, int64_t logits,
                     int64_t decode_start) {
      SequenceSlice sq{token_start, n, pos, Blocks(1 + 4 * s, 4), logits};
      sq.decode_start = decode_start;
      return sq;
    };
    ForwardOutput out;
    auto run = [&](const Batch& b) {
      Status st = m->Forward(b, kv->get(), &pool, &out);
      EXPECT_TRUE(st.ok()) << st.ToString();
    };
    {  // the prompts of A and C
      Batch b;
      b.tokens = SeqIds(0, 0, prompt);
      const std::vector<int32_t> c = SeqIds(2, 0, 8);
      b.tokens.insert(b.tokens.end(), c.begin(), c.end());
      b.seqs = {slice(0, 0, 0, prompt, 1, prompt), slice(2, prompt, 0, 8, 1, 8)};
      run(b);
    }
    const std::vector<int32_t> a = SeqIds(0, prompt, k + 1);  // A's decode token and k drafts
    // Alone, one row at a time: want[j] = logits of A's position prompt + j.
    std::vector<float> want((k + 1) * nv);
    for (int64_t j = 0; j <= k; ++j) {
      Batch b;
      b.tokens = {a[j]};
      b.seqs = {slice(0, 0, prompt + j, 1, 1, prompt)};
      run(b);
      std::memcpy(want.data() + j * nv, out.Row(0), nv * sizeof(float));
    }
    {  // with k verify rows
      Batch b;
      b.tokens = a;
      b.seqs = {slice(0, 0, prompt, k + 1, k + 1, prompt)};
      run(b);
      const int64_t at = FirstDifference(out.Row(0), want.data(), (k + 1) * nv);
      EXPECT_EQ(at, -1) << "verify row " << at / nv << " token " << at % nv;
    }
    // Beside B's prompt chunk (first in the batch) and C's 40 output rows.
    auto mixed = [&](int64_t a_decode_start, int64_t c_decode_start) {
      Batch b;
      b.tokens = SeqIds(1, 0, 40);
      b.tokens.push_back(a[0]);
      const std::vector<int32_t> c = SeqIds(2, 8, 40);
      b.tokens.insert(b.tokens.end(), c.begin(), c.end());
      b.seqs = {slice(1, 0, 0, 40, 1, 40), slice(0, 40, prompt, 1, 1, a_decode_start),
                slice(2, 41, 8, 40, 2, c_decode_start)};
      run(b);
      return std::vector<float>(out.Row(out.seq_first_row[1]), out.Row(out.seq_first_row[1]) + nv);
    };
    const std::vector<float> got = mixed(prompt, 8);
    const int64_t at = FirstDifference(got.data(), want.data(), nv);
    EXPECT_EQ(at, -1) << "beside a prompt chunk: token " << at << ": " << got[at < 0 ? 0 : at]
                      << " vs " << want[at < 0 ? 0 : at];
    if (BestSimdLevel() == SimdLevel::kAmx) {
      // Not marked as decode rows, the same step moves A's row off the decode kernels (so the
      // checks above can fail).
      const std::vector<float> unmarked =
          mixed(std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::max());
      EXPECT_NE(FirstDifference(unmarked.data(), want.data(), nv), -1);
    }
  }
  if (BestSimdLevel() != SimdLevel::kAmx) {
    GTEST_SKIP() << "checked at " << SimdLevelName(BestSimdLevel())
                 << " only: the AMX paths this test is about need a CPU with AMX";
  }
}

}  // namespace
}  // namespace tachyon::model
