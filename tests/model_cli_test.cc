// The model commands of the tachyon binary: logits, run, bench, perplexity, synth.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_test_util.h"
#include "util/testing/testdata.h"

namespace tachyon::model_cli_test {
namespace {

using Result = cli_test_util::CommandResult;
using cli_test_util::Slurp;

std::string Temp(const std::string& name) {
  return cli_test_util::TempPath("model_cli", name);
}

// Runs the tachyon binary with `args` (already shell-quoted).
Result Tachyon(const std::string& args) {
  return cli_test_util::RunTachyon(args, Temp("cmd"));
}

std::string Stories() {
  const std::string dir = TestdataDir();
  return dir.empty() ? "" : dir + "/stories260K";
}

#define REQUIRE_STORIES() \
  if (Stories().empty()) GTEST_SKIP() << "testdata not found (TACHYON_TESTDATA)"

TEST(ModelCliTest, LogitsMatchLlama2c) {
  REQUIRE_STORIES();
  const std::string out = Temp("logits.f32");
  // p00's first 20 ids, in chunks of 6 through the KV cache.
  Result r = Tachyon("logits -m " + Stories() +
                     "/stories260K.gguf --chunk 6 --ids "
                     "1,403,407,261,378,432,383,286,261,376,298,315,421,395,317,426,338,401,"
                     "396,267 --out " +
                     out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string got = Slurp(out), want = Slurp(Stories() + "/reference/logits/p00_allpos.f32");
  std::filesystem::remove(out);
  ASSERT_EQ(got.size(), 20u * 512 * 4);
  ASSERT_GE(want.size(), got.size());
  const float* g = reinterpret_cast<const float*>(got.data());
  const float* w = reinterpret_cast<const float*>(want.data());
  float max_diff = 0;
  for (size_t i = 0; i < 20 * 512; ++i) max_diff = std::max(max_diff, std::fabs(g[i] - w[i]));
  EXPECT_LT(max_diff, 1e-3f);
}

TEST(ModelCliTest, RunGreedyMatchesLlama2cText) {
  REQUIRE_STORIES();
  std::ifstream f(Stories() + "/reference/generations.json");
  const auto gens = nlohmann::json::parse(f);
  int checked = 0;
  for (const auto& c : gens["cases"]) {
    const std::string prompt = c["prompt"];
    if (c["stop_reason"] != "steps" || prompt.empty() || prompt.find('"') != std::string::npos) {
      continue;
    }
    const size_t n = c["generated_ids"].size();
    Result r = Tachyon("run -m " + Stories() + "/stories260K.gguf -t 1 --temp 0 -n " +
                       std::to_string(n) + " -p \"" + prompt + "\"");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string stdout_ref = c["stdout"];
    ASSERT_EQ(stdout_ref.substr(0, prompt.size()), prompt);
    EXPECT_EQ(r.out, stdout_ref.substr(prompt.size())) << c["id"];
    if (++checked == 2) break;
  }
  EXPECT_EQ(checked, 2);
}

TEST(ModelCliTest, BenchJson) {
  REQUIRE_STORIES();
  Result r = Tachyon("bench -m " + Stories() +
                     "/stories260K.gguf -p 32 -n 8 --reps 1 -t 1 --json --bw-mib 8");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key :
       {"pp_tok_s", "tg_tok_s", "load_s", "weight_bytes", "bandwidth_gbs", "tg_roofline_ratio",
        "int8_peak_gops", "matmul_macs_per_token", "pp_int8_peak_ratio"}) {
    ASSERT_TRUE(j.contains(key)) << key;
    EXPECT_GT(j[key].get<double>(), 0) << key;
  }
  EXPECT_GT(j["weight_bytes"].get<double>(), 500000);  // ~1 MB of f32 weights
  // stories260K: 5 layers of 64 x (64 q + 2 x 32 kv + 64 o + 3 x 172 ffn) + the 512 x 64 output.
  EXPECT_EQ(j["matmul_macs_per_token"].get<int64_t>(), 5 * 64 * (64 + 64 + 64 + 3 * 172) + 512 * 64);
  // The ratio is the prefill rate x 2 x the work per token over the measured peak.
  EXPECT_NEAR(j["pp_int8_peak_ratio"].get<double>(),
              j["pp_tok_s"].get<double>() * 2 * j["matmul_macs_per_token"].get<double>() /
                  (j["int8_peak_gops"].get<double>() * 1e9),
              1e-9);
}

// -d D: the prompt and the decode start at position D; the KV read per decode token is the
// cache's bytes per position times the mean context, D + (n + 1) / 2.
TEST(ModelCliTest, BenchDepth) {
  REQUIRE_STORIES();
  Result r = Tachyon("bench -m " + Stories() +
                     "/stories260K.gguf -p 8 -n 8 -d 40 --reps 1 -t 1 --json --bw-mib 8");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["n_depth"].get<int64_t>(), 40);
  EXPECT_GT(j["tg_tok_s"].get<double>(), 0);
  EXPECT_GT(j["pp_tok_s"].get<double>(), 0);
  // stories260K: 5 layers, 4 KV heads of 8, f16: 5 x 2 x 32 x 2 bytes per position.
  EXPECT_DOUBLE_EQ(j["kv_bytes_per_token"].get<double>(), 640.0 * (40 + 4.5));
  EXPECT_NEAR(j["tg_roofline_ratio_kv"].get<double>(),
              j["tg_roofline_ratio"].get<double>() *
                  (1 + j["kv_bytes_per_token"].get<double>() / j["weight_bytes"].get<double>()),
              1e-9);
  r = Tachyon("bench -m " + Stories() + "/stories260K.gguf -d 8 --concurrency 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--n-depth"), std::string::npos) << r.err;
}

TEST(ModelCliTest, PerplexityOfOwnGreedyTextIsLow) {
  REQUIRE_STORIES();
  std::ifstream f(Stories() + "/reference/generations.json");
  const auto gens = nlohmann::json::parse(f);
  const std::string text_path = Temp("text.txt");
  {
    std::ofstream t(text_path);
    for (const auto& c : gens["cases"]) t << c["stdout"].get<std::string>();
  }
  Result r =
      Tachyon("perplexity -m " + Stories() + "/stories260K.gguf -t 1 --ctx 128 -f " + text_path);
  std::filesystem::remove(text_path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  double ppl = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str(), "perplexity: %lf", &ppl), 1) << r.out;
  // Greedy text of the model itself: far below the vocabulary size (512), above 1.
  EXPECT_GT(ppl, 1.0);
  EXPECT_LT(ppl, 4.0);
}

TEST(ModelCliTest, SynthWritesALoadableModel) {
  const std::string path = Temp("synth.gguf"), out = Temp("synth.f32");
  Result r = Tachyon("synth --arch qwen3 --shape tiny --type Q4_K_M -t 1 -o " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Tachyon("logits -m " + path + " --ids 1,2,3 --out " + out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::filesystem::file_size(out), 3u * 512 * 4);
  std::filesystem::remove(path);
  std::filesystem::remove(out);
}

// --quantize converts at load exactly as `tachyon quantize` does to a file; --kv-cache-dtype
// picks the KV storage (f32 keeps llama2.c's text exactly; q8_0, q4_0 and q4_1 need head_dim
// % 32 == 0, on run and perplexity alike).
TEST(ModelCliTest, RunQuantizeOnLoadAndKvDtype) {
  REQUIRE_STORIES();
  const std::string model = Stories() + "/stories260K.gguf";
  const std::string q8 = Temp("q8.gguf");
  Result r = Tachyon("quantize " + model + " " + q8 + " --type Q8_0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string args = " -t 1 --temp 0 -n 24 -p \"Once upon a time\"";
  Result from_file = Tachyon("run -m " + q8 + args);
  Result on_load = Tachyon("run -m " + model + " --quantize q8_0" + args);
  std::filesystem::remove(q8);
  ASSERT_EQ(from_file.exit_code, 0) << from_file.err;
  ASSERT_EQ(on_load.exit_code, 0) << on_load.err;
  EXPECT_FALSE(on_load.out.empty());
  EXPECT_EQ(on_load.out, from_file.out);

  Result f32 = Tachyon("run -m " + model + " --kv-cache-dtype f32" + args);
  Result bf16 = Tachyon("run -m " + model + " --kv-cache-dtype bf16" + args);
  ASSERT_EQ(f32.exit_code, 0) << f32.err;
  ASSERT_EQ(bf16.exit_code, 0) << bf16.err;
  EXPECT_FALSE(bf16.out.empty());

  r = Tachyon("run -m " + model + " --kv-cache-dtype q8_0" + args);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("head_dim"), std::string::npos) << r.err;
  r = Tachyon("run -m " + model + " --kv-cache-dtype q4_0" + args);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("q4_0 needs head_dim to be a multiple of 32, got 8"), std::string::npos)
      << r.err;
  r = Tachyon("perplexity -m " + model + " --kv-cache-dtype q4_1 -t 1 --ctx 16 -f " + Stories() +
              "/reference/generations.json");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("q4_1 needs head_dim to be a multiple of 32, got 8"), std::string::npos)
      << r.err;
  r = Tachyon("run -m " + model + " --kv-cache-dtype f8" + args);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("f8"), std::string::npos) << r.err;
  r = Tachyon("run -m " + model + " --quantize q5_0" + args);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("q5_0"), std::string::npos) << r.err;
  r = Tachyon("bench -m " + model + " --quantize q5_0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("q5_0"), std::string::npos) << r.err;
}

TEST(ModelCliTest, BadInputsGiveOneLineErrors) {
  Result r = Tachyon("synth --arch llama --shape tiny --type Q9_9 -o " + Temp("bad.gguf"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("Q9_9"), std::string::npos) << r.err;
  r = Tachyon("synth --arch gpt2 --shape tiny --type Q8_0 -o " + Temp("bad.gguf"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("gpt2"), std::string::npos) << r.err;
  r = Tachyon("run -m /nonexistent/model.gguf -p hi");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("/nonexistent/model.gguf"), std::string::npos) << r.err;
  r = Tachyon("logits -m /nonexistent/model.gguf --ids 1 --out " + Temp("x"));
  EXPECT_NE(r.exit_code, 0);
  r = Tachyon("bench");
  EXPECT_NE(r.exit_code, 0);
  if (!Stories().empty()) {
    r = Tachyon("logits -m " + Stories() + "/stories260K.gguf --ids 1,600 --out " + Temp("x"));
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("600"), std::string::npos) << r.err;
    r = Tachyon("logits -m " + Stories() + "/stories260K.gguf --ids 1,x --out " + Temp("x"));
    EXPECT_NE(r.exit_code, 0);
  }
}

}  // namespace
}  // namespace tachyon::model_cli_test
