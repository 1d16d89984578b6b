// tachyon profile: the per-op breakdown of a prefill and a decode step, and its errors.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "util/testdata.h"

namespace tachyon::profile_cli_test {
namespace {

struct Result {
  int exit_code = -1;
  std::string out, err;
};

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Result Tachyon(const std::string& args) {
  const auto base =
      std::filesystem::temp_directory_path() / ("tachyon_profile_cli_" + std::to_string(getpid()));
  const std::string out = base.string() + ".out", err = base.string() + ".err";
  const std::string cmd = std::string(TACHYON_BINARY) + " " + args + " >" + out + " 2>" + err;
  const int status = std::system(cmd.c_str());
  Result r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = Slurp(out);
  r.err = Slurp(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

TEST(ProfileCliTest, PrintsBothBreakdowns) {
  const std::string dir = TestdataDir();
  if (dir.empty()) GTEST_SKIP() << "testdata not found (TACHYON_TESTDATA)";
  const std::string model = dir + "/stories260K/stories260K.gguf";
  Result r = Tachyon("profile -m " + model + " -p 40 -n 20 -t 2 --reps 2 --kv-cache-dtype bf16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("KV bf16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("prefill pp40: 2 forward(s), 80 token(s)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("decode at context 20: 2 forward(s), 2 token(s)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("| attention (+kv store) |"), std::string::npos) << r.out;

  r = Tachyon("profile -m " + model + " --kv-cache-dtype q8_0");  // head_dim 8
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("multiple of 32"), std::string::npos) << r.err;
  r = Tachyon("profile -m " + model + " --kv-cache-dtype f8");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("unknown KV cache dtype 'f8'"), std::string::npos) << r.err;
  r = Tachyon("profile -m /nonexistent/model.gguf");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("tachyon profile: "), std::string::npos) << r.err;
  r = Tachyon("profile");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("-m MODEL is required"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tachyon::profile_cli_test
