#include "model/hf_config.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <numbers>

#include "model/hf_encoder.h"
#include "util/json_text.h"
#include "util/mmap_file.h"

namespace tachyon::model {

namespace {

using nlohmann::json;

constexpr int64_t kMaxHfDim = int64_t{1} << 20;

struct ArchMapping {
  const char* hf;
  const char* gguf;
  bool permute_qk;
};
constexpr ArchMapping kHfArchs[] = {
    {"LlamaForCausalLM", "llama", true},
    {"MistralForCausalLM", "llama", true},
    {"Qwen2ForCausalLM", "qwen2", false},
    {"Qwen3ForCausalLM", "qwen3", false},
    {"Gemma3ForCausalLM", "gemma3", false},
    {"BertModel", "bert", false},
    {"BertForSequenceClassification", "bert", false},
    {"RobertaModel", "bert", false},
    {"RobertaForSequenceClassification", "bert", false},
    {"XLMRobertaModel", "bert", false},
    {"XLMRobertaForSequenceClassification", "bert", false},
};

class Fields {
 public:
  Fields(const json& j, const std::string& path) : j_(j), path_(path) {}
  bool Has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }
  Result<int64_t> Int(const char* key, int64_t def, bool required, int64_t max) const {
    if (!Has(key)) {
      if (required) return InvalidArgument(path_ + ": missing field " + key);
      return def;
    }
    const json& v = j_[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > max) {
      return InvalidArgument(path_ + ": field " + key + " must be an integer in [0, " +
                             std::to_string(max) + "]");
    }
    return v.get<int64_t>();
  }
  Result<double> Float(const char* key, double def) const {
    if (!Has(key)) return def;
    const json& v = j_[key];
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0) {
      return InvalidArgument(path_ + ": field " + key + " must be a positive number");
    }
    return v.get<double>();
  }

 private:
  const json& j_;
  const std::string& path_;
};

Status ParseRopeScaling(const json& rs, const std::string& path, HfConfig* c) {
  if (rs.is_null()) return OkStatus();
  if (!rs.is_object()) return InvalidArgument(path + ": rope_scaling must be an object");
  std::string type;
  for (const char* key : {"rope_type", "type"}) {
    if (rs.contains(key) && rs[key].is_string()) type = rs[key].get<std::string>();
  }
  if (type == "default" || type.empty()) return OkStatus();
  if (type != "linear" && type != "llama3") {
    return Unimplemented(path + ": rope_scaling type '" + type +
                         "' is not supported (supported: linear, llama3)");
  }
  Fields f(rs, path);
  c->rope_scaling_type = type;
  ASSIGN_OR_RETURN(c->rope_factor, f.Float("factor", 1.0));
  if (type == "llama3") {
    ASSIGN_OR_RETURN(c->rope_low_freq_factor, f.Float("low_freq_factor", 1.0));
    ASSIGN_OR_RETURN(c->rope_high_freq_factor, f.Float("high_freq_factor", 4.0));
    ASSIGN_OR_RETURN(c->rope_original_ctx,
                     f.Int("original_max_position_embeddings", 8192, false, int64_t{1} << 30));
  }
  return OkStatus();
}

// Gemma 3: the sliding-window layout (layer_types, else sliding_window_pattern), both RoPE
// bases, query_pre_attn_scalar and the final soft-cap.
Status ParseGemma3Fields(const json& j, const std::string& path, HfConfig* c) {
  Fields f(j, path);
  ASSIGN_OR_RETURN(c->sliding_window, f.Int("sliding_window", 0, false, int64_t{1} << 26));
  ASSIGN_OR_RETURN(c->swa_pattern, f.Int("sliding_window_pattern", 6, false, 1024));
  if (j.contains("layer_types") && j["layer_types"].is_array()) {
    const json& types = j["layer_types"];
    int64_t period = 0;
    for (size_t i = 0; i < types.size() && period == 0; ++i) {
      if (types[i] == "full_attention") period = static_cast<int64_t>(i) + 1;
    }
    bool periodic = static_cast<int64_t>(types.size()) == c->n_layers;
    if (period == 0) period = c->n_layers + 1;  // no global layer
    for (int64_t il = 0; periodic && il < c->n_layers; ++il) {
      const bool sliding = il % period < period - 1;
      periodic = types[il] == (sliding ? "sliding_attention" : "full_attention");
    }
    if (!periodic) {
      return Unimplemented(path +
                           ": layer_types must list num_hidden_layers entries, every "
                           "k-th full_attention and the rest sliding_attention");
    }
    c->swa_pattern = period;
  }
  if (c->swa_pattern < 1) return InvalidArgument(path + ": sliding_window_pattern must be >= 1");
  ASSIGN_OR_RETURN(c->rope_local_theta, f.Float("rope_local_base_freq", 10000.0));
  ASSIGN_OR_RETURN(c->query_pre_attn_scalar,
                   f.Float("query_pre_attn_scalar", static_cast<double>(c->head_dim)));
  ASSIGN_OR_RETURN(c->final_logit_softcap, f.Float("final_logit_softcapping", 0.0));
  if (f.Has("attn_logit_softcapping")) {
    return Unimplemented(path + ": attn_logit_softcapping is not supported");
  }
  if (j.contains("hidden_activation") && j["hidden_activation"] != "gelu_pytorch_tanh") {
    return Unimplemented(path + ": hidden_activation must be gelu_pytorch_tanh");
  }
  if (!j.contains("tie_word_embeddings")) c->tie_embeddings = true;  // Gemma's default
  return OkStatus();
}

Result<HfConfig> ParseJson(const json& j, const std::string& path) {
  if (!j.is_object()) return InvalidArgument(path + ": not a JSON object");
  HfConfig c;
  if (!j.contains("architectures") || !j["architectures"].is_array() ||
      j["architectures"].empty() || !j["architectures"][0].is_string()) {
    return InvalidArgument(path + ": missing field architectures");
  }
  c.hf_arch = j["architectures"][0].get<std::string>();
  std::string supported;
  for (const ArchMapping& a : kHfArchs) {
    if (c.hf_arch == a.hf) {
      c.gguf_arch = a.gguf;
      c.permute_qk = a.permute_qk;
    }
    supported += (supported.empty() ? "" : ", ") + std::string(a.hf);
  }
  if (c.gguf_arch.empty()) {
    return Unimplemented(path + ": architecture '" + c.hf_arch +
                         "' is not supported (supported: " + supported + ")");
  }
  Fields f(j, path);
  ASSIGN_OR_RETURN(c.n_embd, f.Int("hidden_size", 0, true, kMaxHfDim));
  ASSIGN_OR_RETURN(c.n_layers, f.Int("num_hidden_layers", 0, true, 1024));
  ASSIGN_OR_RETURN(c.n_heads, f.Int("num_attention_heads", 0, true, 4096));
  ASSIGN_OR_RETURN(c.n_kv_heads, f.Int("num_key_value_heads", c.n_heads, false, 4096));
  ASSIGN_OR_RETURN(c.n_ff, f.Int("intermediate_size", 0, true, kMaxHfDim));
  if (c.n_embd == 0 || c.n_layers == 0 || c.n_heads == 0 || c.n_kv_heads == 0 || c.n_ff == 0) {
    return InvalidArgument(path +
                           ": hidden_size, num_hidden_layers, num_attention_heads, "
                           "num_key_value_heads and intermediate_size must be positive");
  }
  if (c.n_heads % c.n_kv_heads != 0) {
    return InvalidArgument(path +
                           ": num_attention_heads must be a multiple of "
                           "num_key_value_heads");
  }
  ASSIGN_OR_RETURN(c.head_dim, f.Int("head_dim", c.n_embd / c.n_heads, false, kMaxHfDim));
  if (c.head_dim == 0 || c.head_dim % 2 != 0) {
    return InvalidArgument(path + ": head_dim must be positive and even");
  }
  ASSIGN_OR_RETURN(c.n_vocab, f.Int("vocab_size", 0, false, int64_t{1} << 24));
  ASSIGN_OR_RETURN(c.n_ctx_train,
                   f.Int("max_position_embeddings", 0, false, (int64_t{1} << 32) - 1));
  ASSIGN_OR_RETURN(c.rope_theta, f.Float("rope_theta", 10000.0));
  ASSIGN_OR_RETURN(c.rms_eps, f.Float("rms_norm_eps", 1e-6));
  if (j.contains("tie_word_embeddings")) {
    if (!j["tie_word_embeddings"].is_boolean()) {
      return InvalidArgument(path + ": field tie_word_embeddings must be a boolean");
    }
    c.tie_embeddings = j["tie_word_embeddings"].get<bool>();
  }
  if (c.gguf_arch == "gemma3") {
    RETURN_IF_ERROR(ParseGemma3Fields(j, path, &c));
  } else if (c.permute_qk) {  // Mistral-style: sliding_window applies when set.
    ASSIGN_OR_RETURN(c.sliding_window, f.Int("sliding_window", 0, false, int64_t{1} << 26));
  } else if (j.contains("use_sliding_window") && j["use_sliding_window"].is_boolean() &&
             j["use_sliding_window"].get<bool>()) {
    return Unimplemented(path +
                         ": use_sliding_window (per-layer sliding window) is not "
                         "supported");
  }
  if (j.contains("rope_scaling")) RETURN_IF_ERROR(ParseRopeScaling(j["rope_scaling"], path, &c));
  if (IsHfEncoderArch(c.hf_arch)) RETURN_IF_ERROR(ParseHfEncoderFields(j, path, &c));
  return c;
}

}  // namespace

Result<HfConfig> ParseHfConfig(const std::string& json_text, const std::string& path) {
  ASSIGN_OR_RETURN(json j, ParseJsonDocument(json_text, path));
  return ParseJson(j, path);
}

Result<HfConfig> ReadHfConfig(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return ParseHfConfig(text, path);
}

void SetGgufHyperparameters(const HfConfig& c, gguf::GgufWriter* w) {
  using gguf::Value;
  const std::string a = c.gguf_arch + ".";
  w->Set("general.architecture", Value::String(c.gguf_arch));
  if (c.n_ctx_train > 0) w->Set(a + "context_length", Value::Uint32(uint32_t(c.n_ctx_train)));
  w->Set(a + "embedding_length", Value::Uint32(uint32_t(c.n_embd)));
  w->Set(a + "block_count", Value::Uint32(uint32_t(c.n_layers)));
  w->Set(a + "feed_forward_length", Value::Uint32(uint32_t(c.n_ff)));
  w->Set(a + "attention.head_count", Value::Uint32(uint32_t(c.n_heads)));
  w->Set(a + "attention.head_count_kv", Value::Uint32(uint32_t(c.n_kv_heads)));
  if (c.head_dim != c.n_embd / c.n_heads) {
    w->Set(a + "attention.key_length", Value::Uint32(uint32_t(c.head_dim)));
    w->Set(a + "attention.value_length", Value::Uint32(uint32_t(c.head_dim)));
  }
  w->Set(a + "rope.dimension_count", Value::Uint32(uint32_t(c.head_dim)));
  w->Set(a + "rope.freq_base", Value::Float32(float(c.rope_theta)));
  w->Set(a + "attention.layer_norm_rms_epsilon", Value::Float32(float(c.rms_eps)));
  if (c.n_vocab > 0) w->Set(a + "vocab_size", Value::Uint32(uint32_t(c.n_vocab)));
  if (c.sliding_window > 0) {
    w->Set(a + "attention.sliding_window", Value::Uint32(uint32_t(c.sliding_window)));
  }
  if (c.gguf_arch == "gemma3") {
    w->Set(a + "attention.sliding_window_pattern", Value::Uint32(uint32_t(c.swa_pattern)));
    w->Set(a + "rope.freq_base_swa", Value::Float32(float(c.rope_local_theta)));
    w->Set(a + "attention.scale", Value::Float32(float(1.0 / std::sqrt(c.query_pre_attn_scalar))));
    if (c.final_logit_softcap > 0) {
      w->Set(a + "final_logit_softcapping", Value::Float32(float(c.final_logit_softcap)));
    }
  }
  if (c.rope_scaling_type == "linear") {
    w->Set(a + "rope.scaling.type", Value::String("linear"));
    w->Set(a + "rope.scaling.factor", Value::Float32(float(c.rope_factor)));
  }
  SetGgufPoolingKeys(c, w);
}

std::vector<float> Llama3RopeFreqFactors(const HfConfig& c) {
  std::vector<float> factors;
  if (c.rope_scaling_type != "llama3") return factors;
  const double low_wavelen = c.rope_original_ctx / c.rope_low_freq_factor;
  const double high_wavelen = c.rope_original_ctx / c.rope_high_freq_factor;
  for (int64_t i = 0; i < c.head_dim / 2; ++i) {
    const double freq = std::pow(c.rope_theta, -2.0 * double(i) / double(c.head_dim));
    const double wavelen = 2 * std::numbers::pi / freq;
    double divisor = 1.0;
    if (wavelen > low_wavelen) {
      divisor = c.rope_factor;
    } else if (wavelen >= high_wavelen && c.rope_high_freq_factor > c.rope_low_freq_factor) {
      const double smooth = (c.rope_original_ctx / wavelen - c.rope_low_freq_factor) /
                            (c.rope_high_freq_factor - c.rope_low_freq_factor);
      divisor = 1.0 / ((1 - smooth) / c.rope_factor + smooth);
    }
    factors.push_back(float(divisor));
  }
  return factors;
}

}  // namespace tachyon::model
