// tachyon quantize IN OUT.gguf --type TYPE [-t THREADS]: re-encodes a GGUF file or a Hugging
// Face folder (config.json + safetensors) as a standard GGUF of a llama.cpp file type
// (Q8_0, Q4_0, Q4_K_M, Q5_K_M, Q6_K, F16, BF16). See model/hf_quantize.h for the rules.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "cli/command.h"
#include "cli/flags.h"
#include "hub/resolve.h"
#include "model/hf_quantize.h"
#include "util/thread_pool.h"

namespace tachyon::cli {
namespace quantize_cmd {

constexpr const char* kDescription =
    "Re-encodes a GGUF file or a Hugging Face folder as a GGUF of a llama.cpp file type.";

int Fail(const std::string& msg) {
  std::fprintf(stderr, "tachyon quantize: error: %s\n", msg.c_str());
  return 1;
}

int RunQuantize(int argc, char** argv) {
  std::string in, out, type;
  int threads = 0;
  auto app = NewCommandApp("quantize", kDescription);
  app->add_option("IN", in,
                  "a GGUF file, a Hugging Face model folder (config.json + *.safetensors) or a "
                  "Hub repository ORG/NAME[:FILE] (downloaded into the cache when missing)")
      ->required();
  app->add_option("OUT", out, "the GGUF file to write")->required();
  AddChecked(
      *app, "--type,--ftype", &type,
      [](const std::string& v) {
        return model::FindQuantPreset(v)
                   ? OkStatus()
                   : InvalidArgument("unknown type '" + v +
                                     "' (supported: " + model::QuantPresetNames() + ")");
      },
      "file type: " + model::QuantPresetNames())
      ->required();
  AddInt(*app, "-t,--threads", &threads, 0, 1024, "threads (0: all hardware threads)");
  if (std::optional<int> rc = ParseFlags(*app, argc, argv)) return *rc;
  std::optional<model::QuantPreset> preset = model::FindQuantPreset(type);
  if (!preset) return Fail("unknown --type '" + type + "'");  // checked at parse time
  if (threads == 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ThreadPool pool(threads);
  const auto start = std::chrono::steady_clock::now();
  auto resolved = hub::ResolveModel(in);
  if (!resolved.ok()) return Fail(resolved.status().message());
  auto stats = model::QuantizeModelFile(resolved->model_path, out, *preset, &pool);
  if (!stats.ok()) return Fail(stats.status().message());
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s: %lld tensors, %.1f MiB -> %.1f MiB (%s) in %.1f s\n", out.c_str(),
              static_cast<long long>(stats->n_tensors), stats->bytes_in / 1048576.0,
              stats->bytes_out / 1048576.0, std::string(preset->name).c_str(), secs);
  return 0;
}

TACHYON_COMMAND(quantize, "Quantize a GGUF file or a Hugging Face folder to a GGUF", RunQuantize);

}  // namespace quantize_cmd

}  // namespace tachyon::cli
