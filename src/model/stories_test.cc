// stories260K against llama2.c's logits and greedy generations (testdata/stories260K).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "model/model.h"
#include "model/test_util.h"
#include "util/testing/testdata.h"

namespace tachyon::model {
namespace {

using testing::AllLogits;
using testing::MaxAbsDiff;
using testing::ReadF32;
using testing::ReadJson;

class StoriesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TestdataDir();
    if (dir_.empty()) GTEST_SKIP() << "testdata not found (set TACHYON_TESTDATA)";
    dir_ += "/stories260K";
    auto m = Model::Load(dir_ + "/stories260K.gguf");
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(*m);
    generations_ = ReadJson(dir_ + "/reference/generations.json");
  }
  std::string dir_;
  std::unique_ptr<Model> model_;
  nlohmann::json generations_;
  ThreadPool pool_{2};
};

TEST_F(StoriesTest, Config) {
  const ModelConfig& c = model_->config();
  EXPECT_EQ(c.arch, "llama");
  EXPECT_EQ(c.n_vocab, 512);
  EXPECT_EQ(c.n_embd, 64);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(model_->KvBytesPerBlock(16, KvDtype::kF32), size_t{2 * 5 * 16 * 4 * 8 * 4});
  // f16 by default: half the bytes, so a memory budget holds twice the blocks.
  EXPECT_EQ(model_->KvBytesPerBlock(16), size_t{2 * 5 * 16 * 4 * 8 * 2});
  EXPECT_EQ(model_->KvBytesPerBlock(16, KvDtype::kBf16), size_t{2 * 5 * 16 * 4 * 8 * 2});
  // head_dim 8 cannot be stored as q8_0 (32-element blocks): a clear error, no crash.
  auto q8 = model_->CreateKvCache(4, 16, KvDtype::kQ8_0);
  ASSERT_FALSE(q8.ok());
  EXPECT_NE(q8.status().ToString().find("multiple of 32"), std::string::npos);
}

// With the default f16 KV cache, logits stay within kF16KvTol of llama2.c's (f32) logits.
// Measured: max |d| 2.2e-2 over the 128 positions of p00 (logits span about +-15 here; K/V
// keep 11 significant bits), and every greedy generation is unchanged (test below).
constexpr float kF16KvTol = 5e-2f;

TEST_F(StoriesTest, F16KvCacheStaysCloseToLlama2c) {
  auto index = ReadJson(dir_ + "/reference/logits_index.json");
  for (const auto& e : index["entries"]) {
    if (!e["position"].is_string()) continue;  // "all"
    std::vector<int32_t> ids = e["input_token_ids"].get<std::vector<int32_t>>();
    std::vector<float> want = ReadF32(dir_ + "/reference/" + e["file"].get<std::string>());
    std::vector<float> got = AllLogits(*model_, ids, &pool_, 16, KvDtype::kF16);
    float worst = 0;
    for (size_t p = 0; p < ids.size(); ++p) {
      worst = std::max(worst, MaxAbsDiff(got.data() + p * 512, want.data() + p * 512, 512));
    }
    EXPECT_LT(worst, kF16KvTol);
    std::printf("f16 KV: max |logit - llama2.c| over %zu positions = %.2e\n", ids.size(), worst);
  }
}

TEST_F(StoriesTest, AllPositionsMatchLlama2c) {
  auto index = ReadJson(dir_ + "/reference/logits_index.json");
  for (const auto& e : index["entries"]) {
    if (!e["position"].is_string()) continue;  // "all"
    std::vector<int32_t> ids = e["input_token_ids"].get<std::vector<int32_t>>();
    std::vector<float> want = ReadF32(dir_ + "/reference/" + e["file"].get<std::string>());
    ASSERT_EQ(want.size(), ids.size() * 512);
    std::vector<float> got = AllLogits(*model_, ids, &pool_);
    for (size_t p = 0; p < ids.size(); ++p) {
      ASSERT_LT(MaxAbsDiff(got.data() + p * 512, want.data() + p * 512, 512), 1e-3f)
          << "first divergence at position " << p;
    }
  }
}

// Every single-position reference file: run the case's ids up to that position in one pass.
TEST_F(StoriesTest, ReferencePositionsMatchLlama2c) {
  std::map<std::string, std::vector<int32_t>> all_ids;
  for (const auto& c : generations_["cases"]) {
    all_ids[c["id"].get<std::string>()] = c["all_ids"].get<std::vector<int32_t>>();
  }
  auto index = ReadJson(dir_ + "/reference/logits_index.json");
  std::map<std::string, std::vector<float>> cache;
  int checked = 0;
  for (const auto& e : index["entries"]) {
    if (!e["position"].is_number()) continue;
    const std::string id = e["case"];
    const int64_t pos = e["position"];
    ASSERT_TRUE(all_ids.count(id)) << id;
    const std::vector<int32_t>& ids = all_ids[id];
    ASSERT_LT(pos, static_cast<int64_t>(ids.size()));
    ASSERT_EQ(ids[pos], e["input_token_id"].get<int32_t>());
    if (!cache.count(id)) cache[id] = AllLogits(*model_, ids, nullptr);
    std::vector<float> want = ReadF32(dir_ + "/reference/" + e["file"].get<std::string>());
    ASSERT_EQ(want.size(), 512u);
    EXPECT_LT(MaxAbsDiff(cache[id].data() + pos * 512, want.data(), 512), 1e-3f)
        << id << " position " << pos;
    ++checked;
  }
  EXPECT_GT(checked, 40);
}

// Greedy decoding, one token per Forward after the prompt, stopping like llama2.c run.c:
// when the model emits BOS (id 1) or after `steps` positions.
// Run with an f32 KV cache (exact) and with the default f16 one, which must keep every
// greedy token.
TEST_F(StoriesTest, GreedyGenerationsMatchLlama2c) {
  for (KvDtype dtype : {KvDtype::kF32, KvDtype::kF16}) {
    SCOPED_TRACE(kernels::KvDtypeName(dtype));
    for (const auto& c : generations_["cases"]) {
      const std::vector<int32_t> prompt = c["prompt_ids"].get<std::vector<int32_t>>();
      const std::vector<int32_t> want = c["generated_ids"].get<std::vector<int32_t>>();
      const int64_t steps = c["steps"];
      const int64_t bs = 16, n_blocks = (steps + bs) / bs + 1;
      auto kv = model_->CreateKvCache(n_blocks, bs, dtype);
      ASSERT_TRUE(kv.ok());
      // Blocks in reverse order: the table, not the id order, must define positions.
      std::vector<int32_t> table(n_blocks);
      for (int64_t i = 0; i < n_blocks; ++i) table[i] = static_cast<int32_t>(n_blocks - 1 - i);
      Batch b;
      b.tokens = prompt;
      b.seqs.push_back({0, static_cast<int64_t>(prompt.size()), 0, table, 1});
      ForwardOutput out;
      std::vector<int32_t> got;
      int64_t pos = static_cast<int64_t>(prompt.size());
      for (;;) {
        ASSERT_TRUE(model_->Forward(b, kv->get(), nullptr, &out).ok());
        const float* row = out.Row(out.seq_first_row[0]);
        const int32_t next = static_cast<int32_t>(std::max_element(row, row + 512) - row);
        if (next == 1) break;  // BOS: run.c stops
        got.push_back(next);
        if (pos >= steps) break;  // run.c forwards `steps` positions in all
        b.tokens = {next};
        b.seqs[0].token_start = 0;
        b.seqs[0].n_tokens = 1;
        b.seqs[0].pos_start = pos++;
      }
      EXPECT_EQ(got, want) << "case " << c["id"];
      EXPECT_EQ(c["stop_reason"] == "bos", got.size() + prompt.size() < static_cast<size_t>(steps))
          << c["id"];
    }
  }
}

}  // namespace
}  // namespace tachyon::model
