// tachyon synth --arch llama|qwen2|qwen3|gemma3 --shape llama-1b|llama-8b|qwen-0.5b|tiny
//               --type TYPE -o OUT.gguf [--seed S] [-t THREADS]
// Writes a random-weight model of a real shape (for benchmarks; see model/synth.h).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "cli/command.h"
#include "cli/flags.h"
#include "model/synth.h"

namespace tachyon::cli {
namespace synth_cmd {

int Fail(const std::string& msg) {
  std::fprintf(stderr, "tachyon synth: error: %s\n", msg.c_str());
  return 1;
}

int RunSynth(int argc, char** argv) {
  model::SynthOptions o;
  std::string out;
  int threads = 0;
  auto app = NewCommandApp("synth", "Writes a random-weight model of a real shape (benchmarks).");
  AddChoice(*app, "--arch", &o.arch, {"llama", "qwen2", "qwen3", "gemma3"}, "architecture");
  AddChecked(
      *app, "--shape", &o.shape,
      [](const std::string& v) { return model::FindSynthShape(v).status(); },
      "shape: " + model::SynthShapeNames());
  app->add_option("--type", o.type,
                  "weight type: F32, F16, BF16, Q8_0, Q4_0, ..., Q6_K or the mix Q4_K_M")
      ->capture_default_str();
  app->add_option("-o,--out", out, "output GGUF file")->required();
  AddInt<uint64_t>(*app, "--seed", &o.seed, 0, UINT64_MAX, "random seed");
  AddInt(*app, "-t,--threads", &threads, 0, 1024, "threads (0: all hardware threads)");
  if (std::optional<int> rc = ParseFlags(*app, argc, argv)) return *rc;
  ThreadPool pool(threads);
  const auto t0 = std::chrono::steady_clock::now();
  Status st = model::WriteSynthModel(o, out, &pool);
  if (!st.ok()) return Fail(st.message());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "wrote %s (%s %s %s) in %.1f s\n", out.c_str(), o.arch.c_str(),
               o.shape.c_str(), o.type.c_str(), s);
  return 0;
}

TACHYON_COMMAND(synth, "Write a random-weight model of a real shape (benchmarks)", RunSynth);

}  // namespace synth_cmd

}  // namespace tachyon::cli
