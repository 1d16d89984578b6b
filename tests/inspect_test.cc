// CLI tests for `tachyon inspect`: runs the built binary on every GGUF in testdata, on a file
// made by GgufWriter and on corrupt files; checks exit codes, text and --json output.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "gguf/gguf.h"
#include "util/testing/testdata.h"

namespace tachyon {
namespace {

namespace fs = std::filesystem;
using cli_test_util::ShellQuote;
using nlohmann::json;

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `tachyon <args>`, capturing stdout and stderr.
RunResult RunTachyon(const std::vector<std::string>& args) {
  const std::string err_path =
      ::testing::TempDir() + "/inspect_test_stderr_" + std::to_string(::getpid());
  std::string cmd = ShellQuote(cli_test_util::TachyonBinary());
  for (const auto& a : args) cmd += " " + ShellQuote(a);
  cmd += " 2>" + ShellQuote(err_path);
  RunResult r;
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err_path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  r.err = ss.str();
  std::remove(err_path.c_str());
  return r;
}

std::vector<std::string> TestdataGgufs(const std::string& td) {
  std::vector<std::string> files;
  for (const char* dir : {"/vocab", "/stories260K", "/models/models"}) {
    if (!fs::is_directory(td + dir)) continue;
    for (const auto& e : fs::directory_iterator(td + dir)) {
      if (e.path().extension() == ".gguf") files.push_back(e.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

#define REQUIRE_TESTDATA()              \
  const std::string td = TestdataDir(); \
  if (td.empty()) GTEST_SKIP() << "../shared/testdata not found (set TACHYON_TESTDATA)"

TEST(InspectCli, EveryTestdataFileTextAndJson) {
  REQUIRE_TESTDATA();
  const auto files = TestdataGgufs(td);
  ASSERT_GE(files.size(), 20u);
  for (const auto& path : files) {
    SCOPED_TRACE(path);
    auto f = gguf::GgufFile::Open(path);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    const RunResult text = RunTachyon({"inspect", path});
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_TRUE(text.err.empty()) << text.err;
    EXPECT_NE(text.out.find("architecture: " + f->Architecture()), std::string::npos);
    EXPECT_NE(text.out.find("tokenizer:"), std::string::npos);
    EXPECT_NE(text.out.find("totals: " + std::to_string(f->tensors().size()) + " tensors"),
              std::string::npos);
    EXPECT_LT(text.out.size(), 200000u) << "long arrays must be summarized";
    const RunResult js = RunTachyon({"inspect", "--json", path});
    ASSERT_EQ(js.exit_code, 0) << js.err;
    json j;
    ASSERT_NO_THROW(j = json::parse(js.out));
    EXPECT_EQ(j["architecture"], f->Architecture());
    EXPECT_EQ(j["tensors"].size(), f->tensors().size());
    EXPECT_EQ(j["tokenizer"]["vocab_size"], *f->GetArraySize("tokenizer.ggml.tokens"));
    EXPECT_EQ(j["metadata"].size(), f->metadata().size());
    EXPECT_EQ(j["totals"]["tensors"], f->tensors().size());
  }
}

TEST(InspectCli, Stories260KFacts) {
  REQUIRE_TESTDATA();
  const std::string path = td + "/stories260K/stories260K.gguf";
  const RunResult r = RunTachyon({"inspect", path, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["architecture"], "llama");
  EXPECT_EQ(j["hyperparameters"]["embedding_length"], 64);
  EXPECT_EQ(j["hyperparameters"]["feed_forward_length"], 172);
  EXPECT_EQ(j["hyperparameters"]["block_count"], 5);
  EXPECT_EQ(j["hyperparameters"]["attention.head_count"], 8);
  EXPECT_EQ(j["hyperparameters"]["attention.head_count_kv"], 4);
  EXPECT_EQ(j["tokenizer"]["model"], "llama");
  EXPECT_EQ(j["tokenizer"]["vocab_size"], 512);
  EXPECT_EQ(j["tokenizer"]["special_tokens"]["bos"]["id"], 1);
  EXPECT_EQ(j["tokenizer"]["special_tokens"]["bos"]["text"], "<s>");
  EXPECT_EQ(j["tokenizer"]["special_tokens"]["eos"]["id"], 2);
  EXPECT_EQ(j["tokenizer"]["special_tokens"]["eos"]["text"], "</s>");
  EXPECT_EQ(j["metadata"]["tokenizer.ggml.tokens"]["length"], 512);
  // dim 64, hidden 172, 5 layers, 4 KV heads of 8 (kv dim 32), vocab 512, plus the separate
  // output matrix the converter writes: 2 * 512 * 64 + 64 + 5 * (2*64*64 + 2*64*32 + 3*64*172
  // + 2*64) parameters, all F32.
  const int64_t params = 2 * 512 * 64 + 64 + 5 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 172 + 128);
  EXPECT_EQ(j["totals"]["parameters"], params);
  EXPECT_EQ(j["totals"]["tensors"], 48);
  EXPECT_EQ(j["totals"]["bytes"], params * 4);
  EXPECT_EQ(j["totals"]["by_type"]["F32"]["tensors"], 48);
  const json& emb = j["tensors"][0];
  EXPECT_EQ(emb["name"], "token_embd.weight");
  EXPECT_EQ(emb["shape"], json::array({64, 512}));
  const RunResult text = RunTachyon({"inspect", path});
  EXPECT_NE(text.out.find("bos token"), std::string::npos);
  EXPECT_NE(text.out.find("\"<s>\""), std::string::npos);
  EXPECT_NE(text.out.find("vocab size                               512"), std::string::npos);
  EXPECT_NE(text.out.find("token_embd.weight"), std::string::npos);
}

TEST(InspectCli, QuantizedModelTotalsByType) {
  REQUIRE_TESTDATA();
  const std::string path = td + "/models/models/tiny-llama-Q4_K_M.gguf";
  if (!fs::exists(path)) GTEST_SKIP() << path << " absent";
  const RunResult r = RunTachyon({"inspect", "--json", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  // models/README.md: in Q4_K_M, blk.1.attn_v, blk.1.ffn_down and output are Q6_K.
  for (const auto& t : j["tensors"]) {
    if (t["name"] == "blk.1.attn_v.weight" || t["name"] == "output.weight") {
      EXPECT_EQ(t["type"], "Q6_K") << t["name"];
    }
  }
  EXPECT_TRUE(j["totals"]["by_type"].contains("Q4_K"));
  EXPECT_TRUE(j["totals"]["by_type"].contains("Q6_K"));
  EXPECT_TRUE(j["totals"]["by_type"].contains("F32"));
}

// A file written by GgufWriter with chat templates and named variants.
TEST(InspectCli, WriterFileWithChatTemplates) {
  const std::string path =
      ::testing::TempDir() + "/inspect_writer_" + std::to_string(::getpid()) + ".gguf";
  gguf::GgufWriter w;
  w.Set("general.architecture", gguf::Value::String("qwen3"));
  w.Set("qwen3.block_count", gguf::Value::Uint32(3));
  w.Set("qwen3.rope.freq_base", gguf::Value::Float32(1e6f));
  w.Set("tokenizer.ggml.model", gguf::Value::String("gpt2"));
  w.Set("tokenizer.ggml.pre", gguf::Value::String("qwen2"));
  std::vector<std::string> toks;
  for (int k = 0; k < 300; ++k) toks.push_back("tok" + std::to_string(k));
  w.Set("tokenizer.ggml.tokens", gguf::Value::StringArray(toks));
  w.Set("tokenizer.ggml.eos_token_id", gguf::Value::Uint32(7));
  w.Set("tokenizer.ggml.add_bos_token", gguf::Value::Bool(false));
  const std::string tmpl(1234, 'x');
  w.Set("tokenizer.chat_template", gguf::Value::String(tmpl));
  w.Set("tokenizer.chat_template.tool_use", gguf::Value::String("{{ tools }}"));
  w.Set("custom.note", gguf::Value::String("hello"));
  std::vector<uint8_t> q(34 * 2, 1);
  ASSERT_TRUE(w.AddTensor("w", GgmlType::kQ8_0, {32, 2}, q.data(), q.size()).ok());
  ASSERT_TRUE(w.WriteFile(path).ok());
  const RunResult r = RunTachyon({"inspect", path, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["architecture"], "qwen3");
  EXPECT_EQ(j["hyperparameters"]["block_count"], 3);
  EXPECT_EQ(j["tokenizer"]["pre"], "qwen2");
  EXPECT_EQ(j["tokenizer"]["vocab_size"], 300);
  EXPECT_EQ(j["tokenizer"]["special_tokens"]["eos"]["text"], "tok7");
  EXPECT_EQ(j["tokenizer"]["add_bos_token"], false);
  EXPECT_TRUE(j["tokenizer"]["add_eos_token"].is_null());
  EXPECT_EQ(j["tokenizer"]["chat_template"]["present"], true);
  EXPECT_EQ(j["tokenizer"]["chat_template"]["bytes"], 1234);
  EXPECT_EQ(j["tokenizer"]["chat_template_variants"]["tool_use"], 11);
  EXPECT_EQ(j["metadata"]["custom.note"], "hello");
  EXPECT_EQ(j["metadata"]["tokenizer.chat_template"], tmpl);  // scalars in full
  EXPECT_EQ(j["tensors"][0]["type"], "Q8_0");
  EXPECT_EQ(j["tensors"][0]["bytes"], 68);
  EXPECT_EQ(j["totals"]["parameters"], 64);
  const RunResult text = RunTachyon({"inspect", path});
  ASSERT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("chat template 'tool_use'"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("present, 1234 bytes"), std::string::npos);
  EXPECT_NE(text.out.find("custom.note"), std::string::npos);
  EXPECT_NE(text.out.find("<array of 300 string>"), std::string::npos);
  EXPECT_EQ(text.out.find("tok299"), std::string::npos) << "token list must not be dumped";
  std::remove(path.c_str());
}

void ExpectOneErrorLine(const RunResult& r, const std::string& path, const std::string& what) {
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(r.out.empty()) << r.out;
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "exactly one line: " << r.err;
  EXPECT_EQ(r.err.rfind("tachyon inspect: " + path + ": ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
}

TEST(InspectCli, CorruptAndMissingFiles) {
  const std::string path =
      ::testing::TempDir() + "/inspect_corrupt_" + std::to_string(::getpid()) + ".gguf";
  gguf::GgufWriter w;
  w.Set("general.architecture", gguf::Value::String("llama"));
  w.Set("tokenizer.ggml.tokens", gguf::Value::StringArray({"a", "b", "c"}));
  const std::string full = w.Serialize();
  {
    std::ofstream out(path, std::ios::binary);
    out << full.substr(0, full.size() - 3);
  }
  ExpectOneErrorLine(RunTachyon({"inspect", path}), path, "truncated");
  ExpectOneErrorLine(RunTachyon({"inspect", "--json", path}), path, "truncated");
  {
    std::ofstream out(path, std::ios::binary);
    out << "not a gguf file at all";
  }
  ExpectOneErrorLine(RunTachyon({"inspect", path}), path, "bad magic");
  std::remove(path.c_str());
  ExpectOneErrorLine(RunTachyon({"inspect", path}), path, "no such file");
}

TEST(InspectCli, UsageErrorsAndHelp) {
  const RunResult none = RunTachyon({"inspect"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_EQ(none.err, "tachyon inspect: error: FILE is required\n");
  const RunResult bad = RunTachyon({"inspect", "--frobnicate", "x.gguf"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err, "tachyon inspect: error: unknown option '--frobnicate' (see --help)\n");
  const RunResult two = RunTachyon({"inspect", "a.gguf", "b.gguf"});
  EXPECT_EQ(two.exit_code, 2);
  EXPECT_NE(two.err.find("unexpected argument 'b.gguf'"), std::string::npos) << two.err;
  const RunResult help = RunTachyon({"inspect", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("Usage: tachyon inspect"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--json"), std::string::npos);
}

}  // namespace
}  // namespace tachyon
