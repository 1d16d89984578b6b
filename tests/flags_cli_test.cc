// CLI tests for the flag parsing every subcommand shares (src/cli/flags.h): strict integer,
// number and choice values, ranges, unknown flags, one error line naming the flag, exit code
// 2 for a usage error, and --help generated from the same declarations.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "cli_test_util.h"

namespace tachyon::flags_cli_test {
namespace {

using Result = cli_test_util::CommandResult;

Result Tachyon(const std::string& args) {
  return cli_test_util::RunTachyon(args, cli_test_util::TempPath("flags_cli", "cmd"));
}

// A usage error: exit code 2, nothing on stdout and exactly `line` (plus '\n') on stderr.
void ExpectUsageError(const std::string& args, const std::string& line) {
  SCOPED_TRACE(args);
  const Result r = Tachyon(args);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, line + "\n");
}

// The subcommands `tachyon --help` lists.
std::vector<std::string> Commands() {
  const Result r = Tachyon("--help");
  std::vector<std::string> names;
  std::istringstream in(r.out + r.err);
  std::string line;
  bool in_list = false;
  while (std::getline(in, line)) {
    if (line == "commands:") {
      in_list = true;
    } else if (in_list && line.rfind("  ", 0) == 0) {
      std::istringstream words(line);
      std::string name;
      words >> name;
      names.push_back(name);
    } else if (in_list) {
      in_list = false;
    }
  }
  return names;
}

TEST(FlagsCli, EveryCommandHasGeneratedHelp) {
  const std::vector<std::string> commands = Commands();
  ASSERT_GE(commands.size(), 10u);
  for (const std::string& c : commands) {
    SCOPED_TRACE(c);
    const Result r = Tachyon(c + " --help");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("Usage: tachyon " + c), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("-h,--help"), std::string::npos) << r.out;
  }
}

TEST(FlagsCli, HelpListsTheDeclaredFlagsWithTypesAndDefaults) {
  const Result r = Tachyon("profile --help");
  ASSERT_EQ(r.exit_code, 0);
  for (const char* flag :
       {"-m,--model TEXT REQUIRED", "-p INT=512", "-n INT=128", "-t,--threads INT=2",
        "--reps INT=3", "--batch INT=1", "--kv-cache-dtype f16|bf16|q8_0|q4_0|q4_1|f32=f16"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag << "\n" << r.out;
  }
}

TEST(FlagsCli, BenchRejectsANonNumericPromptLengthNamingTheFlag) {
  ExpectUsageError("bench -m x.gguf -p abc",
                   "tachyon bench: error: -p/--n-prompt: 'abc' is not an integer");
  ExpectUsageError("bench -m x.gguf --n-prompt 12x",
                   "tachyon bench: error: -p/--n-prompt: '12x' is not an integer");
  ExpectUsageError("bench -m x.gguf -p -5",
                   "tachyon bench: error: -p/--n-prompt: '-5' is not in [0, 16777216]");
  ExpectUsageError("bench -m x.gguf --concurrency 1,x",
                   "tachyon bench: error: --concurrency: '1,x' is not a comma-separated list of "
                   "integers in [1, 4096] like 1,4,16");
  ExpectUsageError("bench -m x.gguf --frobnicate",
                   "tachyon bench: error: unknown option '--frobnicate' (see --help)");
}

// serve, run and bench declare the engine flags once (cli/engine_flags.h): same names, same
// ranges, same messages.
TEST(FlagsCli, EngineFlagsAreTheSameForServeRunAndBench) {
  for (const char* cmd : {"serve", "run -p hi", "bench"}) {
    const std::string c = cmd;
    const std::string name = c.substr(0, c.find(' '));
    ExpectUsageError(c + " -m x.gguf --max-num-seqs 0",
                     "tachyon " + name + ": error: --max-num-seqs: '0' is not in [1, 65536]");
    ExpectUsageError(
        c + " -m x.gguf --kv-cache-memory 12Q",
        "tachyon " + name + ": error: --kv-cache-memory: '12Q' is not a size like 512M or 2G");
    ExpectUsageError(c + " -m x.gguf --max-batched-tokens x",
                     "tachyon " + name +
                         ": error: --max-num-batched-tokens/--max-batched-tokens: 'x' is not an "
                         "integer");
    ExpectUsageError(
        c + " -m x.gguf --scheduling-policy lifo",
        "tachyon " + name + ": error: --scheduling-policy: 'lifo' is not one of fcfs, priority");
    ExpectUsageError(
        c + " -m x.gguf --kv-cache-memory-fraction 1.5",
        "tachyon " + name + ": error: --kv-cache-memory-fraction: '1.5' is not in [0.01, 1]");
    const Result help = Tachyon(name + " --help");
    for (const char* flag :
         {"-m,--model", "-t,--threads", "--chat-template", "--quantize", "--kv-cache-dtype",
          "--kv-cache-memory", "--kv-blocks", "-c,--ctx-size,--max-model-len", "--max-num-seqs",
          "--no-prefix-caching", "--scheduling-policy", "--no-generation-config"}) {
      EXPECT_NE(help.out.find(flag), std::string::npos) << name << " " << flag;
    }
  }
  ExpectUsageError("serve -m x.gguf --port 70000",
                   "tachyon serve: error: --port: '70000' is not in [0, 65535]");
  ExpectUsageError("serve -m x.gguf --header-timeout soon",
                   "tachyon serve: error: --header-timeout: 'soon' is not a number of seconds");
  ExpectUsageError("run -m x.gguf -p hi --top-p 2",
                   "tachyon run: error: --top-p: '2' is not in [0, 1]");
  ExpectUsageError("run -m x.gguf", "tachyon run: error: --prompt is required");
}

TEST(FlagsCli, IntegerFlagsTakeOnlyWholeNumbers) {
  for (const char* bad : {"abc", "12abc", "1.5", "0x10", "+-3", ""}) {
    ExpectUsageError("profile -m x.gguf -p '" + std::string(bad) + "'",
                     "tachyon profile: error: -p: '" + std::string(bad) + "' is not an integer");
  }
  ExpectUsageError("synth -o x.gguf --seed -1",
                   "tachyon synth: error: --seed: '-1' is not in [0, 18446744073709551615]");
}

TEST(FlagsCli, ValuesOutsideTheRangeAreRejected) {
  ExpectUsageError("pull --parallel 0 org/name",
                   "tachyon pull: error: --parallel: '0' is not in [1, 64]");
  ExpectUsageError("pull --parallel 65 org/name",
                   "tachyon pull: error: --parallel: '65' is not in [1, 64]");
  ExpectUsageError("profile -m x.gguf -t 99999999999999999999999",
                   "tachyon profile: error: -t/--threads: '99999999999999999999999' is not in "
                   "[1, 1024]");
  ExpectUsageError("logits -m x.gguf --ids 1 -o y --chunk 0",
                   "tachyon logits: error: --chunk: '0' is not in [1, 1048576]");
}

TEST(FlagsCli, ChoiceAndListFlagsNameTheirChoices) {
  ExpectUsageError("synth -o x.gguf --arch gpt9",
                   "tachyon synth: error: --arch: 'gpt9' is not one of llama, qwen2, qwen3, gemma3");
  ExpectUsageError("logits -m x.gguf --ids 1 -o y --quantize q2",
                   "tachyon logits: error: --quantize: 'q2' is not one of q8_0, q4_0, q4_k");
  ExpectUsageError(
      "profile -m x.gguf --kv-cache-dtype f8",
      "tachyon profile: error: --kv-cache-dtype: 'f8' is not f16, bf16, q8_0, q4_0, q4_1 or f32");
  ExpectUsageError("logits -m x.gguf --ids 1,,2 -o y",
                   "tachyon logits: error: --ids: '1,,2' is not a list of token ids like 1,2,3");
}

TEST(FlagsCli, UnknownFlagsMissingValuesAndStrayArguments) {
  ExpectUsageError("frobnicate",
                   "tachyon: error: unknown command 'frobnicate' (see tachyon --help)");
  ExpectUsageError("synth -o x.gguf --bogus",
                   "tachyon synth: error: unknown option '--bogus' (see --help)");
  ExpectUsageError("inspect a.gguf b.gguf",
                   "tachyon inspect: error: unexpected argument 'b.gguf' (see --help)");
  ExpectUsageError("inspect", "tachyon inspect: error: FILE is required");
  ExpectUsageError("profile", "tachyon profile: error: --model is required");
  const Result r = Tachyon("profile -m x.gguf -p");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
  EXPECT_NE(r.err.find("-p"), std::string::npos) << r.err;
}

TEST(FlagsCli, AFlagGivenTwiceKeepsTheLastValue) {
  // The first --parallel alone would be rejected; the last one wins, and pull goes on to
  // refuse the local path.
  const Result r = Tachyon("pull --parallel 0 --parallel 2 /local/path");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "tachyon pull: error: '/local/path' is a local path, not a Hub repository "
            "(ORG/NAME[:FILE])\n");
}

}  // namespace
}  // namespace tachyon::flags_cli_test
