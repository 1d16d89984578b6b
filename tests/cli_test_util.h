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

// Single-quotes `s` for /bin/sh.
inline std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The tachyon binary under test: $TACHYON_BINARY, else `tachyon` beside this test executable
// (both are built into the same folder). Found at run time: no build path is compiled in.
inline std::string TachyonBinary() {
  if (const char* env = std::getenv("TACHYON_BINARY"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("tachyon") : (self.parent_path() / "tachyon").string();
}

// A per-process temporary path: TMPDIR/tachyon_<tag>_<pid>_<name>.
inline std::string TempPath(const std::string& tag, const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("tachyon_" + tag + "_" + std::to_string(getpid()) + "_" + name))
      .string();
}

// Runs `env TachyonBinary() args` (args already shell-quoted; env: VAR=value assignments or
// empty), capturing stdout / stderr through `scratch`.out / .err, which are removed after.
inline CommandResult RunTachyon(const std::string& args, const std::string& scratch,
                                const std::string& env = "") {
  const std::string out = scratch + ".out", err = scratch + ".err";
  const std::string cmd = env + (env.empty() ? "" : " ") + ShellQuote(TachyonBinary()) + " " +
                          args + " >" + out + " 2>" + err;
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
