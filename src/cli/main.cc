// tachyon: entry point. Dispatches to the registered subcommand.
#include <cstdio>
#include <cstring>
#include <exception>

#include "cli/command.h"
#include "util/cpu_features.h"

namespace tachyon::cli {

std::map<std::string, CommandInfo>& Commands() {
  static std::map<std::string, CommandInfo> commands;
  return commands;
}

namespace {

void PrintUsage(std::FILE* out) {
  std::fprintf(out, "usage: tachyon <command> [options]\n\ncommands:\n");
  for (const auto& [name, info] : Commands()) {
    std::fprintf(out, "  %-12s %s\n", name.c_str(), info.help.c_str());
  }
  std::fprintf(out, "\nRun 'tachyon <command> --help' for a command's options.\n");
}

}  // namespace
}  // namespace tachyon::cli

int main(int argc, char** argv) {
  using namespace tachyon::cli;
  if (argc < 2) {
    PrintUsage(stderr);
    return 2;
  }
  if (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    PrintUsage(stdout);
    return 0;
  }
  if (std::strcmp(argv[1], "--version") == 0) {
    std::printf("tachyon 0.1.0 (cpu: %s)\n", tachyon::DetectedCpuFeatures().ToString().c_str());
    return 0;
  }
  auto it = Commands().find(argv[1]);
  if (it == Commands().end()) {
    std::fprintf(stderr, "tachyon: error: unknown command '%s' (see tachyon --help)\n", argv[1]);
    return 2;
  }
  try {
    return it->second.fn(argc - 1, argv + 1);
  } catch (const std::exception& e) {
    // Commands return Status; this is the last line of defence against a throwing dependency.
    std::fprintf(stderr, "tachyon %s: error: %s\n", argv[1], e.what());
    return 1;
  }
}
