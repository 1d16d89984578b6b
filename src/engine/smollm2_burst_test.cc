// A burst with one long prefix on the real SmolLM2-135M-Instruct (skipped when absent): requests
// added before the same step share the prefix blocks the first one computes in that very step
// (same-step attachment, engine/scheduler.h), so every request samples its first token in the
// first step, and the greedy tokens equal those of the same requests run one after the other
// (the later ones then take the prefix from the cache).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/model_adapter.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/testing/testdata.h"

namespace tachyon::engine {
namespace {

constexpr int kBurstNewTokens = 12;

struct Outcome {
  std::vector<std::vector<int32_t>> tokens;  // per request
  std::vector<int64_t> first_token_step;     // per request, 1-based
  std::vector<int64_t> cached;               // usage.cached_prompt_tokens per request
};

// burst: all requests added before the first step; else each alone, one after the other, on the
// same engine.
Outcome RunPrompts(std::shared_ptr<model::Model> model,
                   const std::vector<std::vector<int32_t>>& prompts, bool burst) {
  EngineConfig c;
  c.kv.num_blocks = 256;
  c.kv.block_size = 16;
  c.scheduler.max_num_batched_tokens = 2048;
  c.max_model_len = 1024;
  auto exec = ModelAdapter::Create(std::move(model), c.kv.num_blocks, c.kv.block_size, 2);
  EXPECT_TRUE(exec.ok()) << exec.status().ToString();
  auto engine = std::move(Engine::Create(c, exec->get())).value();
  const size_t n = prompts.size();
  Outcome run{std::vector<std::vector<int32_t>>(n), std::vector<int64_t>(n, -1),
              std::vector<int64_t>(n, -1)};
  int64_t step = 0;
  auto add = [&](size_t i) {
    EngineRequest r;
    r.prompt_tokens = prompts[i];
    r.params.temperature = 0;
    r.params.max_tokens = kBurstNewTokens;
    r.params.ignore_eos = true;
    Status s = engine->Add(i, std::move(r));
    EXPECT_TRUE(s.ok()) << s.ToString();
  };
  auto drain = [&] {
    while (engine->HasWork()) {
      ++step;
      for (const RequestOutput& o : engine->Step()) {
        EXPECT_NE(o.finish_reason, FinishReason::kError) << o.error.ToString();
        std::vector<int32_t>& t = run.tokens[o.request_id];
        if (t.empty() && !o.token_ids.empty()) run.first_token_step[o.request_id] = step;
        t.insert(t.end(), o.token_ids.begin(), o.token_ids.end());
        if (o.finished) run.cached[o.request_id] = o.usage.cached_prompt_tokens;
      }
    }
  };
  for (size_t i = 0; i < n; ++i) {
    add(i);
    if (!burst) drain();
  }
  drain();
  EXPECT_EQ(engine->Metrics().kv.used_blocks, 0);
  return run;
}

TEST(SmolLm2BurstTest, SameStepAttachmentMatchesSequentialRuns) {
  const std::string path = SmolLm2Path();
  if (path.empty()) {
    GTEST_SKIP() << "SmolLM2-135M-Instruct missing (scripts/setup.sh fetches it; or set "
                    "TACHYON_SMOLLM2)";
  }
  auto m = model::Model::Load(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::shared_ptr<model::Model> model(std::move(m).value());
  auto tok = tokenizer::Tokenizer::FromFile(path);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();

  const std::string doc =
      "You are a helpful assistant for a small bakery. The bakery opens at seven in the "
      "morning and closes at six in the evening, every day but Monday. It sells bread, "
      "croissants, cakes and coffee. The sourdough is baked twice a day, at six and at noon. "
      "Birthday cakes must be ordered two days ahead. The bakery does not deliver, but it "
      "keeps orders for a day. Answer the customer's question in one short sentence.\n";
  const char* questions[] = {"When does the bakery open?", "Can I order a birthday cake today?",
                             "Do you deliver to my office?", "When is the sourdough baked?"};
  std::vector<std::vector<int32_t>> prompts;
  for (const char* q : questions) {
    prompts.push_back((*tok)->Encode(doc + "Question: " + q + "\nAnswer:"));
  }
  // Leading tokens two prompts share.
  auto common = [&](size_t a, size_t b) {
    return static_cast<int64_t>(
        std::mismatch(prompts[a].begin(), prompts[a].end(), prompts[b].begin(), prompts[b].end())
            .first -
        prompts[a].begin());
  };
  ASSERT_GE(common(0, 1), 64) << "the document should span several 16-token blocks";

  const Outcome burst = RunPrompts(model, prompts, /*burst=*/true);
  const Outcome alone = RunPrompts(model, prompts, /*burst=*/false);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(burst.tokens[i], alone.tokens[i]) << "request " << i;
    EXPECT_EQ(burst.tokens[i].size(), static_cast<size_t>(kBurstNewTokens));
    // Every first token in the step that computed the shared prefix, computed there once.
    EXPECT_EQ(burst.first_token_step[i], 1) << "request " << i;
    // All it shares with request 0: the full blocks, and the rest copied from request 0's
    // partial block in the step.
    EXPECT_EQ(burst.cached[i], i == 0 ? 0 : common(0, i)) << "request " << i;
    // One after the other: the full blocks an earlier prompt left in the cache.
    int64_t blocks = 0;
    for (size_t j = 0; j < i; ++j) blocks = std::max(blocks, common(j, i) / 16);
    EXPECT_EQ(alone.cached[i], blocks * 16) << "request " << i;
  }
}

}  // namespace
}  // namespace tachyon::engine
