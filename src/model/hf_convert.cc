#include "model/hf_convert.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "model/hf_encoder.h"
#include "model/hf_tokenizer.h"

namespace tachyon::model {

namespace {

namespace fs = std::filesystem;
using safetensors::Dtype;

struct LayerName {
  const char* hf;    // after "model.layers.N."
  const char* gguf;  // after "blk.N."
};
constexpr LayerName kLayerNames[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};

// Gemma 3 names its four norms apart; its RMSNorm weights are stored as w with (1 + w)
// applied, which the GGUF side holds as 1 + w (as llama.cpp's converter writes it).
constexpr LayerName kGemmaLayerNames[] = {
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
};

struct Mapped {
  std::string gguf;
  int64_t order = 0;  // token_embd first, layers in order, output last
  int64_t permute_heads = 0;  // > 0: permute Q/K rows with this many heads
  int64_t skip_rows = 0;      // leading rows dropped (RoBERTa position table)
  float add = 0;              // added to every element (Gemma's norms: +1)
};

// The GGUF name of an HF tensor; nullopt for tensors that carry nothing the model needs
// (rotary inv_freq buffers, a tied lm_head). An error for unknown names.
Result<std::optional<Mapped>> MapName(const std::string& name, const HfConfig& c) {
  if (c.encoder) {
    ASSIGN_OR_RETURN(std::optional<EncoderTensor> t, MapEncoderName(name, c));
    if (!t) return std::optional<Mapped>();
    return std::optional<Mapped>(Mapped{t->gguf, t->order, 0, t->skip_rows});
  }
  if (name == "model.embed_tokens.weight") return std::optional<Mapped>(Mapped{"token_embd.weight", -1});
  if (name == "model.norm.weight") {
    return std::optional<Mapped>(
        Mapped{"output_norm.weight", 1 << 30, 0, 0, c.gguf_arch == "gemma3" ? 1.0f : 0.0f});
  }
  if (name == "lm_head.weight") {
    if (c.tie_embeddings) return std::optional<Mapped>();
    return std::optional<Mapped>(Mapped{"output.weight", (1 << 30) + 1});
  }
  const std::string prefix = "model.layers.";
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
      if (rest.ends_with("rotary_emb.inv_freq")) return std::optional<Mapped>();
      const bool gemma = c.gguf_arch == "gemma3";
      for (const LayerName& ln : kGemmaLayerNames) {
        if (gemma && rest == ln.hf) {
          return std::optional<Mapped>(
              Mapped{"blk." + std::to_string(layer) + "." + ln.gguf, layer, 0, 0, 1.0f});
        }
      }
      for (const LayerName& ln : kLayerNames) {
        if (rest != ln.hf) continue;
        Mapped m{"blk." + std::to_string(layer) + "." + ln.gguf, layer, 0};
        if (c.permute_qk && rest.starts_with("self_attn.q_proj")) m.permute_heads = c.n_heads;
        if (c.permute_qk && rest.starts_with("self_attn.k_proj")) m.permute_heads = c.n_kv_heads;
        if (gemma && rest.ends_with("norm.weight")) m.add = 1.0f;
        return std::optional<Mapped>(m);
      }
    }
  }
  return Unimplemented("tensor '" + name + "' is not supported for " + c.hf_arch);
}

GgmlType KeptType(Dtype d) {
  switch (d) {
    case Dtype::kF16: return GgmlType::kF16;
    case Dtype::kBF16: return GgmlType::kBF16;
    default: return GgmlType::kF32;
  }
}

}  // namespace

bool IsHfModelFolder(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_regular_file(fs::path(path) / "config.json", ec);
}

void PermuteQkRows(const uint8_t* src, uint8_t* dst, int64_t n_heads, int64_t head_dim,
                   size_t row_bytes, bool inverse) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t i = 0; i < half; ++i) {
      for (int64_t j = 0; j < 2; ++j) {
        const int64_t gguf_row = h * head_dim + 2 * i + j;
        const int64_t hf_row = h * head_dim + j * half + i;
        const int64_t from = inverse ? gguf_row : hf_row;
        const int64_t to = inverse ? hf_row : gguf_row;
        std::memcpy(dst + to * row_bytes, src + from * row_bytes, row_bytes);
      }
    }
  }
}

std::vector<uint8_t>& HfGguf::Own(size_t n) {
  owned_.emplace_back(n);
  return owned_.back();
}

Status HfGguf::AddOne(const std::string& gguf_name, const safetensors::SafetensorsModel::Entry& e,
                      int64_t permute_heads, int64_t skip_rows, float add) {
  const safetensors::TensorInfo& t = *e.info;
  const std::string where = e.file->path() + ": tensor '" + t.name + "'";
  if (t.shape.empty() || t.shape.size() > 2 || t.NumElements() == 0) {
    return InvalidArgument(where + ": expected a non-empty 1-D or 2-D tensor");
  }
  const int64_t cols = t.shape.back();
  const int64_t all_rows = t.shape.size() == 2 ? t.shape[0] : 1;
  if (skip_rows < 0 || skip_rows >= all_rows || (skip_rows > 0 && t.shape.size() != 2)) {
    return InvalidArgument(where + ": cannot drop its first " + std::to_string(skip_rows) +
                           " rows");
  }
  const int64_t rows = all_rows - skip_rows;
  if (gguf_name == "token_embd.weight") n_vocab_ = rows;
  std::vector<int64_t> dims = t.shape.size() == 2 ? std::vector<int64_t>{cols, rows}
                                                  : std::vector<int64_t>{cols};
  // Vectors are stored as F32, matrices keep F32/F16/BF16.
  const GgmlType type = t.shape.size() == 1 ? GgmlType::kF32 : KeptType(t.dtype);
  if (t.shape.size() == 2 && gguf_name == "token_embd.weight") file_type_ = type;
  const uint8_t* data = e.data();
  const bool same_bytes = (type == GgmlType::kF32 && t.dtype == Dtype::kF32) ||
                          (type == GgmlType::kF16 && t.dtype == Dtype::kF16) ||
                          (type == GgmlType::kBF16 && t.dtype == Dtype::kBF16);
  if (!same_bytes || add != 0) {
    std::vector<uint8_t>& buf = Own(static_cast<size_t>(t.NumElements()) * sizeof(float));
    Status st = safetensors::ToF32(t.dtype, data, reinterpret_cast<float*>(buf.data()),
                                   t.NumElements());
    if (!st.ok()) return st.WithContext(where);
    if (add != 0) {
      float* v = reinterpret_cast<float*>(buf.data());
      for (int64_t k = 0; k < t.NumElements(); ++k) v[k] += add;
    }
    data = buf.data();
  }
  const size_t row_bytes = RowBytes(type, cols);
  const size_t nbytes = row_bytes * static_cast<size_t>(rows);
  data += row_bytes * static_cast<size_t>(skip_rows);
  if (permute_heads > 0) {
    // A bias is one row of q_dim elements: permute its elements instead.
    const bool is_bias = t.shape.size() == 1;
    const int64_t n_rows = is_bias ? cols : rows;
    if (n_rows != permute_heads * config_.head_dim) {
      return InvalidArgument(where + ": has " + std::to_string(n_rows) + " rows, expected " +
                             std::to_string(permute_heads) + " heads x head_dim " +
                             std::to_string(config_.head_dim));
    }
    std::vector<uint8_t>& buf = Own(nbytes);
    PermuteQkRows(data, buf.data(), permute_heads, config_.head_dim,
                  is_bias ? sizeof(float) : row_bytes, /*inverse=*/false);
    data = buf.data();
  }
  Status st = writer_.AddTensorRef(gguf_name, type, std::move(dims), data, nbytes);
  return st.ok() ? st : st.WithContext(where);
}

Status HfGguf::AddTensors(const std::string& dir) {
  ASSIGN_OR_RETURN(safetensors::SafetensorsModel st, safetensors::SafetensorsModel::Open(dir));
  st_ = std::make_unique<safetensors::SafetensorsModel>(std::move(st));
  std::vector<std::pair<Mapped, safetensors::SafetensorsModel::Entry>> tensors;
  for (const std::string& name : st_->TensorNames()) {
    auto mapped = MapName(name, config_);
    if (!mapped.ok()) return mapped.status().WithContext(dir);
    if (!mapped->has_value()) continue;
    tensors.emplace_back(**mapped, *st_->Find(name));
  }
  std::stable_sort(tensors.begin(), tensors.end(),
                   [](const auto& a, const auto& b) { return a.first.order < b.first.order; });
  for (const auto& [m, e] : tensors) {
    RETURN_IF_ERROR(AddOne(m.gguf, e, m.permute_heads, m.skip_rows, m.add));
  }
  std::vector<float> freqs = Llama3RopeFreqFactors(config_);
  if (!freqs.empty()) {
    RETURN_IF_ERROR(writer_.AddTensor("rope_freqs.weight", GgmlType::kF32,
                                      {static_cast<int64_t>(freqs.size())}, freqs.data(),
                                      freqs.size() * sizeof(float)));
  }
  return OkStatus();
}

Result<std::unique_ptr<HfGguf>> HfGguf::Convert(const std::string& dir) {
  // The JSON files' readers check the types of what they use; a value they read unchecked
  // (nlohmann throws on a wrong type) is still an error of the folder, never an exception.
  try {
    return ConvertChecked(dir);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(dir +
                           ": a JSON file of the model folder has a value of the wrong "
                           "type: " +
                           e.what());
  }
}

Result<std::unique_ptr<HfGguf>> HfGguf::ConvertChecked(const std::string& dir) {
  std::unique_ptr<HfGguf> h(new HfGguf());
  const fs::path root(dir);
  ASSIGN_OR_RETURN(h->config_, ReadHfConfig((root / "config.json").string()));
  RETURN_IF_ERROR(ReadSentenceTransformersConfig(dir, &h->config_));
  SetGgufHyperparameters(h->config_, &h->writer_);
  std::string name = root.filename().string();
  if (name.empty()) name = root.parent_path().filename().string();
  h->writer_.Set("general.name", gguf::Value::String(name));
  RETURN_IF_ERROR(h->AddTensors(dir));
  // The embedding's row count is the vocabulary the model really has.
  if (h->n_vocab_ > 0) {
    h->writer_.Set(h->config_.gguf_arch + ".vocab_size",
                   gguf::Value::Uint32(static_cast<uint32_t>(h->n_vocab_)));
  }
  uint32_t file_type = 0;  // llama.cpp LLAMA_FTYPE_ALL_F32 / MOSTLY_F16 / MOSTLY_BF16
  if (h->file_type_ == GgmlType::kF16) file_type = 1;
  if (h->file_type_ == GgmlType::kBF16) file_type = 32;
  h->writer_.Set("general.file_type", gguf::Value::Uint32(file_type));
  RETURN_IF_ERROR(AddHfTokenizerMetadata(dir, &h->writer_));
  return h;
}

Status ConvertHfFolderToGguf(const std::string& dir, const std::string& out_path) {
  ASSIGN_OR_RETURN(std::unique_ptr<HfGguf> h, HfGguf::Convert(dir));
  return h->writer().WriteFile(out_path);
}

}  // namespace tachyon::model
