// tachyon pull REPO[:FILE]: downloads a model from the Hugging Face Hub into the cache (see
// hub/pull.h and hub/cache.h) and prints where it is. Later `-m REPO[:FILE]` finds it there.
#include <cstdio>
#include <string>

#include "cli/command.h"
#include "cli/flags.h"
#include "hub/pull.h"
#include "hub/resolve.h"

namespace tachyon::cli {
namespace pull_cmd {

constexpr const char* kDescription =
    "Downloads a model from the Hugging Face Hub into the cache and prints where it is.\n"
    "  REPO  a Hub repository, e.g. Qwen/Qwen2.5-0.5B-Instruct (or hf://REPO[/FILE])\n"
    "  FILE  one file of it, e.g. a .gguf of a GGUF repository (default: the HF model folder,\n"
    "        else a Q4_K_M / Q4_0 / Q8_0 GGUF)\n"
    "environment: HF_ENDPOINT (default https://huggingface.co), HF_TOKEN (gated models),\n"
    "  HF_HOME / HF_HUB_CACHE (cache folder), HF_HUB_OFFLINE=1 (use only the cache)";

int Fail(const std::string& msg) {
  std::fprintf(stderr, "tachyon pull: error: %s\n", msg.c_str());
  return 1;
}

int RunPull(int argc, char** argv) {
  std::string spec_text;
  hub::HubOptions options = hub::HubOptionsFromEnv();
  bool quiet = false;
  auto app = NewCommandApp("pull", kDescription);
  app->add_option("REPO", spec_text, "the model: ORG/NAME[@REV][:FILE] or hf://ORG/NAME[/FILE]")
      ->required();
  app->add_flag("-q,--quiet", quiet, "no progress output");
  AddInt(*app, "--parallel", &options.parallel, 1, 64, "files downloaded at once");
  if (std::optional<int> rc = ParseFlags(*app, argc, argv)) return *rc;
  if (quiet) options.progress = false;
  auto spec = hub::ParseModelSpec(spec_text);
  if (!spec.ok()) return Fail(spec.status().message());
  if (!spec->is_hub()) {
    return Fail("'" + spec_text + "' is a local path, not a Hub repository (ORG/NAME[:FILE])");
  }
  auto pulled = hub::Pull(*spec, options);
  if (!pulled.ok()) return Fail(pulled.status().message());
  if (!pulled->gguf_choices.empty() && spec->file.empty()) {
    std::fprintf(stderr, "pull: %s has %zu GGUF files; picked %s (name one with %s:FILE):\n",
                 spec->repo.c_str(), pulled->gguf_choices.size(), pulled->files.front().c_str(),
                 spec->repo.c_str());
    for (const std::string& f : pulled->gguf_choices) std::fprintf(stderr, "  %s\n", f.c_str());
  }
  if (pulled->from_cache_only) {
    std::fprintf(stderr, "pull: offline; using the cached snapshot %s\n", pulled->commit.c_str());
  } else if (pulled->downloaded_files == 0) {
    std::fprintf(stderr, "pull: %s is up to date (commit %s)\n", spec->ToString().c_str(),
                 pulled->commit.c_str());
  }
  std::printf("%s\n", pulled->model_path.c_str());
  return 0;
}

TACHYON_COMMAND(pull, "Download a model from the Hugging Face Hub into the local cache", RunPull);

}  // namespace pull_cmd

}  // namespace tachyon::cli
