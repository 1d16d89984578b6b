// Paged KV and the flat batch: chunked prompts over cached blocks and several sequences in
// one batch must give the logits of one plain pass.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "model/model.h"
#include "model/test_util.h"
#include "util/testing/testdata.h"

namespace tachyon::model {
namespace {

using testing::AllLogits;
using testing::MaxAbsDiff;
using testing::ReadJson;

struct Fixture {
  std::vector<std::string> model_paths;
  nlohmann::json seqs;
};

// One present file per model of testdata/models (the first listed), to keep the test fast:
// every architecture is covered; the weight types are covered by reference_models_test.
Fixture LoadFixture() {
  Fixture f;
  const std::string root = TestdataDir();
  if (root.empty()) return f;
  const std::string dir = root + "/models";
  if (!std::filesystem::exists(dir + "/index.json")) return f;
  auto index = ReadJson(dir + "/index.json");
  f.seqs = ReadJson(dir + "/sequences.json")["sequences"];
  std::set<std::string> seen;
  for (const auto& file : index["files"]) {
    const std::string p = dir + "/" + file["path"].get<std::string>();
    if (!std::filesystem::exists(p)) continue;
    if (seen.insert(file["model"].get<std::string>()).second) f.model_paths.push_back(p);
  }
  return f;
}

// Quantized matmuls may round activations per row, so chunking must not change results
// beyond float reassociation.
constexpr float kTol = 2e-4f;

TEST(BatchTest, ChunkedPromptMatchesOnePass) {
  Fixture f = LoadFixture();
  if (f.model_paths.empty()) GTEST_SKIP() << "testdata/models not found";
  const std::vector<int32_t> ids = f.seqs["S4"];
  const int64_t n = static_cast<int64_t>(ids.size());
  ThreadPool pool(1);
  for (const std::string& path : f.model_paths) {
    SCOPED_TRACE(path);
    auto m = Model::Load(path);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    Model& model = **m;
    const int64_t V = model.config().n_vocab;
    const std::vector<float> want =
        AllLogits(model, ids, &pool, kDefaultBlockSize, kDefaultKvDtype);
    // Chunks of 7 over a block table with scattered ids.
    const int64_t nb = (n + 15) / 16;
    auto kv = model.CreateKvCache(2 * nb + 2);
    ASSERT_TRUE(kv.ok());
    std::vector<int32_t> table;
    for (int64_t i = 0; i < nb; ++i) table.push_back(static_cast<int32_t>(2 * nb + 1 - 2 * i));
    ForwardOutput out;
    for (int64_t start = 0; start < n; start += 7) {
      const int64_t len = std::min<int64_t>(7, n - start);
      Batch b;
      b.tokens.assign(ids.begin() + start, ids.begin() + start + len);
      b.seqs.push_back({0, len, start, table, len});
      ASSERT_TRUE(model.Forward(b, kv->get(), &pool, &out).ok());
      ASSERT_EQ(out.n_rows, len);
      for (int64_t j = 0; j < len; ++j) {
        ASSERT_LT(MaxAbsDiff(out.Row(j), want.data() + (start + j) * V, V), kTol)
            << "position " << start + j;
      }
    }
  }
}

TEST(BatchTest, SeveralSequencesInOneBatchMatchSeparatePasses) {
  Fixture f = LoadFixture();
  if (f.model_paths.empty()) GTEST_SKIP() << "testdata/models not found";
  // S4 cut to 40 tokens (3 blocks) keeps the test fast.
  std::vector<int32_t> s4 = f.seqs["S4"];
  s4.resize(40);
  const std::vector<std::vector<int32_t>> seqs = {f.seqs["S2"], f.seqs["S3"], s4, f.seqs["S1"]};
  ThreadPool pool(1);
  for (const std::string& path : f.model_paths) {
    SCOPED_TRACE(path);
    auto m = Model::Load(path);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    Model& model = **m;
    const int64_t V = model.config().n_vocab;
    auto kv = model.CreateKvCache(64);
    ASSERT_TRUE(kv.ok());
    // Prefill all four in one flat batch: S3 with all logits, the others only the last.
    Batch b;
    int32_t next_block = 63;
    for (size_t s = 0; s < seqs.size(); ++s) {
      const int64_t n = static_cast<int64_t>(seqs[s].size());
      std::vector<int32_t> table;
      for (int64_t i = 0; i < (n + 16) / 16 + 1; ++i) table.push_back(next_block--);
      b.seqs.push_back({static_cast<int64_t>(b.tokens.size()), n, 0, table, s == 1 ? n : 1});
      b.tokens.insert(b.tokens.end(), seqs[s].begin(), seqs[s].end());
    }
    ForwardOutput out;
    ASSERT_TRUE(model.Forward(b, kv->get(), &pool, &out).ok());
    ASSERT_EQ(out.n_rows, 3 + static_cast<int64_t>(seqs[1].size()));
    std::vector<std::vector<float>> want;
    for (size_t s = 0; s < seqs.size(); ++s) {
      want.push_back(AllLogits(model, seqs[s], &pool, kDefaultBlockSize, kDefaultKvDtype));
      const int64_t n = static_cast<int64_t>(seqs[s].size());
      const int64_t first = n - b.seqs[s].num_logits;
      for (int64_t p = first; p < n; ++p) {
        ASSERT_LT(MaxAbsDiff(out.Row(out.seq_first_row[s] + p - first), want[s].data() + p * V, V),
                  kTol)
            << "seq " << s << " position " << p;
      }
    }
    // One decode step for every sequence at once continues each from its own cache.
    Batch d;
    for (size_t s = 0; s < seqs.size(); ++s) {
      const int32_t tok = seqs[(s + 1) % seqs.size()][0] == 1 ? 403 : 7;
      d.tokens.push_back(tok);
      d.seqs.push_back({static_cast<int64_t>(s), 1, static_cast<int64_t>(seqs[s].size()),
                        b.seqs[s].block_table, 1});
    }
    ASSERT_TRUE(model.Forward(d, kv->get(), &pool, &out).ok());
    for (size_t s = 0; s < seqs.size(); ++s) {
      std::vector<int32_t> ext = seqs[s];
      ext.push_back(d.tokens[s]);
      const std::vector<float> one =
          AllLogits(model, ext, &pool, kDefaultBlockSize, kDefaultKvDtype);
      ASSERT_LT(MaxAbsDiff(out.Row(s), one.data() + (ext.size() - 1) * V, V), kTol) << "seq " << s;
    }
  }
}

// A prefix shared within one step (engine/scheduler.h): sequence B's cached positions are the
// blocks sequence A writes in the same batch, plus a slot copy of A's partial block
// (SequenceSlice::copy_src); B computes only its own last tokens and gets the logits of one
// plain pass over its tokens.
TEST(BatchTest, PrefixWrittenAndCopiedInTheSameStepMatchesOnePass) {
  Fixture f = LoadFixture();
  if (f.model_paths.empty()) GTEST_SKIP() << "testdata/models not found";
  std::vector<int32_t> a = f.seqs["S4"];
  a.resize(40);  // 2 full blocks of 16, then 8 tokens
  std::vector<int32_t> b(a.begin(), a.begin() + 37);
  for (int32_t t : {7, 9, 11}) b.push_back(t);
  ThreadPool pool(1);
  for (const std::string& path : f.model_paths) {
    SCOPED_TRACE(path);
    auto m = Model::Load(path);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    Model& model = **m;
    const int64_t V = model.config().n_vocab;
    auto kv = model.CreateKvCache(8);
    ASSERT_TRUE(kv.ok());
    Batch batch;
    batch.tokens = a;
    batch.tokens.insert(batch.tokens.end(), b.begin() + 37, b.end());
    batch.seqs.push_back({0, 40, 0, {7, 6, 5}, 1});
    SequenceSlice sb{40, 3, 37, {7, 6, 4}, 1};
    sb.copy_src = 5;  // positions 32-36 from A's block 5
    batch.seqs.push_back(sb);
    ForwardOutput out;
    ASSERT_TRUE(model.Forward(batch, kv->get(), &pool, &out).ok());
    const std::vector<float> want_a =
        AllLogits(model, a, &pool, kDefaultBlockSize, kDefaultKvDtype);
    const std::vector<float> want_b =
        AllLogits(model, b, &pool, kDefaultBlockSize, kDefaultKvDtype);
    ASSERT_LT(MaxAbsDiff(out.Row(0), want_a.data() + 39 * V, V), kTol);
    ASSERT_LT(MaxAbsDiff(out.Row(1), want_b.data() + 39 * V, V), kTol);
  }
}

// The speculative-decoding seam: a sequence that asks for the logits of its last k new tokens
// (a verify batch of k drafted tokens) gets, row for row, the logits that k single-token
// decode steps would give.
TEST(BatchTest, LastKLogitsOfAVerifyBatchMatchStepByStepDecode) {
  Fixture f = LoadFixture();
  std::vector<std::string> paths = f.model_paths;
  const std::string root = TestdataDir();
  if (!root.empty() && std::filesystem::exists(root + "/stories260K/stories260K.gguf")) {
    paths.push_back(root + "/stories260K/stories260K.gguf");
  }
  if (paths.empty()) GTEST_SKIP() << "testdata models not found";
  ThreadPool pool(1);
  for (const std::string& path : paths) {
    SCOPED_TRACE(path);
    auto m = Model::Load(path);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    Model& model = **m;
    const int64_t V = model.config().n_vocab;
    // A prompt of 21 tokens, then 5 more: one verify batch of 5 vs 5 decode steps.
    std::vector<int32_t> ids;
    for (int i = 0; i < 26; ++i) ids.push_back(static_cast<int32_t>((i * 37 + 11) % V));
    const int64_t prompt = 21, k = 5;
    std::vector<int32_t> table = {5, 2, 7};
    auto kv_a = model.CreateKvCache(8);
    auto kv_b = model.CreateKvCache(8);
    ASSERT_TRUE(kv_a.ok() && kv_b.ok());
    ForwardOutput out;
    for (KvCache* kv : {kv_a->get(), kv_b->get()}) {
      Batch b;
      b.tokens.assign(ids.begin(), ids.begin() + prompt);
      b.seqs.push_back({0, prompt, 0, table, 1});
      ASSERT_TRUE(model.Forward(b, kv, &pool, &out).ok());
    }
    // Verify batch: the last known token plus 4 drafts, 5 rows.
    Batch v;
    v.tokens.assign(ids.begin() + prompt, ids.end());
    v.seqs.push_back({0, k, prompt, table, k});
    ForwardOutput verify;
    ASSERT_TRUE(model.Forward(v, kv_a->get(), &pool, &verify).ok());
    ASSERT_EQ(verify.n_rows, k);
    for (int64_t j = 0; j < k; ++j) {
      Batch d;
      d.tokens = {ids[prompt + j]};
      d.seqs.push_back({0, 1, prompt + j, table, 1});
      ASSERT_TRUE(model.Forward(d, kv_b->get(), &pool, &out).ok());
      EXPECT_LT(MaxAbsDiff(verify.Row(j), out.Row(0), V), kTol) << "row " << j;
    }
    // num_logits outside [1, n_tokens] is refused.
    v.seqs[0].num_logits = k + 1;
    EXPECT_FALSE(model.Forward(v, kv_a->get(), &pool, &verify).ok());
    v.seqs[0].num_logits = 0;
    EXPECT_FALSE(model.Forward(v, kv_a->get(), &pool, &verify).ok());
  }
}

}  // namespace
}  // namespace tachyon::model
