// The engine over the real model: stories260K (testdata) decoded greedily through the
// scheduler, chunked prefill, prefix cache and preemption must reproduce llama2.c's greedy
// generations token for token. Skipped when the testdata is absent.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "engine/engine_core.h"
#include "engine/model_adapter.h"
#include "engine/tokenizer_adapter.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/testing/testdata.h"

namespace tachyon::engine {
namespace {

struct Case {
  std::vector<int32_t> prompt;
  std::vector<int32_t> expected;  // generated ids, + the terminating BOS when it stopped on it
};

class StoriesEngineTest : public ::testing::Test {
 protected:
  static constexpr size_t kMaxNew = 40;

  void SetUp() override {
    const std::string dir = TestdataDir();
    if (dir.empty()) GTEST_SKIP() << "testdata not found (../shared/testdata)";
    path_ = dir + "/stories260K/stories260K.gguf";
    std::ifstream probe(path_);
    if (!probe) GTEST_SKIP() << "missing " << path_;
    auto m = model::Model::Load(path_);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    model_ = std::shared_ptr<model::Model>(std::move(m).value());
    std::ifstream f(dir + "/stories260K/reference/generations.json");
    ASSERT_TRUE(f.good());
    nlohmann::json j = nlohmann::json::parse(f);
    for (const auto& c : j["cases"]) {
      Case k;
      k.prompt = c["prompt_ids"].get<std::vector<int32_t>>();
      k.expected = c["generated_ids"].get<std::vector<int32_t>>();
      if (c["stop_reason"] == "bos") k.expected.push_back(1);
      // Greedy decoding is a function of the prefix: the first kMaxNew tokens must match
      // (keeps the test fast, under ASan too).
      if (k.expected.size() > kMaxNew) k.expected.resize(kMaxNew);
      cases_.push_back(std::move(k));
    }
  }

  EngineConfig Config(int num_blocks, int64_t budget) const {
    EngineConfig c;
    c.kv.num_blocks = num_blocks;
    c.kv.block_size = 16;
    c.scheduler.max_num_batched_tokens = budget;
    c.scheduler.max_num_seqs = 16;
    c.max_model_len = 512;  // llama2.c seq_len (the GGUF says 128; the references go past it)
    c.eos_token_ids = {1};  // llama2.c stops when the argmax is BOS
    return c;
  }

  EngineRequest Request(const Case& k) const {
    EngineRequest r;
    r.prompt_tokens = k.prompt;
    r.params.temperature = 0;
    r.params.max_tokens = static_cast<int>(k.expected.size());
    return r;
  }

  // Runs every case at once; returns the generated ids per case.
  std::vector<std::vector<int32_t>> RunAll(const EngineConfig& c, EngineMetrics* metrics) {
    auto exec = ModelAdapter::Create(model_, c.kv.num_blocks, c.kv.block_size, 1);
    EXPECT_TRUE(exec.ok());
    auto engine = std::move(Engine::Create(c, exec->get())).value();
    std::vector<std::vector<int32_t>> got(cases_.size());
    for (size_t i = 0; i < cases_.size(); ++i) {
      Status s = engine->Add(i, Request(cases_[i]));
      EXPECT_TRUE(s.ok()) << s.ToString();
    }
    for (int step = 0; step < 100000 && engine->HasWork(); ++step) {
      for (const RequestOutput& o : engine->Step()) {
        EXPECT_NE(o.finish_reason, FinishReason::kError) << o.error.ToString();
        got[o.request_id].insert(got[o.request_id].end(), o.token_ids.begin(), o.token_ids.end());
      }
    }
    *metrics = engine->Metrics();
    return got;
  }

  std::string path_;
  std::shared_ptr<model::Model> model_;
  std::vector<Case> cases_;
};

TEST_F(StoriesEngineTest, BatchedChunkedGreedyMatchesLlama2c) {
  EngineMetrics m;
  auto got = RunAll(Config(256, 8), &m);  // prompts of up to 19 tokens: chunked by 8
  for (size_t i = 0; i < cases_.size(); ++i) EXPECT_EQ(got[i], cases_[i].expected) << "case " << i;
  EXPECT_EQ(m.kv.used_blocks, 0);
}

TEST_F(StoriesEngineTest, TightPoolPreemptsAndStillMatches) {
  EngineMetrics m;
  auto got = RunAll(Config(12, 64), &m);  // 192 positions for ~420 needed
  for (size_t i = 0; i < cases_.size(); ++i) EXPECT_EQ(got[i], cases_[i].expected) << "case " << i;
  EXPECT_GT(m.num_preemptions, 0);
  EXPECT_EQ(m.kv.used_blocks, 0);
}

// Speculative decoding with n-gram drafts (stories repeat their phrases): the same greedy
// tokens, batched and chunked, and under preemption, with drafts accepted.
TEST_F(StoriesEngineTest, NgramSpeculationMatchesLlama2c) {
  for (int num_blocks : {256, 12}) {
    EngineConfig c = Config(num_blocks, num_blocks == 256 ? 16 : 64);
    c.speculative.method = spec::SpecMethod::kNgram;
    c.speculative.num_speculative_tokens = 4;
    c.speculative.prompt_lookup_min = 1;
    c.speculative.prompt_lookup_max = 3;
    c.speculative.min_acceptance_rate = 0;
    c.speculative.disable_by_batch_size = 64;
    EngineMetrics m;
    auto got = RunAll(c, &m);
    for (size_t i = 0; i < cases_.size(); ++i) {
      EXPECT_EQ(got[i], cases_[i].expected) << "case " << i << ", " << num_blocks << " blocks";
    }
    EXPECT_GT(m.spec.num_accepted_tokens, 0);
    EXPECT_LT(m.spec.num_accepted_tokens, m.spec.num_draft_tokens);
    EXPECT_EQ(m.kv.used_blocks, 0);
    if (num_blocks == 12) EXPECT_GT(m.num_preemptions, 0);
  }
}

TEST_F(StoriesEngineTest, EngineCoreStreamsTextWithStopString) {
  auto tok = tokenizer::Tokenizer::FromFile(path_);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer(std::move(tok).value());
  EngineConfig c = Config(128, 32);
  c.detokenizer = std::make_shared<TokenizerDetokenizer>(tokenizer);
  auto exec = ModelAdapter::Create(model_, c.kv.num_blocks, c.kv.block_size, 1);
  ASSERT_TRUE(exec.ok());
  auto core = std::move(EngineCore::Create(c, std::move(exec).value())).value();

  const Case& k = cases_[0];
  const std::string full = tokenizer->Decode(k.expected, /*skip_special=*/true);
  auto s = core->AddRequest(Request(k));
  ASSERT_TRUE(s.ok());
  std::string text;
  while (auto o = (*s)->Next()) text += o->text;
  EXPECT_EQ(text, full);

  // Stop at the second sentence's end (spans whatever tokens it spans).
  const size_t first_dot = full.find('.');
  ASSERT_NE(first_dot, std::string::npos);
  EngineRequest r = Request(k);
  r.params.stop = {"."};
  s = core->AddRequest(r);
  ASSERT_TRUE(s.ok());
  text.clear();
  FinishReason finish = FinishReason::kNone;
  int64_t cached = 0;
  while (auto o = (*s)->Next()) {
    text += o->text;
    if (o->finished) {
      finish = o->finish_reason;
      cached = o->usage.cached_prompt_tokens;
    }
  }
  EXPECT_EQ(text, full.substr(0, first_dot));
  EXPECT_EQ(finish, FinishReason::kStop);
  EXPECT_EQ(cached, 0);  // a 5-token prompt has no full 16-token block to reuse

  // A 19-token prompt run twice: the second reuses its first 16 positions.
  const Case& longest = cases_[7];
  ASSERT_EQ(longest.prompt.size(), 19u);
  std::vector<int32_t> first, second;
  for (std::vector<int32_t>* out : {&first, &second}) {
    s = core->AddRequest(Request(longest));
    ASSERT_TRUE(s.ok());
    while (auto o = (*s)->Next()) {
      out->insert(out->end(), o->token_ids.begin(), o->token_ids.end());
      if (o->finished) cached = o->usage.cached_prompt_tokens;
    }
  }
  EXPECT_EQ(cached, 16);
  EXPECT_EQ(first, longest.expected);
  EXPECT_EQ(second, longest.expected);
}

}  // namespace
}  // namespace tachyon::engine
