// Subcommand registry of the tachyon binary. Each src/cli/<name>.cc registers itself:
//
//   static int RunInspect(int argc, char** argv);   // argv[0] is the subcommand name
//   TACHYON_COMMAND(inspect, "Show a GGUF file's metadata and tensors", RunInspect);
//
// Commands print one clear error line to stderr and return non-zero on bad input.
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
