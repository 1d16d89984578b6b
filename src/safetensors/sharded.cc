// SafetensorsModel: a single file or the shards of model.safetensors.index.json.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "safetensors/safetensors.h"
#include "util/json_text.h"

namespace tachyon::safetensors {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kIndexName[] = "model.safetensors.index.json";

// The shard file names the index maps tensors to, and the tensor -> shard map.
Status ReadIndex(const std::string& path, std::map<std::string, std::string>* weight_map) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  ASSIGN_OR_RETURN(json j, ParseJsonDocument(text, path));
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
    return InvalidArgument(path + ": missing object field weight_map");
  }
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    if (!it->is_string()) {
      return InvalidArgument(path + ": weight_map entry '" + it.key() + "' is not a string");
    }
    const std::string shard = it->get<std::string>();
    // Shards live beside the index: no absolute paths or parent references.
    if (shard.empty() || shard.find('/') != std::string::npos ||
        shard.find('\\') != std::string::npos || shard == "." || shard == "..") {
      return InvalidArgument(path + ": weight_map entry '" + it.key() + "' names shard '" +
                             shard + "' outside the folder");
    }
    (*weight_map)[it.key()] = shard;
  }
  if (weight_map->empty()) return InvalidArgument(path + ": weight_map is empty");
  return OkStatus();
}

}  // namespace

Result<SafetensorsModel> SafetensorsModel::Open(const std::string& path) {
  SafetensorsModel m;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(path));
    m.shards_.push_back(std::make_unique<SafetensorsFile>(std::move(f)));
  } else if (fs::exists(fs::path(path) / kIndexName, ec)) {
    const std::string index_path = (fs::path(path) / kIndexName).string();
    std::map<std::string, std::string> weight_map;
    RETURN_IF_ERROR(ReadIndex(index_path, &weight_map));
    std::map<std::string, size_t> shard_ids;
    for (const auto& [tensor, shard] : weight_map) {
      if (shard_ids.count(shard)) continue;
      ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open((fs::path(path) / shard).string()));
      shard_ids[shard] = m.shards_.size();
      m.shards_.push_back(std::make_unique<SafetensorsFile>(std::move(f)));
    }
    for (const auto& [tensor, shard] : weight_map) {
      const SafetensorsFile* f = m.shards_[shard_ids[shard]].get();
      const TensorInfo* t = f->Find(tensor);
      if (t == nullptr) {
        return DataLoss(index_path + ": tensor '" + tensor + "' is not in shard " + shard);
      }
      m.tensors_[tensor] = Entry{f, t};
    }
    return m;
  } else {
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(path, ec)) {
      if (e.path().extension() == ".safetensors") files.push_back(e.path().string());
    }
    if (files.size() != 1) {
      return NotFound(path + ": expected " + kIndexName + " or exactly one .safetensors file, found " +
                      std::to_string(files.size()) + " .safetensors files");
    }
    ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(files[0]));
    m.shards_.push_back(std::make_unique<SafetensorsFile>(std::move(f)));
  }
  for (const TensorInfo& t : m.shards_[0]->tensors()) m.tensors_[t.name] = Entry{m.shards_[0].get(), &t};
  return m;
}

std::optional<SafetensorsModel::Entry> SafetensorsModel::Find(std::string_view name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> SafetensorsModel::TensorNames() const {
  std::vector<std::string> names;
  for (const auto& [name, e] : tensors_) names.push_back(name);
  return names;
}

}  // namespace tachyon::safetensors
