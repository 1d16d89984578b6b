// Randomized configurations (block size, budget, pool size, policy, caching, n, priorities,
// aborts): every greedy choice must equal the engine-free oracle, and the pool must end empty.
#include <gtest/gtest.h>

#include <random>

#include "engine/testing/test_harness.h"

namespace tachyon::engine {
namespace {

using testing::Greedy;
using testing::Harness;
using testing::HarnessOptions;

std::vector<int32_t> Oracle(const FakeModelExecutor& exec, std::vector<int32_t> history, int n) {
  std::vector<int32_t> out;
  std::vector<float> logits(exec.n_vocab());
  for (int i = 0; i < n; ++i) {
    exec.LogitsFor(history, logits);
    const int32_t best =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(best);
    history.push_back(best);
  }
  return out;
}

TEST(EngineStressTest, RandomConfigurationsMatchOracle) {
  std::mt19937 rng(20261130);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 60; ++trial) {
    std::vector<int32_t> base(24);
    for (int32_t& t : base) t = uniform(0, 63);
    struct Spec {
      std::vector<int32_t> prompt;
      int max_tokens;
      int n;
      int priority;
    };
    std::vector<Spec> specs;
    int max_len = 0;
    for (int i = 0; i < 10; ++i) {
      Spec s;
      s.prompt.assign(base.begin(), base.begin() + uniform(0, 24));
      for (int j = uniform(1, 12); j > 0; --j) s.prompt.push_back(uniform(0, 63));
      s.max_tokens = uniform(1, 12);
      s.n = uniform(1, 2);
      s.priority = uniform(0, 2);
      max_len = std::max<int>(max_len, s.prompt.size() + s.max_tokens);
      specs.push_back(s);
    }
    HarnessOptions o;
    o.block_size = 1 << uniform(0, 3);
    o.num_blocks = (max_len + o.block_size - 1) / o.block_size + uniform(0, 30);
    o.max_batched_tokens = uniform(1, 40);
    o.max_num_seqs = uniform(1, 8);
    o.prefix_caching = uniform(0, 1) == 1;
    o.policy = uniform(0, 1) ? SchedulePolicy::kPriority : SchedulePolicy::kFcfs;
    SCOPED_TRACE(::testing::Message()
                 << "trial " << trial << " block_size " << o.block_size << " blocks "
                 << o.num_blocks << " budget " << o.max_batched_tokens << " seqs " << o.max_num_seqs
                 << " caching " << o.prefix_caching);
    Harness h(o);
    std::vector<bool> aborted(specs.size(), false);
    for (size_t i = 0; i < specs.size(); ++i) {
      EngineRequest r = Greedy(specs[i].prompt, specs[i].max_tokens);
      r.params.n = specs[i].n;
      r.priority = specs[i].priority;
      ASSERT_TRUE(h.Add(i, r).ok());
      for (int s = uniform(0, 3); s > 0; --s) h.Step();
      if (uniform(0, 9) == 0) {
        h.engine().Abort(i);
        aborted[i] = true;
      }
    }
    h.RunToCompletion();
    for (size_t i = 0; i < specs.size(); ++i) {
      ASSERT_TRUE(h.finished(i)) << "request " << i;
      if (aborted[i]) continue;
      const auto expected = Oracle(h.exec(), specs[i].prompt, specs[i].max_tokens);
      for (int c = 0; c < specs[i].n; ++c) {
        EXPECT_EQ(h.result(i, c).tokens, expected) << "request " << i << " choice " << c;
        EXPECT_EQ(h.result(i, c).finish, FinishReason::kLength);
      }
    }
    const EngineMetrics m = h.engine().Metrics();
    EXPECT_EQ(m.kv.used_blocks, 0);
    EXPECT_EQ(m.kv.free_blocks, o.num_blocks);
  }
}

}  // namespace
}  // namespace tachyon::engine
