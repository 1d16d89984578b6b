// Where chat templates come from: GGUF metadata and tokenizer_config.json.
#include <sys/stat.h>

#include "chat/chat_template.h"
#include "gguf/gguf.h"
#include "util/json_text.h"
#include "util/mmap_file.h"

namespace tachyon::chat {
namespace {

bool IsDirectory(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// A special token in tokenizer_config.json: "<s>" or {"content": "<s>", ...}.
std::string TokenString(const nlohmann::json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string()) {
    return j["content"].get<std::string>();
  }
  return "";
}

std::string GgufTokenText(const gguf::GgufFile& file, std::string_view id_key) {
  std::optional<int64_t> id = file.GetInt(id_key);
  const gguf::Value* tokens = file.Find("tokenizer.ggml.tokens");
  if (!id || !tokens || tokens->type != gguf::ValueType::kArray || *id < 0 ||
      size_t(*id) >= tokens->arr.size()) {
    return "";
  }
  return tokens->arr[size_t(*id)].s;
}

Result<nlohmann::json> ParseConfig(std::string_view text, std::string_view origin) {
  ASSIGN_OR_RETURN(nlohmann::json j, ParseJsonDocument(text, std::string(origin)));
  if (!j.is_object()) return InvalidArgument(std::string(origin) + ": expected a JSON object");
  return j;
}

Result<std::string> PickTemplate(const nlohmann::json& config, std::string_view name,
                                 std::string_view origin) {
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) {
    return NotFound(std::string(origin) + ": no chat_template");
  }
  if (it->is_string()) {
    if (!name.empty() && name != "default") {
      return NotFound(std::string(origin) + ": no chat template named '" + std::string(name) + "'");
    }
    return it->get<std::string>();
  }
  if (!it->is_array()) {
    return InvalidArgument(std::string(origin) + ": chat_template must be a string or a list");
  }
  const nlohmann::json* fallback = nullptr;
  std::string want = name.empty() ? "default" : std::string(name);
  for (const auto& entry : *it) {
    if (!entry.is_object() || !entry.contains("template") || !entry["template"].is_string()) {
      return InvalidArgument(std::string(origin) +
                             ": chat_template list entries must be {name, template}");
    }
    // A non-string name is no name (value("name", ...) would throw on it).
    auto name_it = entry.find("name");
    const std::string entry_name =
        name_it != entry.end() && name_it->is_string() ? name_it->get<std::string>() : "";
    if (entry_name == want) return entry["template"].get<std::string>();
    if (!fallback) fallback = &entry;
  }
  if (name.empty() && fallback) return (*fallback)["template"].get<std::string>();
  return NotFound(std::string(origin) + ": no chat template named '" + want + "'");
}

}  // namespace

Result<std::string> ChatTemplateFromGguf(const gguf::GgufFile& file, std::string_view name) {
  std::string key = "tokenizer.chat_template";
  if (!name.empty() && name != "default") key += "." + std::string(name);
  std::optional<std::string> t = file.GetString(key);
  if (!t && name == "default") t = file.GetString("tokenizer.chat_template");
  if (!t) return NotFound(file.path() + ": no " + key + " in GGUF metadata");
  return *t;
}

Result<std::string> ChatTemplateFromTokenizerConfigText(std::string_view json_text,
                                                        std::string_view name,
                                                        std::string_view origin) {
  ASSIGN_OR_RETURN(nlohmann::json config, ParseConfig(json_text, origin));
  return PickTemplate(config, name, origin);
}

Result<std::string> ChatTemplateFromTokenizerConfig(const std::string& path,
                                                    std::string_view name) {
  std::string file = IsDirectory(path) ? path + "/tokenizer_config.json" : path;
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(file));
  return ChatTemplateFromTokenizerConfigText(text, name, file);
}

Result<std::string> ReadChatTemplateFile(const std::string& path) {
  if (EndsWith(path, ".json")) return ChatTemplateFromTokenizerConfig(path);
  return ReadFileToString(path);
}

Result<ModelChatTemplate> LoadChatTemplate(const std::string& model_path, std::string_view name) {
  ModelChatTemplate out;
  if (!IsDirectory(model_path) && EndsWith(model_path, ".gguf")) {
    ASSIGN_OR_RETURN(gguf::GgufFile file, gguf::GgufFile::Open(model_path));
    ASSIGN_OR_RETURN(out.source, ChatTemplateFromGguf(file, name));
    out.bos_token = GgufTokenText(file, "tokenizer.ggml.bos_token_id");
    out.eos_token = GgufTokenText(file, "tokenizer.ggml.eos_token_id");
    return out;
  }
  std::string file = IsDirectory(model_path) ? model_path + "/tokenizer_config.json" : model_path;
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(file));
  ASSIGN_OR_RETURN(nlohmann::json config, ParseConfig(text, file));
  ASSIGN_OR_RETURN(out.source, PickTemplate(config, name, file));
  if (config.contains("bos_token")) out.bos_token = TokenString(config["bos_token"]);
  if (config.contains("eos_token")) out.eos_token = TokenString(config["eos_token"]);
  return out;
}

}  // namespace tachyon::chat
