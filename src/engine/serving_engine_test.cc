// BuildServingEngine over stories260K (testdata): the composition root's wiring, sizing and
// errors. Skipped when the testdata is absent.
#include "engine/serving_engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "util/testing/testdata.h"

namespace tachyon::engine {
namespace {

class ServingEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = TestdataDir();
    if (dir.empty()) GTEST_SKIP() << "testdata not found (../shared/testdata)";
    options_.model = dir + "/stories260K/stories260K.gguf";
    if (!std::filesystem::exists(options_.model)) GTEST_SKIP() << "missing " << options_.model;
    options_.threads = 1;
    options_.max_num_seqs = 4;
  }
  ServingOptions options_;
};

TEST_F(ServingEngineTest, BuildsARunningEngine) {
  auto se = BuildServingEngine(options_);
  ASSERT_TRUE(se.ok()) << se.status().ToString();
  EXPECT_EQ(se->name, "stories260K");
  ASSERT_NE(se->tokenizer, nullptr);
  EXPECT_FALSE(se->chat_template.has_value());                       // stories260K has none
  EXPECT_EQ(se->kv.max_model_len, se->model->config().n_ctx_train);  // trained context fits
  EXPECT_FALSE(se->kv.lowered);
  const int64_t per_seq = (se->kv.max_model_len + se->block_size - 1) / se->block_size;
  EXPECT_EQ(se->kv.num_blocks, 4 * per_seq);  // max_num_seqs full contexts
  for (int32_t id : se->tokenizer->EogIds()) {
    EXPECT_NE(std::find(se->eos_token_ids.begin(), se->eos_token_ids.end(), id),
              se->eos_token_ids.end());
  }
  EXPECT_EQ(se->core->config().max_model_len, se->kv.max_model_len);
  EXPECT_EQ(se->core->config().eos_token_ids, se->eos_token_ids);
  EXPECT_NE(se->summary.find("KV cache"), std::string::npos);

  EngineRequest req;
  req.prompt_tokens = se->tokenizer->Encode("Once upon a time");
  req.params.temperature = 0;
  req.params.max_tokens = 5;
  req.params.ignore_eos = true;
  auto stream = se->core->AddRequest(std::move(req));
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  int64_t tokens = 0;
  std::string text;
  while (auto out = (*stream)->Next()) {
    tokens += static_cast<int64_t>(out->token_ids.size());
    text += out->text;
  }
  EXPECT_EQ(tokens, 5);
  EXPECT_FALSE(text.empty());
}

TEST_F(ServingEngineTest, ExplicitOptionsReachTheEngine) {
  const std::string tpl = ::testing::TempDir() + "/serving_engine_test.jinja";
  {
    std::ofstream f(tpl);
    f << "{% for m in messages %}{{ m.content }}{% endfor %}";
  }
  options_.chat_template_path = tpl;
  options_.served_name = "story";
  options_.max_model_len = 64;
  options_.kv_cache_blocks = 10;
  options_.enable_prefix_caching = false;
  options_.priority_scheduling = true;
  auto se = BuildServingEngine(options_);
  std::filesystem::remove(tpl);
  ASSERT_TRUE(se.ok()) << se.status().ToString();
  EXPECT_EQ(se->name, "story");
  EXPECT_TRUE(se->chat_template.has_value());
  EXPECT_EQ(se->kv.max_model_len, 64);
  EXPECT_EQ(se->kv.num_blocks, 10);
  EXPECT_FALSE(se->core->config().kv.enable_prefix_caching);
  EXPECT_EQ(se->core->config().scheduler.policy, SchedulePolicy::kPriority);
}

TEST_F(ServingEngineTest, ErrorsNameWhatIsWrong) {
  ServingOptions o = options_;
  o.max_model_len = 4096;
  o.kv_cache_blocks = 8;  // 128 tokens
  auto se = BuildServingEngine(o);
  ASSERT_FALSE(se.ok());
  EXPECT_NE(se.status().message().find("--max-model-len"), std::string::npos)
      << se.status().message();

  o = options_;
  o.kv_cache_bytes = 1;  // not one block
  se = BuildServingEngine(o);
  ASSERT_FALSE(se.ok());
  EXPECT_NE(se.status().message().find("--kv-cache-memory"), std::string::npos)
      << se.status().message();

  o = options_;
  o.chat_template_path = ::testing::TempDir() + "/no-such-template.jinja";
  se = BuildServingEngine(o);
  ASSERT_FALSE(se.ok());
  EXPECT_NE(se.status().message().find("no-such-template"), std::string::npos);

  o = options_;
  o.kv_dtype = model::KvDtype::kQ8_0;  // stories260K's head_dim is not a multiple of 32
  se = BuildServingEngine(o);
  ASSERT_FALSE(se.ok());
  EXPECT_NE(se.status().message().find("--kv-cache-dtype"), std::string::npos);

  o = options_;
  o.model = ::testing::TempDir() + "/no-such-model.gguf";
  EXPECT_FALSE(BuildServingEngine(o).ok());
}

}  // namespace
}  // namespace tachyon::engine
