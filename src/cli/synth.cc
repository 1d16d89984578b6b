// tachyon synth --arch llama|qwen2|qwen3 --shape llama-1b|qwen-0.5b|tiny --type TYPE
//               -o OUT.gguf [--seed S] [-t THREADS]
// Writes a random-weight model of a real shape (for benchmarks; see model/synth.h).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli/command.h"
#include "model/synth.h"

namespace tachyon::cli {
namespace {

constexpr const char* kUsage =
    "usage: tachyon synth --arch llama|qwen2|qwen3 --shape llama-1b|qwen-0.5b|tiny\n"
    "                     --type Q4_0|Q8_0|Q4_K_M|F16|... -o OUT.gguf [--seed S] [-t THREADS]\n";

int Fail(const std::string& msg) {
  std::fprintf(stderr, "tachyon synth: error: %s\n", msg.c_str());
  return 1;
}

int RunSynth(int argc, char** argv) {
  model::SynthOptions o;
  std::string out;
  int threads = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--arch" && (v = value())) {
      o.arch = v;
    } else if (a == "--shape" && (v = value())) {
      o.shape = v;
    } else if (a == "--type" && (v = value())) {
      o.type = v;
    } else if ((a == "-o" || a == "--out") && (v = value())) {
      out = v;
    } else if (a == "--seed" && (v = value())) {
      o.seed = std::strtoull(v, nullptr, 10);
    } else if ((a == "-t" || a == "--threads") && (v = value())) {
      threads = std::atoi(v);
    } else {
      std::fputs(kUsage, stderr);
      return Fail("bad or incomplete argument '" + a + "'");
    }
  }
  if (out.empty()) {
    std::fputs(kUsage, stderr);
    return Fail("-o OUT.gguf is required");
  }
  ThreadPool pool(threads);
  const auto t0 = std::chrono::steady_clock::now();
  Status st = model::WriteSynthModel(o, out, &pool);
  if (!st.ok()) return Fail(st.message());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "wrote %s (%s %s %s) in %.1f s\n", out.c_str(), o.arch.c_str(),
               o.shape.c_str(), o.type.c_str(), s);
  return 0;
}

}  // namespace

TACHYON_COMMAND(synth, "Write a random-weight model of a real shape (benchmarks)", RunSynth);

}  // namespace tachyon::cli
