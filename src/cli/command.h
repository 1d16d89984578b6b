// Subcommand registry of the tachyon binary. Each src/cli/<name>.cc registers itself:
//
//   static int RunInspect(int argc, char** argv);   // argv[0] is the subcommand name
//   TACHYON_COMMAND(inspect, "Show a GGUF file's metadata and tensors", RunInspect);
//
// A command declares its flags on a CLI::App and parses them with cli/flags.h (NewCommandApp,
// the typed Add* helpers, ParseFlags; serve, run and bench add the shared engine flags of
// cli/engine_flags.h), so that its --help comes from the same declarations. On bad input a
// command prints one error line to stderr ("tachyon NAME: error: ...") and returns non-zero:
// 2 for a usage error, 1 for a failure while running.
#pragma once

#include <map>
#include <string>

namespace tachyon::cli {

using CommandFn = int (*)(int argc, char** argv);

struct CommandInfo {
  std::string help;
  CommandFn fn;
};

std::map<std::string, CommandInfo>& Commands();

struct CommandRegistrar {
  CommandRegistrar(const char* name, const char* help, CommandFn fn) {
    Commands()[name] = CommandInfo{help, fn};
  }
};

}  // namespace tachyon::cli

#define TACHYON_COMMAND(name, help, fn) \
  static ::tachyon::cli::CommandRegistrar tachyon_command_registrar_##name(#name, help, fn)
