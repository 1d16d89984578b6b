// PoolingEngine over real models: batching (several requests in one step), validation, stop;
// through BuildServingEngine, stories260K with --pooling last and all-MiniLM-L6-v2 (skipped
// when absent: scripts/fetch_model.sh --minilm) reproducing the reference embeddings from its
// own tokenizer's ids.
#include "engine/pooling_engine.h"

#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "engine/serving_engine.h"
#include "util/testing/testdata.h"

namespace tachyon::engine {
namespace {

namespace fs = std::filesystem;

// Collects results; Wait(n) blocks until n have arrived.
struct Collector {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<PoolingResult> results;
  PoolingCallback Callback() {
    return [this](PoolingResult r) {
      std::lock_guard<std::mutex> lock(mu);
      results.push_back(std::move(r));
      cv.notify_all();
    };
  }
  void Wait(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return results.size() >= n; });
  }
};

ServingOptions Stories(const std::string& pooling) {
  ServingOptions o;
  o.model = TestdataDir() + "/stories260K/stories260K.gguf";
  o.pooling = pooling;
  o.threads = 2;
  return o;
}

TEST(PoolingEngine, BatchesWaitingRequestsIntoOneStep) {
  if (TestdataDir().empty()) GTEST_SKIP() << "testdata not found";
  auto se = BuildServingEngine(Stories("last"));
  ASSERT_TRUE(se.ok()) << se.status().ToString();
  ASSERT_EQ(se->core, nullptr);
  ASSERT_NE(se->pooler, nullptr);
  PoolingEngine& pe = *se->pooler;
  EXPECT_EQ(pe.dim(), se->model->config().n_embd);
  Collector c;
  const std::vector<std::vector<int32_t>> inputs = {{1, 400, 30}, {1, 80}, {1, 400, 30}};
  // The first request's callback (on the engine thread) queues three more, which are all
  // waiting when the engine forms its next step: two steps in all.
  ASSERT_TRUE(pe.Submit({{1, 5}, {}}, [&](PoolingResult first) {
                  for (const auto& ids : inputs) {
                    EXPECT_TRUE(pe.Submit({ids, {}}, c.Callback()).ok());
                  }
                  c.Callback()(std::move(first));
                }).ok());
  c.Wait(4);
  EXPECT_EQ(pe.Metrics().num_steps, 2);
  EXPECT_EQ(pe.Metrics().requests_finished, 4);
  std::lock_guard<std::mutex> lock(c.mu);
  for (const auto& r : c.results) {
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    double norm = 0;
    for (float v : r.values) norm += double(v) * v;
    EXPECT_NEAR(norm, 1.0, 1e-5);
  }
  // Results arrive in submission order within a step: inputs 0 and 2 are the same tokens.
  EXPECT_EQ(c.results[1].values, c.results[3].values);
  EXPECT_NE(c.results[1].values, c.results[2].values);
}

TEST(PoolingEngine, RefusesBadInputsAndStops) {
  if (TestdataDir().empty()) GTEST_SKIP() << "testdata not found";
  auto se = BuildServingEngine(Stories("mean"));
  ASSERT_TRUE(se.ok()) << se.status().ToString();
  PoolingEngine& pe = *se->pooler;
  auto noop = [](PoolingResult) { ADD_FAILURE() << "callback of a refused request"; };
  EXPECT_EQ(pe.Submit({{}, {}}, noop).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(pe.Submit({{1, 1 << 20}, {}}, noop).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(pe.Submit({{1, 2}, {0}}, noop).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(pe.Submit({std::vector<int32_t>(pe.config().max_tokens + 1, 1), {}}, noop).code(),
            StatusCode::kInvalidArgument);
  pe.Stop();
  EXPECT_EQ(pe.Submit({{1, 2}, {}}, noop).code(), StatusCode::kUnavailable);
  // Rank pooling needs a head; unknown names are refused.
  EXPECT_FALSE(BuildServingEngine(Stories("rank")).ok());
  EXPECT_FALSE(BuildServingEngine(Stories("max")).ok());
  auto gen = BuildServingEngine(Stories(""));  // a decoder generates unless told otherwise
  ASSERT_TRUE(gen.ok());
  EXPECT_NE(gen->core, nullptr);
  EXPECT_EQ(gen->pooler, nullptr);
}

std::string MiniLmDir() {
  if (const char* p = std::getenv("TACHYON_MINILM")) return p;
  const char* x = std::getenv("XDG_CACHE_HOME");
  const char* h = std::getenv("HOME");
  const std::string base = x && *x == '/' ? std::string(x) : std::string(h ? h : "") + "/.cache";
  return base + "/tachyon/models/all-MiniLM-L6-v2";
}

TEST(PoolingEngine, MiniLmFromTextReproducesReference) {
  const std::string dir = MiniLmDir();
  if (!fs::is_regular_file(dir + "/model.safetensors")) GTEST_SKIP() << "missing " << dir;
  if (TestdataDir().empty()) GTEST_SKIP() << "testdata not found";
  ServingOptions o;
  o.model = dir;
  o.threads = 2;
  auto se = BuildServingEngine(o);
  ASSERT_TRUE(se.ok()) << se.status().ToString();
  EXPECT_EQ(se->pooling, model::PoolingType::kMean);
  EXPECT_EQ(se->pooler->config().max_tokens, 128);  // tokenizer.json truncation
  std::ifstream f(TestdataDir() + "/embeddings/all-MiniLM-L6-v2.json");
  const nlohmann::json ref = nlohmann::json::parse(f);
  Collector c;
  std::vector<std::vector<double>> want;
  for (const auto& cs : ref["cases"]) {
    std::vector<int32_t> ids = se->tokenizer->Encode(cs["text"].get<std::string>());
    const auto ref_ids = cs["ids"].get<std::vector<int32_t>>();
    if (ids.size() > ref_ids.size()) {  // the long text: the reference keeps 127 + [SEP]
      ids.resize(ref_ids.size() - 1);
      ids.push_back(102);  // [SEP]
    }
    EXPECT_EQ(ids, ref_ids) << cs["text"];
    want.push_back(cs["embedding"].get<std::vector<double>>());
    // One at a time, so results come back in order.
    ASSERT_TRUE(se->pooler->Submit({ids, {}}, c.Callback()).ok());
    c.Wait(want.size());
  }
  for (size_t i = 0; i < want.size(); ++i) {
    const std::vector<float>& got = c.results[i].values;
    double ab = 0, aa = 0, bb = 0;
    for (size_t k = 0; k < got.size(); ++k) {
      ab += got[k] * want[i][k];
      aa += double(got[k]) * got[k];
      bb += want[i][k] * want[i][k];
    }
    EXPECT_GE(ab / std::sqrt(aa * bb), 0.999) << i;
  }
}

}  // namespace
}  // namespace tachyon::engine
