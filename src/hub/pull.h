// Fetching a Hub model into the cache (what `tachyon pull` and `-m ORG/NAME` run).
//
// Which files: FILE when the spec names one; else, for a repository with config.json and
// *.safetensors, the Hugging Face folder (config.json, generation_config.json, tokenizer.json,
// tokenizer_config.json, special_tokens_map.json, chat_template.jinja, tokenizer.model,
// model.safetensors.index.json, and the *.safetensors the index names, or model.safetensors
// alone when there is no index); else one GGUF: the default choice below.
// Files already in the snapshot are not fetched again (a second pull is a no-op).
// Offline ($HF_HUB_OFFLINE=1, or the Hub unreachable): the cached snapshot of refs/REV is
// used; if the files are not there, the error says how to pass a local path.
#pragma once

#include <string>
#include <vector>

#include "hub/client.h"
#include "hub/model_spec.h"
#include "util/status.h"

namespace tachyon::hub {

struct PullResult {
  std::string commit;
  std::string snapshot_dir;
  std::vector<std::string> files;  // the model's files, relative to snapshot_dir
  std::string model_path;          // the GGUF file or snapshot_dir (an HF folder)
  bool is_hf_folder = false;
  int64_t downloaded_files = 0;           // 0: everything was cached
  std::vector<std::string> gguf_choices;  // GGUF files of the repo (when one was picked)
  bool from_cache_only = false;           // offline or the Hub was unreachable
};

// The GGUF picked when the spec names none: Q4_K_M, else Q4_0, else Q8_0, else the first (in
// name order) that is not a split part or a projector. "" when there is none.
std::string PickDefaultGguf(const std::vector<std::string>& files);

// The HF-folder files of `files` (see above); empty when it is not an HF model repo.
std::vector<std::string> SelectHfFolderFiles(const std::vector<std::string>& files);

// Fetches `spec` (a kHub spec) into the cache of `options.cache_dir`.
Result<PullResult> Pull(const ModelSpec& spec, const HubOptions& options);

}  // namespace tachyon::hub
