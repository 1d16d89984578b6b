// Helpers shared by the CLI tests (tests/*_test.cc): run the tachyon binary and capture its
// exit code, stdout and stderr.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace tachyon::cli_test_util {

struct CommandResult {
  int exit_code = -1;
  std::string out, err;
};

inline std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A per-process temporary path: TMPDIR/tachyon_<tag>_<pid>_<name>.
inline std::string TempPath(const std::string& tag, const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("tachyon_" + tag + "_" + std::to_string(getpid()) + "_" + name))
      .string();
}

// Runs `env TACHYON_BINARY args` (args already shell-quoted; env: VAR=value assignments or
// empty), capturing stdout / stderr through `scratch`.out / .err, which are removed after.
inline CommandResult RunTachyon(const std::string& args, const std::string& scratch,
                                const std::string& env = "") {
  const std::string out = scratch + ".out", err = scratch + ".err";
  const std::string cmd =
      env + (env.empty() ? "" : " ") + TACHYON_BINARY + " " + args + " >" + out + " 2>" + err;
  const int status = std::system(cmd.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = Slurp(out);
  r.err = Slurp(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

}  // namespace tachyon::cli_test_util
