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

}  // namespace
}  // namespace tachyon::model
