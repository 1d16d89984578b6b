#include "hub/resolve.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "hub/pull.h"
#include "util/json_text.h"
#include "util/mmap_file.h"

namespace tachyon::hub {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

template <class T>
Status ReadNumber(const json& j, const char* key, const std::string& path, std::optional<T>* out) {
  if (!j.contains(key) || j[key].is_null()) return OkStatus();
  const json& v = j[key];
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) return InvalidArgument(path + ": " + key + " must be true or false");
    *out = v.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    if (!v.is_number_integer()) return InvalidArgument(path + ": " + key + " must be an integer");
    *out = v.get<T>();
  } else {
    if (!v.is_number()) return InvalidArgument(path + ": " + key + " must be a number");
    *out = v.get<T>();
  }
  return OkStatus();
}

bool IsHfFolder(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_regular_file(fs::path(path) / "config.json", ec);
}

Status FillLocal(ResolvedModel* r) {
  std::error_code ec;
  const fs::path p(r->model_path);
  if (IsHfFolder(r->model_path)) {
    r->is_hf_folder = true;
    r->tokenizer_path = r->model_path;
    std::string name = p.filename().string();
    if (name.empty()) name = p.parent_path().filename().string();
    if (r->name.empty()) r->name = name;
    ASSIGN_OR_RETURN(r->generation, ReadGenerationConfig((p / "generation_config.json").string()));
    return OkStatus();
  }
  if (fs::is_directory(p, ec)) {
    return NotFound(r->model_path +
                    ": a folder without config.json (expected a Hugging Face "
                    "model folder or a .gguf file)");
  }
  if (!fs::exists(p, ec)) {
    return NotFound(r->model_path +
                    ": no such file or folder (name a model as a .gguf file, "
                    "a Hugging Face folder, or a Hub repo ORG/NAME[:FILE])");
  }
  r->tokenizer_path = r->model_path;
  if (r->name.empty()) r->name = p.stem().string();
  return OkStatus();
}

}  // namespace

Result<GenerationDefaults> ReadGenerationConfig(const std::string& path) {
  GenerationDefaults d;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return d;
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  ASSIGN_OR_RETURN(json j, ParseJsonDocument(text, path));
  if (!j.is_object()) return InvalidArgument(path + ": not a JSON object");
  if (j.contains("eos_token_id") && !j["eos_token_id"].is_null()) {
    const json& e = j["eos_token_id"];
    auto add = [&](const json& v) -> Status {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX) {
        return InvalidArgument(path + ": eos_token_id must be a token id or a list of them");
      }
      d.eos_token_ids.push_back(v.get<int32_t>());
      return OkStatus();
    };
    if (e.is_array()) {
      for (const json& v : e) RETURN_IF_ERROR(add(v));
    } else {
      RETURN_IF_ERROR(add(e));
    }
  }
  RETURN_IF_ERROR(ReadNumber(j, "bos_token_id", path, &d.bos_token_id));
  RETURN_IF_ERROR(ReadNumber(j, "do_sample", path, &d.do_sample));
  RETURN_IF_ERROR(ReadNumber(j, "temperature", path, &d.temperature));
  RETURN_IF_ERROR(ReadNumber(j, "top_p", path, &d.top_p));
  RETURN_IF_ERROR(ReadNumber(j, "top_k", path, &d.top_k));
  RETURN_IF_ERROR(ReadNumber(j, "min_p", path, &d.min_p));
  RETURN_IF_ERROR(ReadNumber(j, "repetition_penalty", path, &d.repetition_penalty));
  RETURN_IF_ERROR(ReadNumber(j, "max_new_tokens", path, &d.max_new_tokens));
  return d;
}

Result<ResolvedModel> ResolveModel(const std::string& spec_text, const ResolveOptions& options) {
  ResolvedModel r;
  ASSIGN_OR_RETURN(r.spec, ParseModelSpec(spec_text));
  if (!r.spec.is_hub()) {
    r.model_path = r.spec.path;
    RETURN_IF_ERROR(FillLocal(&r));
    return r;
  }
  HubOptions hub = options.hub;
  if (!options.allow_download) hub.offline = true;
  ASSIGN_OR_RETURN(PullResult pulled, Pull(r.spec, hub));
  r.model_path = pulled.model_path;
  r.name = r.spec.repo;
  r.downloaded = pulled.downloaded_files > 0;
  RETURN_IF_ERROR(FillLocal(&r));
  return r;
}

}  // namespace tachyon::hub
