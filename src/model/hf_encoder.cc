#include "model/hf_encoder.h"

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "util/json_text.h"
#include "util/mmap_file.h"

namespace tachyon::model {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kEncoderArchs[] = {
    "BertModel",       "BertForSequenceClassification",
    "RobertaModel",    "RobertaForSequenceClassification",
    "XLMRobertaModel", "XLMRobertaForSequenceClassification",
};

struct EncoderLayerName {
  const char* hf;    // after "encoder.layer.N."
  const char* gguf;  // after "blk.N."
};
constexpr EncoderLayerName kEncoderLayerNames[] = {
    {"attention.self.query", "attn_q"},
    {"attention.self.key", "attn_k"},
    {"attention.self.value", "attn_v"},
    {"attention.output.dense", "attn_output"},
    {"attention.output.LayerNorm", "attn_output_norm"},
    {"intermediate.dense", "ffn_up"},
    {"output.dense", "ffn_down"},
    {"output.LayerNorm", "layer_output_norm"},
};

Result<std::optional<json>> ReadJson(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return std::optional<json>();
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path.string()));
  ASSIGN_OR_RETURN(json j, ParseJsonDocument(text, path.string()));
  return std::optional<json>(std::move(j));
}

bool Flag(const json& j, const char* key) {
  return j.contains(key) && j[key].is_boolean() && j[key].get<bool>();
}

// ".weight" / ".bias" of `rest` after `stem`, else "".
std::string Suffix(const std::string& rest, const std::string& stem) {
  for (const char* s : {".weight", ".bias"}) {
    if (rest == stem + s) return s;
  }
  return "";
}

}  // namespace

bool IsHfEncoderArch(const std::string& hf_arch) {
  for (const char* a : kEncoderArchs) {
    if (hf_arch == a) return true;
  }
  return false;
}

Status ParseHfEncoderFields(const json& j, const std::string& path, HfConfig* c) {
  c->encoder = true;
  c->classifier = c->hf_arch.ends_with("ForSequenceClassification");
  auto number = [&](const char* key, double def) -> Result<double> {
    if (!j.contains(key) || j[key].is_null()) return def;
    if (!j[key].is_number()) return InvalidArgument(path + ": field " + key + " must be a number");
    return j[key].get<double>();
  };
  // A count or an id: a whole number in [lo, hi] (a double outside int64 would not convert).
  auto whole = [&](const char* key, int64_t def, int64_t lo, int64_t hi) -> Result<int64_t> {
    ASSIGN_OR_RETURN(double v, number(key, static_cast<double>(def)));
    if (!(v >= static_cast<double>(lo) && v <= static_cast<double>(hi)) || v != std::floor(v)) {
      return InvalidArgument(path + ": field " + key + " must be a whole number in [" +
                             std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    return static_cast<int64_t>(v);
  };
  ASSIGN_OR_RETURN(double eps, number("layer_norm_eps", 1e-12));
  if (!(eps > 0)) return InvalidArgument(path + ": field layer_norm_eps must be positive");
  c->rms_eps = eps;
  ASSIGN_OR_RETURN(c->n_token_types, whole("type_vocab_size", 2, 0, int64_t{1} << 20));
  if (j.contains("hidden_act") && j["hidden_act"] != "gelu") {
    return Unimplemented(path + ": hidden_act " + j["hidden_act"].dump() +
                         " is not supported for an encoder (supported: \"gelu\")");
  }
  if (j.contains("position_embedding_type") && j["position_embedding_type"] != "absolute") {
    return Unimplemented(path + ": position_embedding_type " + j["position_embedding_type"].dump() +
                         " is not supported (absolute)");
  }
  const std::string model_type = j.value("model_type", std::string());
  if (model_type == "roberta" || model_type == "xlm-roberta" ||
      c->hf_arch.find("Roberta") != std::string::npos) {
    ASSIGN_OR_RETURN(int64_t pad, whole("pad_token_id", 1, 0, INT32_MAX));
    c->position_offset = pad + 1;
  }
  if (c->n_ctx_train <= c->position_offset) {
    return InvalidArgument(path + ": max_position_embeddings must exceed padding_idx + 1");
  }
  c->n_ctx_train -= c->position_offset;
  if (c->classifier) {
    c->pooling_type = 4;  // rank
    int64_t labels = 0;
    if (j.contains("id2label") && j["id2label"].is_object()) labels = j["id2label"].size();
    ASSIGN_OR_RETURN(c->n_labels,
                     whole("num_labels", labels > 0 ? labels : 1, 1, int64_t{1} << 20));
  } else {
    c->pooling_type = 1;  // mean unless a sentence-transformers config says otherwise
  }
  return OkStatus();
}

Status ReadSentenceTransformersConfig(const std::string& dir, HfConfig* c) {
  const fs::path root(dir);
  ASSIGN_OR_RETURN(std::optional<json> modules, ReadJson(root / "modules.json"));
  if (modules && modules->is_array() && !c->classifier) {
    bool normalize = false;
    for (const json& m : *modules) {
      const std::string type = m.value("type", std::string());
      const std::string sub = m.value("path", std::string());
      if (type.ends_with(".Normalize")) normalize = true;
      if (!type.ends_with(".Pooling")) continue;
      const fs::path cfg_path = root / sub / "config.json";
      ASSIGN_OR_RETURN(std::optional<json> cfg, ReadJson(cfg_path));
      if (!cfg) continue;
      if (Flag(*cfg, "pooling_mode_max_tokens") ||
          Flag(*cfg, "pooling_mode_mean_sqrt_len_tokens") ||
          Flag(*cfg, "pooling_mode_weightedmean_tokens")) {
        return Unimplemented(cfg_path.string() +
                             ": only mean, cls and lasttoken pooling are supported");
      }
      if (Flag(*cfg, "pooling_mode_mean_tokens")) {
        c->pooling_type = 1;
      } else if (Flag(*cfg, "pooling_mode_cls_token")) {
        c->pooling_type = 2;
      } else if (Flag(*cfg, "pooling_mode_lasttoken")) {
        c->pooling_type = 3;
      } else {
        return InvalidArgument(cfg_path.string() + ": no pooling mode is set");
      }
    }
    c->normalize = normalize;
  }
  ASSIGN_OR_RETURN(std::optional<json> sb, ReadJson(root / "sentence_bert_config.json"));
  if (sb && sb->is_object() && sb->contains("max_seq_length") &&
      (*sb)["max_seq_length"].is_number_integer()) {
    const int64_t m = (*sb)["max_seq_length"].get<int64_t>();
    if (m > 0) c->max_seq_len = m;
  }
  // tokenizer.json's own truncation (Hugging Face tokenizers apply it to every encode): the
  // reference implementations cut there when it is below max_seq_length (all-MiniLM-L6-v2: 128).
  ASSIGN_OR_RETURN(std::optional<json> tok, ReadJson(root / "tokenizer.json"));
  if (tok && tok->is_object() && tok->contains("truncation") && (*tok)["truncation"].is_object()) {
    const json& t = (*tok)["truncation"];
    if (t.contains("max_length") && t["max_length"].is_number_integer()) {
      const int64_t m = t["max_length"].get<int64_t>();
      if (m > 0 && (c->max_seq_len == 0 || m < c->max_seq_len)) c->max_seq_len = m;
    }
  }
  if (c->n_ctx_train > 0 && c->max_seq_len > c->n_ctx_train) c->max_seq_len = c->n_ctx_train;
  return OkStatus();
}

void SetGgufPoolingKeys(const HfConfig& c, gguf::GgufWriter* w) {
  using gguf::Value;
  const std::string a = c.gguf_arch + ".";
  if (c.encoder) {
    w->Set(a + "attention.layer_norm_epsilon", Value::Float32(float(c.rms_eps)));
    w->Set(a + "attention.causal", Value::Bool(false));
  }
  if (c.pooling_type == 0) return;
  w->Set(a + "pooling_type", Value::Uint32(uint32_t(c.pooling_type)));
  w->Set(a + "pooling.normalize", Value::Bool(c.normalize));
  if (c.max_seq_len > 0) w->Set(a + "pooling.max_length", Value::Uint32(uint32_t(c.max_seq_len)));
}

Result<std::optional<EncoderTensor>> MapEncoderName(const std::string& full, const HfConfig& c) {
  using R = std::optional<EncoderTensor>;
  std::string name = full;
  for (const char* prefix : {"bert.", "roberta."}) {
    if (name.rfind(prefix, 0) == 0) name = name.substr(std::string(prefix).size());
  }
  constexpr int64_t kHead = int64_t{1} << 30;
  struct Fixed {
    const char* hf;
    const char* gguf;
  };
  static constexpr Fixed kFixed[] = {
      {"embeddings.word_embeddings.weight", "token_embd.weight"},
      {"embeddings.position_embeddings.weight", "position_embd.weight"},
      {"embeddings.token_type_embeddings.weight", "token_types.weight"},
      {"embeddings.LayerNorm.weight", "token_embd_norm.weight"},
      {"embeddings.LayerNorm.bias", "token_embd_norm.bias"},
  };
  for (const Fixed& f : kFixed) {
    if (name != f.hf) continue;
    EncoderTensor t{f.gguf, -1, 0};
    if (name.starts_with("embeddings.position")) t.skip_rows = c.position_offset;
    return R(t);
  }
  if (name == "embeddings.position_ids") return R();
  if (name.starts_with("pooler.") || name.starts_with("classifier.")) {
    if (!c.classifier) return R();  // a bare model's pooler is unused
    const bool roberta_head =
        name.starts_with("classifier.dense.") || name.starts_with("classifier.out_proj.");
    for (const auto& [stem, gguf] : {std::pair<std::string, std::string>{"pooler.dense", "cls"},
                                     {"classifier.dense", "cls"},
                                     {"classifier.out_proj", "cls.output"},
                                     {"classifier", "cls.output"}}) {
      if (roberta_head && stem == "classifier") continue;
      std::string s = Suffix(name, stem);
      if (!s.empty()) return R(EncoderTensor{gguf + s, kHead, 0});
    }
  }
  const std::string prefix = "encoder.layer.";
  if (name.rfind(prefix, 0) == 0) {
    size_t pos = prefix.size();
    int64_t layer = 0;
    size_t digits = 0;
    while (pos < name.size() && name[pos] >= '0' && name[pos] <= '9' && digits < 6) {
      layer = layer * 10 + (name[pos++] - '0');
      ++digits;
    }
    if (digits > 0 && pos < name.size() && name[pos] == '.' && layer < c.n_layers) {
      const std::string rest = name.substr(pos + 1);
      for (const EncoderLayerName& ln : kEncoderLayerNames) {
        std::string s = Suffix(rest, ln.hf);
        if (s.empty()) continue;
        return R(EncoderTensor{"blk." + std::to_string(layer) + "." + ln.gguf + s, layer, 0});
      }
    }
  }
  if (name.starts_with("cls.") || name.starts_with("lm_head.")) return R();  // MLM head
  return Unimplemented("tensor '" + full + "' is not supported for " + c.hf_arch);
}

}  // namespace tachyon::model
