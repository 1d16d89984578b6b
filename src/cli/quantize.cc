// tachyon quantize IN OUT.gguf --type TYPE [-t THREADS]: re-encodes a GGUF file or a Hugging
// Face folder (config.json + safetensors) as a standard GGUF of a llama.cpp file type
// (Q8_0, Q4_0, Q4_K_M, Q5_K_M, Q6_K, F16, BF16). See model/hf_quantize.h for the rules.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "cli/command.h"
#include "hub/resolve.h"
#include "model/hf_quantize.h"
#include "util/thread_pool.h"

namespace tachyon::cli {
namespace {

const char kUsage[] =
    "usage: tachyon quantize IN OUT.gguf --type TYPE [-t THREADS]\n"
    "  IN     a GGUF file, a Hugging Face model folder (config.json + *.safetensors) or a\n"
    "         Hub repository ORG/NAME[:FILE] (downloaded into the cache when missing)\n"
    "  TYPE   Q8_0 | Q4_0 | Q4_K_M | Q5_K_M | Q6_K | F16 | BF16\n";

int Fail(const std::string& msg) {
  std::fprintf(stderr, "tachyon quantize: error: %s\n", msg.c_str());
  return 1;
}

int RunQuantize(int argc, char** argv) {
  std::string in, out, type;
  int threads = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = nullptr;
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if ((a == "--type" || a == "--ftype") && (v = value())) {
      type = v;
    } else if ((a == "-t" || a == "--threads") && (v = value())) {
      threads = std::atoi(v);
      if (threads <= 0 || threads > 1024) return Fail("--threads must be in [1, 1024]");
    } else if (!a.empty() && a[0] != '-' && in.empty()) {
      in = a;
    } else if (!a.empty() && a[0] != '-' && out.empty()) {
      out = a;
    } else {
      std::fputs(kUsage, stderr);
      return Fail("bad or incomplete argument '" + a + "'");
    }
  }
  if (in.empty() || out.empty() || type.empty()) {
    std::fputs(kUsage, stderr);
    return Fail("IN, OUT and --type are required");
  }
  std::optional<model::QuantPreset> preset = model::FindQuantPreset(type);
  if (!preset) {
    return Fail("unknown --type '" + type + "' (supported: " + model::QuantPresetNames() + ")");
  }
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

}  // namespace

TACHYON_COMMAND(quantize, "Quantize a GGUF file or a Hugging Face folder to a GGUF", RunQuantize);

}  // namespace tachyon::cli
