// tachyon profile: the per-op breakdown of a prefill and a decode step, and its errors.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cli_test_util.h"
#include "util/testing/testdata.h"

namespace tachyon::profile_cli_test {
namespace {

using Result = cli_test_util::CommandResult;

Result Tachyon(const std::string& args) {
  return cli_test_util::RunTachyon(args, cli_test_util::TempPath("profile_cli", "cmd"));
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
  // The pool's passes after each table (two threads), and the quietest decode steps.
  EXPECT_NE(r.out.find("pool: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" parallel passes per forward, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ms per forward outside the passes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("decode step ms: min "), std::string::npos) << r.out;

  // Batched decode: every step carries 3 sequences, each in its own KV blocks.
  r = Tachyon("profile -m " + model + " -p 8 -n 20 -t 2 --reps 2 --batch 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("decode at context 20, 3 sequences per step: 2 forward(s), 6 token(s)"),
            std::string::npos)
      << r.out;
  r = Tachyon("profile -m " + model + " --batch 0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "tachyon profile: error: --batch: '0' is not in [1, 1024]\n");

  r = Tachyon("profile -m " + model + " --kv-cache-dtype q8_0");  // head_dim 8
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("multiple of 32"), std::string::npos) << r.err;
  r = Tachyon("profile -m " + model + " --kv-cache-dtype f8");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--kv-cache-dtype: 'f8' is not f16, bf16, q8_0, q4_0, q4_1 or f32"),
            std::string::npos)
      << r.err;
  r = Tachyon("profile -m /nonexistent/model.gguf");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("tachyon profile: "), std::string::npos) << r.err;
  r = Tachyon("profile");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--model is required"), std::string::npos) << r.err;
  r = Tachyon("profile -m " + model + " --reps 5 -n 2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--reps 5 is more than -n 2"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tachyon::profile_cli_test
