// Test helper (header-only): writes a GGUF model as a Hugging Face folder (config.json +
// model.safetensors), inverting the HF -> GGUF mapping of model/hf_convert.h.
#pragma once

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/matmul.h"
#include "model/hf_convert.h"
#include "safetensors/safetensors.h"
#include "tensor/fp16.h"

namespace tachyon::model::testing {

struct HfExportOptions {
  safetensors::Dtype matrix_dtype = safetensors::Dtype::kF32;  // F32, F16 or BF16
  int n_shards = 1;                                           // > 1: writes an index
  nlohmann::json rope_scaling;                                // copied into config.json
};

inline std::string HfTensorName(const std::string& gguf, bool gemma = false) {
  static const std::map<std::string, std::string> kGemma = {
      {"post_attention_norm.weight", "post_attention_layernorm.weight"},
      {"ffn_norm.weight", "pre_feedforward_layernorm.weight"},
      {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
  };
  static const std::map<std::string, std::string> kLayer = {
      {"attn_norm.weight", "input_layernorm.weight"},
      {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_output.weight", "self_attn.o_proj.weight"},
      {"attn_q.bias", "self_attn.q_proj.bias"},
      {"attn_k.bias", "self_attn.k_proj.bias"},
      {"attn_v.bias", "self_attn.v_proj.bias"},
      {"attn_q_norm.weight", "self_attn.q_norm.weight"},
      {"attn_k_norm.weight", "self_attn.k_norm.weight"},
      {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},
      {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"},
  };
  if (gguf == "token_embd.weight") return "model.embed_tokens.weight";
  if (gguf == "output_norm.weight") return "model.norm.weight";
  if (gguf == "output.weight") return "lm_head.weight";
  if (gguf.rfind("blk.", 0) != 0) return "";
  const size_t dot = gguf.find('.', 4);
  auto it = kLayer.find(gguf.substr(dot + 1));
  if (gemma && kGemma.count(gguf.substr(dot + 1))) it = kGemma.find(gguf.substr(dot + 1));
  if (it == kLayer.end()) return "";
  return "model.layers." + gguf.substr(4, dot - 4) + "." + it->second;
}

// Exports `g` (a llama / qwen2 / qwen3 / gemma3 GGUF of any weight type) into `dir`; gemma3
// norms are written as w - 1 (HF's (1 + w) convention).
inline Status ExportHfFolder(const gguf::GgufFile& g, const std::string& dir,
                             const HfExportOptions& opt = {}) {
  const std::string arch = g.Architecture();
  const auto I = [&](const std::string& k) { return g.GetInt(arch + "." + k); };
  nlohmann::json cfg;
  const std::map<std::string, std::string> hf_arch = {
      {"llama", "LlamaForCausalLM"},
      {"qwen2", "Qwen2ForCausalLM"},
      {"qwen3", "Qwen3ForCausalLM"},
      {"gemma3", "Gemma3ForCausalLM"}};
  const bool gemma = arch == "gemma3";
  if (!hf_arch.count(arch)) return Unimplemented("no HF architecture for " + arch);
  cfg["architectures"] = {hf_arch.at(arch)};
  cfg["hidden_size"] = *I("embedding_length");
  cfg["num_hidden_layers"] = *I("block_count");
  cfg["num_attention_heads"] = *I("attention.head_count");
  cfg["num_key_value_heads"] = I("attention.head_count_kv").value_or(*I("attention.head_count"));
  cfg["intermediate_size"] = *I("feed_forward_length");
  cfg["max_position_embeddings"] = *I("context_length");
  cfg["rope_theta"] = *g.GetFloat(arch + ".rope.freq_base");
  cfg["rms_norm_eps"] = *g.GetFloat(arch + ".attention.layer_norm_rms_epsilon");
  cfg["tie_word_embeddings"] = g.FindTensor("output.weight") == nullptr;
  const int64_t head_dim =
      I("attention.key_length").value_or(*I("embedding_length") / *I("attention.head_count"));
  cfg["head_dim"] = head_dim;
  if (!opt.rope_scaling.is_null()) cfg["rope_scaling"] = opt.rope_scaling;
  if (gemma) {
    const int64_t window = I("attention.sliding_window").value_or(0);
    const int64_t period = I("attention.sliding_window_pattern").value_or(6);
    cfg["sliding_window"] = window;
    cfg["layer_types"] = nlohmann::json::array();
    for (int64_t il = 0; il < *I("block_count"); ++il) {
      cfg["layer_types"].push_back(il % period < period - 1 ? "sliding_attention"
                                                            : "full_attention");
    }
    cfg["rope_local_base_freq"] = g.GetFloat(arch + ".rope.freq_base_swa").value_or(10000.0);
    cfg["query_pre_attn_scalar"] = head_dim;
    cfg["hidden_activation"] = "gelu_pytorch_tanh";
    if (auto cap = g.GetFloat(arch + ".final_logit_softcapping")) {
      cfg["final_logit_softcapping"] = *cap;
    }
  }
  const int64_t n_heads = *I("attention.head_count");
  const int64_t n_kv = cfg["num_key_value_heads"].get<int64_t>();

  std::vector<safetensors::Writer> writers(opt.n_shards);
  nlohmann::json weight_map = nlohmann::json::object();
  int i = 0;
  for (const gguf::TensorInfo& t : g.tensors()) {
    const std::string name = HfTensorName(t.name, gemma);
    if (name.empty()) continue;  // rope_freqs: config.json carries rope_scaling instead
    const int64_t cols = t.dims[0];
    const int64_t rows = t.dims.size() > 1 ? t.dims[1] : 1;
    std::vector<float> f(static_cast<size_t>(cols * rows));
    const size_t row_bytes = RowBytes(t.type, cols);
    for (int64_t r = 0; r < rows; ++r) {
      kernels::DequantizeRow(t.type, g.TensorData(t) + r * row_bytes, f.data() + r * cols, cols);
    }
    if (gemma && t.name.ends_with("norm.weight")) {
      for (float& v : f) v -= 1.0f;
    }
    if (arch == "llama" && (t.name.find("attn_q.") != std::string::npos ||
                            t.name.find("attn_k.") != std::string::npos)) {
      const int64_t heads = t.name.find("attn_q.") != std::string::npos ? n_heads : n_kv;
      std::vector<float> p(f.size());
      const bool bias = t.dims.size() == 1;
      PermuteQkRows(reinterpret_cast<const uint8_t*>(f.data()), reinterpret_cast<uint8_t*>(p.data()),
                    heads, head_dim, bias ? 4 : cols * 4, /*inverse=*/true);
      f = p;
    }
    std::vector<int64_t> shape = t.dims.size() > 1 ? std::vector<int64_t>{rows, cols}
                                                   : std::vector<int64_t>{cols};
    safetensors::Writer& w = writers[i++ % opt.n_shards];
    Status st;
    if (t.dims.size() == 1 || opt.matrix_dtype == safetensors::Dtype::kF32) {
      st = w.Add(name, safetensors::Dtype::kF32, shape, f.data(), f.size() * 4);
    } else {
      std::vector<uint16_t> h(f.size());
      for (size_t k = 0; k < f.size(); ++k) {
        h[k] = opt.matrix_dtype == safetensors::Dtype::kF16 ? F32ToFp16(f[k]) : F32ToBf16(f[k]);
      }
      st = w.Add(name, opt.matrix_dtype, shape, h.data(), h.size() * 2);
    }
    if (!st.ok()) return st;
    weight_map[name] = "model-" + std::to_string((i - 1) % opt.n_shards) + ".safetensors";
  }
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json") << cfg.dump(1);
  if (opt.n_shards == 1) return writers[0].WriteFile(dir + "/model.safetensors");
  for (int s = 0; s < opt.n_shards; ++s) {
    RETURN_IF_ERROR(writers[s].WriteFile(dir + "/model-" + std::to_string(s) + ".safetensors"));
  }
  std::ofstream(dir + "/model.safetensors.index.json")
      << nlohmann::json{{"metadata", nlohmann::json::object()}, {"weight_map", weight_map}}.dump();
  return OkStatus();
}

}  // namespace tachyon::model::testing
