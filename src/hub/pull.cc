#include "hub/pull.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "util/json_text.h"
#include "util/mmap_file.h"
#include "util/strings.h"

namespace tachyon::hub {

namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool IsSplitPart(const std::string& f) {
  // name-00001-of-00003.gguf
  const size_t of = f.rfind("-of-");
  return of != std::string::npos && of >= 6 && f[of - 6] == '-';
}

std::vector<std::string> Ggufs(const std::vector<std::string>& files) {
  std::vector<std::string> out;
  for (const std::string& f : files) {
    if (EndsWith(AsciiLower(f), ".gguf")) out.push_back(f);
  }
  std::sort(out.begin(), out.end());
  return out;
}

const char* kLocalHint =
    "pass a local path instead: -m /path/to/model.gguf or -m /path/to/hf-folder "
    "(config.json + *.safetensors), or run `tachyon pull` where the Hub is reachable";

// Drops the *.safetensors of an HF file list that the model does not use: with an index in
// the snapshot, those its weight_map does not name (e.g. Mistral's consolidated.safetensors
// beside the shards); without one, all but model.safetensors when that exists.
Result<std::vector<std::string>> KeepUsedWeights(std::vector<std::string> files,
                                                 const RepoCache& cache,
                                                 const std::string& commit) {
  auto is_weights = [](const std::string& f) { return EndsWith(f, ".safetensors"); };
  const std::string index = "model.safetensors.index.json";
  std::set<std::string> keep;
  if (std::find(files.begin(), files.end(), index) != files.end()) {
    const std::string path = cache.SnapshotPath(commit, index);
    ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
    ASSIGN_OR_RETURN(nlohmann::json j, ParseJsonDocument(text, path));
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
      return InvalidArgument(path + ": expected a JSON object with a weight_map");
    }
    for (const auto& [tensor, shard] : j["weight_map"].items()) {
      if (shard.is_string()) keep.insert(shard.get<std::string>());
    }
  } else if (std::find(files.begin(), files.end(), "model.safetensors") != files.end()) {
    keep.insert("model.safetensors");
  } else {
    return files;
  }
  files.erase(std::remove_if(files.begin(), files.end(),
                             [&](const std::string& f) { return is_weights(f) && !keep.count(f); }),
              files.end());
  return files;
}

// Completes `r` from what the snapshot folder holds for `spec`.
Status FillFromSnapshot(const ModelSpec& spec, const RepoCache& cache,
                        const std::vector<std::string>& available, PullResult* r) {
  r->snapshot_dir = cache.SnapshotDir(r->commit);
  if (!spec.file.empty()) {
    if (!cache.Has(r->commit, spec.file)) return NotFound(spec.file);
    r->files = {spec.file};
    r->is_hf_folder = false;
    r->model_path = cache.SnapshotPath(r->commit, spec.file);
    return OkStatus();
  }
  std::vector<std::string> hf = SelectHfFolderFiles(available);
  if (!hf.empty()) {
    const std::string index = "model.safetensors.index.json";
    if (std::find(hf.begin(), hf.end(), index) != hf.end() && !cache.Has(r->commit, index)) {
      return NotFound(index);
    }
    ASSIGN_OR_RETURN(hf, KeepUsedWeights(hf, cache, r->commit));
    for (const std::string& f : hf) {
      if (!cache.Has(r->commit, f)) return NotFound(f);
    }
    r->files = hf;
    r->is_hf_folder = true;
    r->model_path = r->snapshot_dir;
    return OkStatus();
  }
  r->gguf_choices = Ggufs(available);
  const std::string pick = PickDefaultGguf(available);
  if (pick.empty()) return NotFound("no *.safetensors or *.gguf model files");
  if (!cache.Has(r->commit, pick)) return NotFound(pick);
  r->files = {pick};
  r->model_path = cache.SnapshotPath(r->commit, pick);
  return OkStatus();
}

Result<PullResult> FromCache(const ModelSpec& spec, const HubOptions& o, const std::string& why) {
  RepoCache cache(o.cache_dir, spec.repo);
  PullResult r;
  r.from_cache_only = true;
  std::optional<std::string> commit = cache.ReadRef(spec.revision);
  if (!commit) {
    return NotFound(spec.ToString() + " is not in the cache " + o.cache_dir + " and " + why + "; " +
                    kLocalHint);
  }
  r.commit = *commit;
  Status st = FillFromSnapshot(spec, cache, cache.ListSnapshot(r.commit), &r);
  if (!st.ok()) {
    return NotFound(spec.ToString() + ": " + st.message() + " is not in the cache " +
                    cache.SnapshotDir(r.commit) + " and " + why + "; " + kLocalHint);
  }
  return r;
}

// Downloads the files of `wanted` the snapshot lacks, a few at a time. Returns how many.
Result<int64_t> Fetch(const HubClient& client, const RepoCache& cache, const std::string& commit,
                      const std::vector<RepoFileInfo>& files,
                      const std::vector<std::string>& wanted, const HubOptions& o,
                      bool show_progress = true) {
  std::vector<const RepoFileInfo*> todo;
  int64_t total = 0;
  for (const RepoFileInfo& f : files) {
    if (std::find(wanted.begin(), wanted.end(), f.path) == wanted.end()) continue;
    if (cache.Has(commit, f.path)) continue;
    todo.push_back(&f);
    total += std::max<int64_t>(f.size, 0);
  }
  if (todo.empty()) return int64_t{0};
  Progress progress(o.progress && show_progress, total, static_cast<int>(todo.size()));
  std::atomic<size_t> next{0};
  std::vector<Status> results(todo.size());
  auto worker = [&]() {
    for (size_t i = next++; i < todo.size(); i = next++) {
      results[i] = client.Download(cache, commit, *todo[i], &progress);
    }
  };
  const int n = std::min<int>(o.parallel, static_cast<int>(todo.size()));
  std::vector<std::thread> threads;
  for (int t = 1; t < n; ++t) threads.emplace_back(worker);
  worker();
  for (std::thread& t : threads) t.join();
  progress.Finish();
  for (const Status& st : results) {
    if (!st.ok()) return st;
  }
  return static_cast<int64_t>(todo.size());
}

}  // namespace

std::string PickDefaultGguf(const std::vector<std::string>& files) {
  std::vector<std::string> candidates;
  for (const std::string& f : Ggufs(files)) {
    const std::string l = AsciiLower(f);
    if (IsSplitPart(l) || l.find("mmproj") != std::string::npos) continue;
    candidates.push_back(f);
  }
  for (const char* want : {"q4_k_m", "q4_0", "q8_0"}) {
    for (const std::string& f : candidates) {
      if (AsciiLower(f).find(want) != std::string::npos) return f;
    }
  }
  return candidates.empty() ? std::string() : candidates.front();
}

std::vector<std::string> SelectHfFolderFiles(const std::vector<std::string>& files) {
  static const char* const kMeta[] = {
      "config.json",           "generation_config.json",      "tokenizer.json",
      "tokenizer_config.json", "special_tokens_map.json",     "chat_template.jinja",
      "tokenizer.model",       "model.safetensors.index.json"};
  bool has_config = false, has_weights = false;
  std::vector<std::string> out;
  for (const std::string& f : files) {
    if (f.find('/') != std::string::npos) continue;  // top level only
    if (f == "config.json") has_config = true;
    if (EndsWith(f, ".safetensors")) {
      has_weights = true;
      out.push_back(f);
    } else if (std::find(std::begin(kMeta), std::end(kMeta), f) != std::end(kMeta)) {
      out.push_back(f);
    }
  }
  if (!has_config || !has_weights) return {};
  std::sort(out.begin(), out.end());
  return out;
}

Result<PullResult> Pull(const ModelSpec& spec, const HubOptions& o) {
  if (!spec.is_hub()) return InvalidArgument(spec.path + " is not a Hub repository name");
  if (o.offline) return FromCache(spec, o, "HF_HUB_OFFLINE is set");
  HubClient client(o);
  Result<RepoInfo> info = client.GetRepoInfo(spec.repo, spec.revision);
  if (!info.ok()) {
    if (info.status().code() == StatusCode::kUnavailable) {
      return FromCache(
          spec, o, "the Hub (" + o.endpoint + ") cannot be reached: " + info.status().message());
    }
    return info.status().WithContext("pull " + spec.ToString());
  }
  RepoCache cache(o.cache_dir, spec.repo);
  PullResult r;
  r.commit = info->commit;
  std::vector<std::string> names;
  for (const RepoFileInfo& f : info->files) names.push_back(f.path);
  std::vector<std::string> wanted;
  if (!spec.file.empty()) {
    if (std::find(names.begin(), names.end(), spec.file) == names.end()) {
      std::string msg = spec.repo + " has no file '" + spec.file + "'";
      const std::vector<std::string> ggufs = Ggufs(names);
      if (!ggufs.empty()) {
        msg += " (GGUF files:";
        for (const std::string& g : ggufs) msg += " " + g;
        msg += ")";
      }
      return NotFound(msg);
    }
    wanted = {spec.file};
  } else {
    wanted = SelectHfFolderFiles(names);
    if (wanted.empty()) {
      const std::string pick = PickDefaultGguf(names);
      if (pick.empty()) {
        return NotFound(spec.repo +
                        " has neither a Hugging Face model (config.json + "
                        "*.safetensors) nor a GGUF file");
      }
      wanted = {pick};
    }
  }
  // The shard index comes first: it says which *.safetensors the model uses.
  const std::string index = "model.safetensors.index.json";
  if (std::find(wanted.begin(), wanted.end(), index) != wanted.end()) {
    ASSIGN_OR_RETURN(int64_t n, Fetch(client, cache, r.commit, info->files, {index}, o,
                                      /*show_progress=*/false));
    r.downloaded_files += n;
  }
  if (spec.file.empty()) {
    ASSIGN_OR_RETURN(wanted, KeepUsedWeights(wanted, cache, r.commit));
  }
  ASSIGN_OR_RETURN(int64_t n, Fetch(client, cache, r.commit, info->files, wanted, o));
  r.downloaded_files += n;
  RETURN_IF_ERROR(cache.WriteRef(spec.revision, r.commit));
  RETURN_IF_ERROR(FillFromSnapshot(spec, cache, names, &r));
  if (spec.file.empty() && !r.is_hf_folder) r.gguf_choices = Ggufs(names);
  return r;
}

}  // namespace tachyon::hub
