#include "model/hf_tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "util/json_text.h"
#include "util/mmap_file.h"

namespace tachyon::model {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

Result<std::optional<json>> ReadJsonIfExists(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return std::optional<json>();
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path.string()));
  ASSIGN_OR_RETURN(json j, ParseJsonDocument(text, path.string()));
  if (!j.is_object()) return InvalidArgument(path.string() + ": not a JSON object");
  return std::optional<json>(std::move(j));
}

// bos_token / eos_token: a string or an AddedToken object {"content": ...}.
std::optional<std::string> TokenText(const json& cfg, const char* key) {
  if (!cfg.contains(key)) return std::nullopt;
  const json& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  return std::nullopt;
}

std::optional<int64_t> TokenId(const json& tok, const std::string& text) {
  if (tok.contains("added_tokens") && tok["added_tokens"].is_array()) {
    for (const json& t : tok["added_tokens"]) {
      if (t.is_object() && t.value("content", json()) == text && t.contains("id") &&
          t["id"].is_number_integer()) {
        return t["id"].get<int64_t>();
      }
    }
  }
  if (tok.contains("model") && tok["model"].is_object() && tok["model"].contains("vocab") &&
      tok["model"]["vocab"].is_object()) {
    const json& vocab = tok["model"]["vocab"];
    auto it = vocab.find(text);
    if (it != vocab.end() && it->is_number_integer()) return it->get<int64_t>();
  }
  return std::nullopt;
}

Status AddChatTemplates(const json& cfg, const std::string& path, gguf::GgufWriter* w) {
  if (!cfg.contains("chat_template") || cfg["chat_template"].is_null()) return OkStatus();
  const json& t = cfg["chat_template"];
  if (t.is_string()) {
    w->Set("tokenizer.chat_template", gguf::Value::String(t.get<std::string>()));
    return OkStatus();
  }
  if (!t.is_array()) return InvalidArgument(path + ": chat_template must be a string or a list");
  for (const json& item : t) {
    if (!item.is_object() || !item.contains("name") || !item["name"].is_string() ||
        !item.contains("template") || !item["template"].is_string()) {
      return InvalidArgument(path + ": chat_template entries need string name and template");
    }
    const std::string name = item["name"].get<std::string>();
    w->Set(name == "default" ? "tokenizer.chat_template" : "tokenizer.chat_template." + name,
           gguf::Value::String(item["template"].get<std::string>()));
  }
  return OkStatus();
}

// llama.cpp's token types (tokenizer.ggml.token_type).
constexpr int32_t kTokenNormal = 1, kTokenControl = 3, kTokenUserDefined = 4, kTokenUnused = 5;

// A WordPiece tokenizer.json (BERT family) also gets llama.cpp's "bert" vocabulary, so the file
// loads in llama.cpp and in tachyon without the embedded JSON: token texts in its phantom-space
// spelling (a word-initial piece gets a leading U+2581, a "##" continuation loses its prefix,
// special tokens stay as they are), token types, the token-type count and the special ids
// ([CLS] is the BOS that starts every input, [SEP] the separator that ends it).
Status AddWordPieceVocab(const json& tok, const json* cfg, int64_t type_vocab_size,
                         gguf::GgufWriter* w) {
  const json& vocab = tok["model"]["vocab"];
  if (!vocab.is_object())
    return InvalidArgument("tokenizer.json: WordPiece model.vocab is not an object");
  const std::string prefix = tok["model"].value("continuing_subword_prefix", std::string("##"));
  std::vector<std::optional<std::string>> texts;
  std::vector<int32_t> types;
  auto put = [&](int64_t id, const std::string& text, int32_t type) -> Status {
    if (id < 0 || id >= (int64_t{1} << 24)) {
      return InvalidArgument("tokenizer.json: token id " + std::to_string(id) + " out of range");
    }
    if (static_cast<size_t>(id) >= texts.size()) {
      texts.resize(id + 1);
      types.resize(id + 1, kTokenUnused);
    }
    texts[id] = text;
    types[id] = type;
    return OkStatus();
  };
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it->is_number_integer())
      return InvalidArgument("tokenizer.json: vocab id of '" + it.key() + "' is not an integer");
    const std::string& t = it.key();
    const bool cont = !prefix.empty() && t.compare(0, prefix.size(), prefix) == 0;
    RETURN_IF_ERROR(
        put(it->get<int64_t>(), cont ? t.substr(prefix.size()) : "\xE2\x96\x81" + t, kTokenNormal));
  }
  if (tok.contains("added_tokens") && tok["added_tokens"].is_array()) {
    for (const json& a : tok["added_tokens"]) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() ||
          !a.contains("content") || !a["content"].is_string()) {
        continue;
      }
      const bool special = a.value("special", false);
      RETURN_IF_ERROR(put(a["id"].get<int64_t>(), a["content"].get<std::string>(),
                          special ? kTokenControl : kTokenUserDefined));
    }
  }
  std::vector<std::string> tokens(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    tokens[i] = texts[i] ? *texts[i] : "[PAD" + std::to_string(i) + "]";
  }
  w->Set("tokenizer.ggml.model", gguf::Value::String("bert"));
  w->Set("tokenizer.ggml.tokens", gguf::Value::StringArray(tokens));
  w->Set("tokenizer.ggml.token_type", gguf::Value::Int32Array(types));
  w->Set("tokenizer.ggml.token_type_count",
         gguf::Value::Uint32(static_cast<uint32_t>(std::max<int64_t>(type_vocab_size, 1))));
  if (cfg == nullptr) return OkStatus();
  for (const auto& [key, gguf_key] : {std::pair{"cls_token", "tokenizer.ggml.cls_token_id"},
                                      std::pair{"cls_token", "tokenizer.ggml.bos_token_id"},
                                      std::pair{"sep_token", "tokenizer.ggml.seperator_token_id"},
                                      std::pair{"pad_token", "tokenizer.ggml.padding_token_id"},
                                      std::pair{"unk_token", "tokenizer.ggml.unknown_token_id"},
                                      std::pair{"mask_token", "tokenizer.ggml.mask_token_id"}}) {
    std::optional<std::string> text = TokenText(*cfg, key);
    std::optional<int64_t> id = text ? TokenId(tok, *text) : std::nullopt;
    if (id && *id >= 0 && *id < static_cast<int64_t>(tokens.size())) {
      w->Set(gguf_key, gguf::Value::Uint32(static_cast<uint32_t>(*id)));
    }
  }
  return OkStatus();
}

}  // namespace

Status AddHfTokenizerMetadata(const std::string& dir, gguf::GgufWriter* w) {
  const fs::path root(dir);
  ASSIGN_OR_RETURN(std::optional<json> tok, ReadJsonIfExists(root / "tokenizer.json"));
  if (tok) {
    ASSIGN_OR_RETURN(std::string text, ReadFileToString((root / "tokenizer.json").string()));
    w->Set("tokenizer.huggingface.json", gguf::Value::String(std::move(text)));
  }
  const std::string cfg_path = (root / "tokenizer_config.json").string();
  ASSIGN_OR_RETURN(std::optional<json> cfg, ReadJsonIfExists(cfg_path));
  // Newer folders keep the template in chat_template.jinja (it wins over the config's).
  const fs::path jinja = root / "chat_template.jinja";
  std::error_code ec;
  const bool has_jinja = fs::is_regular_file(jinja, ec);
  if (has_jinja) {
    ASSIGN_OR_RETURN(std::string text, ReadFileToString(jinja.string()));
    w->Set("tokenizer.chat_template", gguf::Value::String(std::move(text)));
  }
  if (!cfg) return OkStatus();
  if (!has_jinja) RETURN_IF_ERROR(AddChatTemplates(*cfg, cfg_path, w));
  if (cfg->contains("add_bos_token") && (*cfg)["add_bos_token"].is_boolean()) {
    w->Set("tokenizer.ggml.add_bos_token", gguf::Value::Bool((*cfg)["add_bos_token"].get<bool>()));
  }
  if (!tok) return OkStatus();
  if (tok->contains("model") && (*tok)["model"].is_object() &&
      (*tok)["model"].value("type", std::string()) == "WordPiece") {
    ASSIGN_OR_RETURN(std::optional<json> config, ReadJsonIfExists(root / "config.json"));
    int64_t type_vocab_size = 1;
    if (config && config->contains("type_vocab_size") &&
        (*config)["type_vocab_size"].is_number_integer()) {
      type_vocab_size = (*config)["type_vocab_size"].get<int64_t>();
    }
    RETURN_IF_ERROR(AddWordPieceVocab(*tok, &*cfg, type_vocab_size, w));
  }
  for (const auto& [key, gguf_key] : {std::pair{"bos_token", "tokenizer.ggml.bos_token_id"},
                                      std::pair{"eos_token", "tokenizer.ggml.eos_token_id"}}) {
    std::optional<std::string> text = TokenText(*cfg, key);
    if (!text) continue;
    std::optional<int64_t> id = TokenId(*tok, *text);
    if (id && *id >= 0 && *id <= INT32_MAX) {
      w->Set(gguf_key, gguf::Value::Uint32(static_cast<uint32_t>(*id)));
    }
  }
  return OkStatus();
}

}  // namespace tachyon::model
