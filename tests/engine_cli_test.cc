// The engine-backed commands of the tachyon binary: `run` (through EngineCore) and
// `bench --concurrency` (EngineCore under concurrent synthetic requests), on stories260K.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli_test_util.h"
#include "util/testing/testdata.h"

namespace tachyon::engine_cli_test {
namespace {

using Result = cli_test_util::CommandResult;
using cli_test_util::Slurp;

std::string Temp(const std::string& name) {
  return cli_test_util::TempPath("engine_cli", name);
}

// Runs the tachyon binary with `args` (already shell-quoted).
Result Tachyon(const std::string& args) {
  return cli_test_util::RunTachyon(args, Temp("cmd"));
}

std::string Model() {
  const std::string dir = TestdataDir();
  if (dir.empty()) return "";
  const std::string path = dir + "/stories260K/stories260K.gguf";
  return std::filesystem::exists(path) ? path : "";
}

#define REQUIRE_MODEL() \
  if (Model().empty()) GTEST_SKIP() << "stories260K not found (TACHYON_TESTDATA)"

TEST(EngineCliTest, BenchConcurrencyJsonShapeAndCounts) {
  REQUIRE_MODEL();
  Result r = Tachyon("bench -m " + Model() + " --concurrency 1,3,8 -p 20 -n 6 -t 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 3u);
  const int levels[] = {1, 3, 8};
  for (size_t i = 0; i < 3; ++i) {
    const auto& e = j[i];
    for (const char* key :
         {"concurrency", "aggregate_tok_s", "ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms",
          "tpot_p99_ms", "generated_tokens", "steps", "preemptions", "cached_prompt_tokens",
          "per_request_tok_s_p50", "decode_tok_s", "int8_peak_gops", "matmul_macs_per_token",
          "decode_int8_peak_ratio"}) {
      ASSERT_TRUE(e.contains(key)) << key;
    }
    EXPECT_NEAR(e["decode_int8_peak_ratio"].get<double>(),
                e["decode_tok_s"].get<double>() * 2 * e["matmul_macs_per_token"].get<double>() /
                    (e["int8_peak_gops"].get<double>() * 1e9),
                1e-9);
    const int n = levels[i];
    EXPECT_EQ(e["concurrency"].get<int>(), n);
    // Every request generated exactly -n tokens (ignore_eos), none came from the cache.
    EXPECT_EQ(e["generated_tokens"].get<int64_t>(), n * 6);
    EXPECT_EQ(e["cached_prompt_tokens"].get<int64_t>(), 0);
    EXPECT_EQ(e["preemptions"].get<int64_t>(), 0);  // the pool holds every request at once
    // The requests arrive together and every step runs one forward for all of them: the
    // prompts (within the token budget) and first tokens in one step, then one step per token.
    EXPECT_EQ(e["steps"].get<int64_t>(), 6);
    EXPECT_GT(e["aggregate_tok_s"].get<double>(), 0);
    EXPECT_GT(e["decode_tok_s"].get<double>(), 0);
    EXPECT_GT(e["ttft_p50_ms"].get<double>(), 0);
    EXPECT_LE(e["ttft_p50_ms"].get<double>(), e["ttft_p99_ms"].get<double>());
    EXPECT_GT(e["tpot_p50_ms"].get<double>(), 0);
    EXPECT_LE(e["tpot_p50_ms"].get<double>(), e["tpot_p99_ms"].get<double>());
  }
}

TEST(EngineCliTest, BenchConcurrencyReportsPreemptionsInASmallPool) {
  REQUIRE_MODEL();
  // 16 prompt + 16 generated tokens need 2 blocks of 16 each; 5 blocks cannot hold 4 requests.
  Result r =
      Tachyon("bench -m " + Model() + " --concurrency 4 -p 16 -n 16 -t 1 --kv-blocks 5 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["generated_tokens"].get<int64_t>(), 4 * 16);
  EXPECT_GT(j[0]["preemptions"].get<int64_t>(), 0);
}

TEST(EngineCliTest, BenchTableAndBadConcurrency) {
  REQUIRE_MODEL();
  Result r = Tachyon("bench -m " + Model() + " --concurrency 2 -p 8 -n 4 -t 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("agg tok/s"), std::string::npos) << r.out;
  for (const char* bad : {"0", "1,,4", "x", "4,", "-2"}) {
    r = Tachyon("bench -m " + Model() + " --concurrency " + bad + " -p 8 -n 4");
    EXPECT_NE(r.exit_code, 0) << bad;
    EXPECT_NE(r.err.find("--concurrency"), std::string::npos) << r.err;
  }
}

std::string RunGreedy(const std::string& extra) {
  Result r = Tachyon("run -m " + Model() + " -t 1 --temp 0 -p \"Once upon a time\" " + extra);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

TEST(EngineCliTest, RunStopStringCutsTheGreedyText) {
  REQUIRE_MODEL();
  const std::string full = RunGreedy("-n 40");
  ASSERT_GT(full.size(), 40u);
  // A word (letters only) from the second half of the greedy text: the output stops right
  // before its first use.
  std::string word;
  for (size_t pos = full.find(' ', full.size() / 2); pos != std::string::npos && word.empty();
       pos = full.find(' ', pos + 1)) {
    size_t end = pos + 1;
    while (end < full.size() && std::isalpha(static_cast<unsigned char>(full[end]))) ++end;
    if (end > pos + 2 && end < full.size()) word = full.substr(pos, end - pos);  // " word"
  }
  ASSERT_FALSE(word.empty()) << full;
  const std::string cut = RunGreedy("-n 40 --stop '" + word + "' --stop 'never in this text'");
  EXPECT_EQ(cut, full.substr(0, full.find(word)) + "\n");
}

TEST(EngineCliTest, RunSamplingFlags) {
  REQUIRE_MODEL();
  const std::string base = "run -m " + Model() + " -t 1 -p \"The cat\" -n 24 ";
  const std::string flags =
      "--temp 0.9 --top-k 50 --top-p 0.9 --min-p 0.02 --repeat-penalty 1.1 "
      "--presence-penalty 0.5 --frequency-penalty 0.3 --seed 7 ";
  Result a = Tachyon(base + flags);
  Result b = Tachyon(base + flags);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);  // the same seed gives the same text
  EXPECT_NE(a.err.find("generated:"), std::string::npos) << a.err;
  // -n beyond the context (128 for this model) ends at the context, without an error.
  Result c = Tachyon(base + "--temp 0 --ignore-eos -n 1000");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(c.err.find("finish: length"), std::string::npos) << c.err;
}

TEST(EngineCliTest, RunSpeculativeGreedyIsUnchanged) {
  REQUIRE_MODEL();
  const std::string plain = RunGreedy("-n 60");
  const std::string spec = RunGreedy(
      "-n 60 --speculative-config "
      "'{\"method\":\"ngram\",\"num_speculative_tokens\":4,\"prompt_lookup_max\":3}'");
  EXPECT_EQ(spec, plain);
  EXPECT_EQ(RunGreedy("-n 60 --speculative-config "
                      "'{\"method\":\"suffix\",\"num_speculative_tokens\":4}'"),
            plain);
  // bench --concurrency takes the same flag.
  Result b = Tachyon("bench -m " + Model() +
                     " -t 1 --concurrency 1,2 -p 16 -n 16 --json --speculative-config "
                     "'{\"method\":\"ngram\",\"num_speculative_tokens\":2}'");
  EXPECT_EQ(b.exit_code, 0) << b.err;
}

TEST(EngineCliTest, RunBadSpeculativeConfigNamesTheField) {
  REQUIRE_MODEL();
  const std::string base = "run -m " + Model() + " -p hi --speculative-config ";
  const std::pair<const char*, const char*> cases[] = {
      {"'{\"method\":\"ngram\"}'", "num_speculative_tokens"},
      {"'{\"method\":\"ngram\",\"num_speculative_tokens\":-2}'", "num_speculative_tokens"},
      {"'{\"method\":\"medusa\",\"num_speculative_tokens\":2}'", "method"},
      {"'{\"method\":\"suffix\",\"num_speculative_tokens\":2,"
       "\"suffix_decoding_max_tree_depth\":1}'",
       "suffix_decoding_max_tree_depth"},
      {"'not json'", "not valid JSON"},
  };
  for (const auto& [arg, want] : cases) {
    Result r = Tachyon(base + arg);
    EXPECT_EQ(r.exit_code, 2) << arg << ": " << r.err;
    EXPECT_NE(r.err.find("--speculative-config"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(want), std::string::npos) << arg << ": " << r.err;
  }
}

TEST(EngineCliTest, RunBadValuesGiveOneLineErrors) {
  REQUIRE_MODEL();
  const std::string base = "run -m " + Model() + " -p hi ";
  struct Case {
    const char* args;
    const char* expect;
  } cases[] = {{"--temp abc", "--temp"}, {"--min-p 2", "--min-p"},
               {"--top-p 0", "top_p"},   {"--repeat-penalty 0", "repetition_penalty"},
               {"-n x", "-n"},           {"--seed -1", "--seed"},
               {"--bogus 1", "--bogus"}, {"--presence-penalty 3", "--presence-penalty"}};
  for (const Case& c : cases) {
    Result r = Tachyon(base + c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.args << ": " << r.err;
  }
}

}  // namespace
}  // namespace tachyon::engine_cli_test
