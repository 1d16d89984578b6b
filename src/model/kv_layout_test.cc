// KV layer groups (KvLayout, model/kv_cache.h): how Gemma-style layer patterns are grouped, and
// Forward over a grouped cache whose sliding group's blocks outside the window point at a block
// full of NaN (or are -1): the logits must equal those of the plain one-table cache exactly,
// which they cannot if any kernel reads a position outside the window.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "model/kv_cache.h"
#include "model/model.h"
#include "model/synth.h"
#include "model/test_util.h"
#include "util/thread_pool.h"

namespace tachyon::model {
namespace {

std::vector<int64_t> GemmaWindows(int64_t n_layers, int64_t period, int64_t window) {
  std::vector<int64_t> w(n_layers);
  for (int64_t il = 0; il < n_layers; ++il) w[il] = il % period < period - 1 ? window : 0;
  return w;
}

TEST(KvLayoutTest, GemmaPatternsFormEqualGroups) {
  // gemma-3-270m: 18 layers, every 6th global: 3 global, 15 sliding -> 6 groups of 3.
  KvLayout l = KvLayout::Hybrid(GemmaWindows(18, 6, 512));
  EXPECT_EQ(l.layers_per_block, 3);
  EXPECT_EQ(l.group_window, (std::vector<int64_t>{0, 512, 512, 512, 512, 512}));
  for (int il : {5, 11, 17}) EXPECT_EQ(l.layer_group[il], 0) << il;
  EXPECT_EQ(l.layer_slot[11], 1);
  EXPECT_EQ(l.layer_group[0], 1);
  EXPECT_EQ(l.layer_group[6], 2);  // 0 1 2 | 3 4 6 | 7 8 9 | ...
  EXPECT_EQ(l.layer_slot[6], 2);
  // Gemma 3 1B: 26 layers: 4 global, 22 sliding -> 13 groups of 2.
  l = KvLayout::Hybrid(GemmaWindows(26, 6, 512));
  EXPECT_EQ(l.layers_per_block, 2);
  EXPECT_EQ(l.n_groups(), 13);
  // Every layer the same: the plain cache (one group), with its window.
  l = KvLayout::Hybrid(std::vector<int64_t>(4, 0));
  EXPECT_EQ(l.layers_per_block, 4);
  EXPECT_EQ(l.group_window, std::vector<int64_t>{0});
  EXPECT_EQ(KvLayout::Hybrid(std::vector<int64_t>(4, 64)).group_window, std::vector<int64_t>{64});
  // A page holds one group's layers: the sliding groups' blocks are a sixth of the plain ones.
  EXPECT_EQ(KvCache::BytesPerBlock(KvLayout::Hybrid(GemmaWindows(18, 6, 512)), 16, 1, 256),
            KvCache::BytesPerBlock(18, 16, 1, 256) / 6);
}

class GroupedForward : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() /
             ("tachyon_kv_layout_" + std::to_string(getpid()) + ".gguf"))
                .string();
    SynthOptions o;
    o.arch = "gemma3";  // window 8 on layer 0, layer 1 global
    o.type = "F32";
    o.seed = 5;
    ASSERT_TRUE(WriteSynthModel(o, path_, nullptr).ok());
    auto m = Model::Load(path_);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::move(*m);
  }
  void TearDown() override { std::filesystem::remove(path_); }

  std::string path_;
  std::unique_ptr<Model> model_;
};

TEST_F(GroupedForward, SlidingBlocksOutsideTheWindowAreNeverRead) {
  const int64_t bs = 4, n = 40;
  const KvLayout layout = model_->HybridKvLayout();
  ASSERT_EQ(layout.n_groups(), 2);
  ASSERT_EQ(layout.group_window, (std::vector<int64_t>{0, kSynthGemmaWindow}));
  auto plain = model_->CreateKvCache(12, bs, KvDtype::kF32);
  auto grouped = model_->CreateKvCache(layout, 24, bs, KvDtype::kF32);
  ASSERT_TRUE(plain.ok() && grouped.ok());
  // Block 0 of the grouped cache holds NaN in every layer: reading it poisons the logits.
  const int64_t kv_dim = model_->config().kv_dim();
  std::vector<float> nan(kv_dim, std::numeric_limits<float>::quiet_NaN());
  for (int64_t il = 0; il < model_->config().n_layers; ++il) {
    for (int64_t s = 0; s < bs; ++s) (*grouped)->Store(il, s, nan.data(), nan.data());
  }
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back((i * 37 + 11) % 512);
  ThreadPool pool(2);
  ForwardOutput a, b;
  // Chunks of 13 and 11, then one token at a time: windows move past whole blocks.
  std::vector<int64_t> steps = {13, 11};
  while (13 + 11 + static_cast<int64_t>(steps.size()) - 2 < n) steps.push_back(1);
  int64_t pos = 0;
  for (size_t step = 0; step < steps.size(); ++step) {
    const int64_t len = steps[step], end = pos + len, nb = (end + bs - 1) / bs;
    const int64_t live = std::max<int64_t>(0, pos - kSynthGemmaWindow + 1) / bs;
    Batch p, g;
    p.tokens = g.tokens = std::vector<int32_t>(ids.begin() + pos, ids.begin() + end);
    p.seqs.push_back({0, len, pos, testing::Blocks(1, nb), len});
    std::vector<int32_t> table = testing::Blocks(1, nb);  // group 0 (global): blocks 1..
    for (int64_t i = 0; i < nb; ++i) {
      // Outside the window: the poisoned block, or -1 (never dereferenced either).
      table.push_back(i >= live ? static_cast<int32_t>(12 + i) : (i % 2 ? -1 : 0));
    }
    g.seqs.push_back({0, len, pos, table, len});
    ASSERT_TRUE(model_->Forward(p, plain->get(), &pool, &a).ok());
    Status st = model_->Forward(g, grouped->get(), &pool, &b);
    ASSERT_TRUE(st.ok()) << st.ToString();
    for (int64_t r = 0; r < len * a.n_vocab; ++r) {
      ASSERT_EQ(a.logits[r], b.logits[r]) << "step " << step << " value " << r;
    }
    pos = end;
  }
  EXPECT_EQ(pos, n);
}

TEST_F(GroupedForward, BadGroupedTablesAreRefused) {
  const KvLayout layout = model_->HybridKvLayout();
  auto kv = model_->CreateKvCache(layout, 16, 4, KvDtype::kF32);
  ASSERT_TRUE(kv.ok());
  ThreadPool pool(1);
  ForwardOutput out;
  Batch b;
  b.tokens = {1, 2};
  // 2 new tokens at position 12 (window 8: positions 5..13, blocks 1..3 of the sliding group).
  b.seqs.push_back({0, 2, 12, {1, 2, 3, 4, 5, 6, 7, 8}, 1});
  EXPECT_TRUE(model_->Forward(b, kv->get(), &pool, &out).ok());
  b.seqs[0].block_table = {1, 2, 3, 4, -1, 6, 7, 8};  // block 0 is outside the window
  EXPECT_TRUE(model_->Forward(b, kv->get(), &pool, &out).ok());
  b.seqs[0].block_table = {1, 2, 3, 4, 5, -1, 7, 8};  // block 1 is inside it
  Status st = model_->Forward(b, kv->get(), &pool, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  b.seqs[0].block_table = {1, 2, 3, 4, -1, 6, 7};  // not two equal sections
  st = model_->Forward(b, kv->get(), &pool, &out);
  EXPECT_NE(st.message().find("sections"), std::string::npos) << st.message();
  b.seqs[0].block_table = {-1, 2, 3, 4, 5, 6, 7, 8};  // the global group needs every block
  EXPECT_FALSE(model_->Forward(b, kv->get(), &pool, &out).ok());
  // A layout that would keep a shorter window than the layer reads, or window a global layer.
  KvLayout narrow = layout;
  narrow.group_window[1] = kSynthGemmaWindow - 1;
  EXPECT_FALSE(model_->CreateKvCache(narrow, 16, 4, KvDtype::kF32).ok());
  KvLayout global = layout;
  global.group_window[0] = 64;
  EXPECT_FALSE(model_->CreateKvCache(global, 16, 4, KvDtype::kF32).ok());
}

}  // namespace
}  // namespace tachyon::model
