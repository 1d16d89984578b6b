#include "model/synth.h"

#include <cmath>
#include <cstdio>
#include <deque>

#include "gguf/gguf.h"
#include "kernels/matmul.h"
#include "util/splitmix.h"

namespace tachyon::model {

namespace {

const SynthShape kShapes[] = {
    {"llama-1b", 2048, 16, 32, 8, 8192, 128256, 131072, 500000.0f},
    {"llama-8b", 4096, 32, 32, 8, 14336, 128256, 131072, 500000.0f},
    {"qwen-0.5b", 896, 24, 14, 2, 4864, 151936, 32768, 1000000.0f},
    {"tiny", 256, 2, 4, 2, 512, 512, 2048, 10000.0f},
};

// Fills `row` with uniform values of mean `mean` and standard deviation `std`, determined by
// (seed, tensor, row) only, so the output does not depend on the thread count.
void RandomRow(uint64_t seed, uint64_t tensor, uint64_t row, float mean, float std, float* out,
               int64_t n) {
  uint64_t s = seed * 0x100000001b3ull ^ (tensor << 40) ^ row;
  const float half_width = std * std::sqrt(3.0f);
  for (int64_t i = 0; i < n; ++i) {
    const float u = static_cast<float>(SplitMix64Next(s) >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    out[i] = mean + (2.0f * u - 1.0f) * half_width;
  }
}

bool IsKQuant(GgmlType t) {
  return t == GgmlType::kQ2_K || t == GgmlType::kQ3_K || t == GgmlType::kQ4_K ||
         t == GgmlType::kQ5_K || t == GgmlType::kQ6_K;
}

GgmlType KQuantFallback(GgmlType t) {
  switch (t) {
    case GgmlType::kQ4_K:
      return GgmlType::kQ5_0;
    case GgmlType::kQ5_K:
      return GgmlType::kQ5_1;
    case GgmlType::kQ6_K:
      return GgmlType::kQ8_0;
    default:
      return GgmlType::kQ4_0;
  }
}

bool UseMoreBits(int64_t layer, int64_t n_layers) {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

std::string PieceName(int64_t i) {
  std::string s = "\xE2\x96\x81";  // U+2581, SentencePiece's space marker
  do {
    s += static_cast<char>('a' + i % 26);
    i /= 26;
  } while (i > 0);
  return s;
}

void AddVocab(gguf::GgufWriter& w, int64_t n_vocab) {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  tokens.reserve(n_vocab);
  for (int64_t i = 0; i < n_vocab; ++i) {
    if (i == 0) {
      tokens.push_back("<unk>");
      types.push_back(2);
    } else if (i == 1 || i == 2) {
      tokens.push_back(i == 1 ? "<s>" : "</s>");
      types.push_back(3);
    } else if (i < 3 + 256) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "<0x%02X>", static_cast<unsigned>(i - 3));
      tokens.push_back(buf);
      types.push_back(6);
    } else {
      tokens.push_back(PieceName(i - 259));
      types.push_back(1);
    }
    scores.push_back(-static_cast<float>(i));
  }
  w.Set("tokenizer.ggml.model", gguf::Value::String("llama"));
  w.Set("tokenizer.ggml.tokens", gguf::Value::StringArray(tokens));
  w.Set("tokenizer.ggml.scores", gguf::Value::Float32Array(scores));
  w.Set("tokenizer.ggml.token_type", gguf::Value::Int32Array(types));
  w.Set("tokenizer.ggml.bos_token_id", gguf::Value::Uint32(1));
  w.Set("tokenizer.ggml.eos_token_id", gguf::Value::Uint32(2));
  w.Set("tokenizer.ggml.unknown_token_id", gguf::Value::Uint32(0));
}

class Builder {
 public:
  Builder(gguf::GgufWriter& w, const SynthOptions& o, const SynthShape& s, ThreadPool* pool)
      : w_(w), o_(o), s_(s), pool_(pool) {}

  Status Vector(const std::string& name, int64_t n, float mean, float std) {
    std::vector<float>& buf = floats_.emplace_back(n);
    RandomRow(o_.seed, ++n_tensors_, 0, mean, std, buf.data(), n);
    return w_.AddTensorRef(name, GgmlType::kF32, {n}, buf.data(), n * sizeof(float));
  }

  Status Matrix(const std::string& name, int64_t cols, int64_t rows, int64_t layer) {
    ASSIGN_OR_RETURN(GgmlType type, SynthTensorType(o_.type, name, cols, layer, s_.n_layers));
    const size_t row_bytes = RowBytes(type, cols);
    std::vector<uint8_t>& buf = bytes_.emplace_back(row_bytes * rows);
    const uint64_t tensor = ++n_tensors_;
    auto fill = [&](int64_t begin, int64_t end) {
      std::vector<float> row(cols);
      for (int64_t r = begin; r < end; ++r) {
        RandomRow(o_.seed, tensor, r, 0.0f, 0.02f, row.data(), cols);
        kernels::QuantizeRow(type, row.data(), buf.data() + r * row_bytes, cols);
      }
    };
    if (pool_ != nullptr) {
      pool_->ParallelFor(rows, fill, 16);
    } else {
      fill(0, rows);
    }
    return w_.AddTensorRef(name, type, {cols, rows}, buf.data(), buf.size());
  }

 private:
  gguf::GgufWriter& w_;
  const SynthOptions& o_;
  const SynthShape& s_;
  ThreadPool* pool_;
  uint64_t n_tensors_ = 0;
  std::deque<std::vector<float>> floats_;
  std::deque<std::vector<uint8_t>> bytes_;
};

}  // namespace

Result<SynthShape> FindSynthShape(const std::string& name) {
  for (const SynthShape& s : kShapes) {
    if (s.name == name) return s;
  }
  return InvalidArgument("unknown shape '" + name + "' (known: " + SynthShapeNames() + ")");
}

std::string SynthShapeNames() {
  std::string s;
  for (const SynthShape& sh : kShapes) s += (s.empty() ? "" : ", ") + sh.name;
  return s;
}

Result<GgmlType> SynthTensorType(const std::string& type, const std::string& name, int64_t cols,
                                 int64_t layer, int64_t n_layers) {
  const bool is_output = name == "output.weight" || name == "token_embd.weight";
  GgmlType t;
  if (type == "Q4_K_M" || type == "q4_k_m") {
    t = GgmlType::kQ4_K;
    const bool more_bits =
        name.find("attn_v.") != std::string::npos || name.find("ffn_down.") != std::string::npos;
    if (is_output || (more_bits && layer >= 0 && UseMoreBits(layer, n_layers))) {
      t = GgmlType::kQ6_K;
    }
  } else {
    std::optional<GgmlType> parsed = ParseTypeName(type);
    if (!parsed || !kernels::IsSupportedWeightType(*parsed) || *parsed == GgmlType::kQ8_K) {
      return InvalidArgument("unsupported weight type '" + type + "'");
    }
    t = *parsed;
    const bool keep =
        t == GgmlType::kF32 || t == GgmlType::kF16 || t == GgmlType::kBF16 || t == GgmlType::kQ8_0;
    if (is_output && !keep) t = GgmlType::kQ6_K;
  }
  if (IsKQuant(t) && cols % 256 != 0) t = KQuantFallback(t);
  return t;
}

Status WriteSynthModel(const SynthOptions& o, const std::string& path, ThreadPool* pool) {
  ASSIGN_OR_RETURN(SynthShape s, FindSynthShape(o.shape));
  if (o.arch != "llama" && o.arch != "qwen2" && o.arch != "qwen3" && o.arch != "gemma3") {
    return InvalidArgument("unsupported arch '" + o.arch +
                           "' (synth writes llama, qwen2, qwen3, gemma3)");
  }
  RETURN_IF_ERROR(SynthTensorType(o.type, "blk.0.attn_q.weight", s.n_embd, 0, 1).status());
  const int64_t hd = s.n_embd / s.n_heads, q_dim = s.n_heads * hd, kv_dim = s.n_kv_heads * hd;
  gguf::GgufWriter w;
  const std::string a = o.arch;
  w.Set("general.architecture", gguf::Value::String(a));
  w.Set("general.name", gguf::Value::String("synth-" + s.name + "-" + a + "-" + o.type));
  w.Set(a + ".context_length", gguf::Value::Uint32(static_cast<uint32_t>(s.n_ctx)));
  w.Set(a + ".embedding_length", gguf::Value::Uint32(static_cast<uint32_t>(s.n_embd)));
  w.Set(a + ".block_count", gguf::Value::Uint32(static_cast<uint32_t>(s.n_layers)));
  w.Set(a + ".feed_forward_length", gguf::Value::Uint32(static_cast<uint32_t>(s.n_ff)));
  w.Set(a + ".attention.head_count", gguf::Value::Uint32(static_cast<uint32_t>(s.n_heads)));
  w.Set(a + ".attention.head_count_kv", gguf::Value::Uint32(static_cast<uint32_t>(s.n_kv_heads)));
  // gemma3: a global base unlike the sliding layers' default 10000, as in the real models.
  w.Set(a + ".rope.freq_base", gguf::Value::Float32(a == "gemma3" ? 1e6f : s.rope_theta));
  w.Set(a + ".rope.dimension_count", gguf::Value::Uint32(static_cast<uint32_t>(hd)));
  w.Set(a + ".attention.layer_norm_rms_epsilon", gguf::Value::Float32(1e-5f));
  const bool gemma = a == "gemma3";
  if (gemma) {  // a short window and every 2nd layer global, so both kinds run in tests
    w.Set(a + ".attention.sliding_window", gguf::Value::Uint32(kSynthGemmaWindow));
    w.Set(a + ".attention.sliding_window_pattern", gguf::Value::Uint32(2));
    w.Set(a + ".final_logit_softcapping", gguf::Value::Float32(kSynthGemmaSoftcap));
  }
  AddVocab(w, s.n_vocab);

  Builder b(w, o, s, pool);
  RETURN_IF_ERROR(b.Matrix("token_embd.weight", s.n_embd, s.n_vocab, -1));
  for (int64_t il = 0; il < s.n_layers; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    RETURN_IF_ERROR(b.Vector(p + "attn_norm.weight", s.n_embd, 1.0f, 0.1f));
    RETURN_IF_ERROR(b.Matrix(p + "attn_q.weight", s.n_embd, q_dim, il));
    RETURN_IF_ERROR(b.Matrix(p + "attn_k.weight", s.n_embd, kv_dim, il));
    RETURN_IF_ERROR(b.Matrix(p + "attn_v.weight", s.n_embd, kv_dim, il));
    if (a == "qwen2") {
      RETURN_IF_ERROR(b.Vector(p + "attn_q.bias", q_dim, 0.0f, 0.02f));
      RETURN_IF_ERROR(b.Vector(p + "attn_k.bias", kv_dim, 0.0f, 0.02f));
      RETURN_IF_ERROR(b.Vector(p + "attn_v.bias", kv_dim, 0.0f, 0.02f));
    }
    if (a == "qwen3" || gemma) {
      RETURN_IF_ERROR(b.Vector(p + "attn_q_norm.weight", hd, 1.0f, 0.1f));
      RETURN_IF_ERROR(b.Vector(p + "attn_k_norm.weight", hd, 1.0f, 0.1f));
    }
    RETURN_IF_ERROR(b.Matrix(p + "attn_output.weight", q_dim, s.n_embd, il));
    if (gemma) RETURN_IF_ERROR(b.Vector(p + "post_attention_norm.weight", s.n_embd, 1.0f, 0.1f));
    RETURN_IF_ERROR(b.Vector(p + "ffn_norm.weight", s.n_embd, 1.0f, 0.1f));
    RETURN_IF_ERROR(b.Matrix(p + "ffn_gate.weight", s.n_embd, s.n_ff, il));
    RETURN_IF_ERROR(b.Matrix(p + "ffn_up.weight", s.n_embd, s.n_ff, il));
    RETURN_IF_ERROR(b.Matrix(p + "ffn_down.weight", s.n_ff, s.n_embd, il));
    if (gemma) RETURN_IF_ERROR(b.Vector(p + "post_ffw_norm.weight", s.n_embd, 1.0f, 0.1f));
  }
  RETURN_IF_ERROR(b.Vector("output_norm.weight", s.n_embd, 1.0f, 0.1f));
  return w.WriteFile(path);
}

}  // namespace tachyon::model
