#include "gguf/summary.h"

#include <cstdio>
#include <map>

namespace tachyon::gguf {
namespace {

constexpr std::string_view kTokenIdPrefix = "tokenizer.ggml.";
constexpr std::string_view kTokenIdSuffix = "_token_id";
constexpr std::string_view kTemplateVariantPrefix = "tokenizer.chat_template.";

bool StartsWith(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}
bool EndsWith(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

}  // namespace

TokenizerSummary SummarizeTokenizer(const GgufFile& f) {
  TokenizerSummary t;
  t.model = f.GetString("tokenizer.ggml.model");
  t.pre = f.GetString("tokenizer.ggml.pre");
  t.vocab_size = f.GetArraySize("tokenizer.ggml.tokens");
  t.merges = f.GetArraySize("tokenizer.ggml.merges");
  t.has_scores = f.GetArraySize("tokenizer.ggml.scores").has_value();
  t.has_token_types = f.GetArraySize("tokenizer.ggml.token_type").has_value();
  t.add_bos = f.GetBool("tokenizer.ggml.add_bos_token");
  t.add_eos = f.GetBool("tokenizer.ggml.add_eos_token");
  const Value* tokens = f.Find("tokenizer.ggml.tokens");
  if (tokens != nullptr &&
      (tokens->type != ValueType::kArray || tokens->elem_type != ValueType::kString)) {
    tokens = nullptr;
  }
  for (const auto& [key, value] : f.metadata()) {
    if (StartsWith(key, kTokenIdPrefix) && EndsWith(key, kTokenIdSuffix) && value.IsInteger()) {
      SpecialToken s;
      s.role = key.substr(kTokenIdPrefix.size(),
                          key.size() - kTokenIdPrefix.size() - kTokenIdSuffix.size());
      s.id = value.AsInt().value_or(-1);
      if (tokens != nullptr && s.id >= 0 && static_cast<uint64_t>(s.id) < tokens->arr.size()) {
        s.text = tokens->arr[static_cast<size_t>(s.id)].s;
      }
      t.special.push_back(std::move(s));
    } else if (key == "tokenizer.chat_template" && value.type == ValueType::kString) {
      t.chat_template_bytes = value.s.size();
    } else if (StartsWith(key, kTemplateVariantPrefix) && value.type == ValueType::kString) {
      t.chat_template_variants.emplace_back(key.substr(kTemplateVariantPrefix.size()),
                                            value.s.size());
    }
  }
  return t;
}

TensorTotals SummarizeTensors(const GgufFile& f) {
  TensorTotals totals;
  std::map<uint32_t, TypeTotal> by_type;
  for (const TensorInfo& t : f.tensors()) {
    const auto n = static_cast<uint64_t>(t.NumElements());
    ++totals.tensors;
    totals.parameters += n;
    totals.bytes += t.nbytes;
    TypeTotal& tt = by_type[static_cast<uint32_t>(t.type)];
    tt.type = t.type;
    ++tt.tensors;
    tt.parameters += n;
    tt.bytes += t.nbytes;
  }
  for (const auto& [id, tt] : by_type) totals.by_type.push_back(tt);
  return totals;
}

std::string ShapeString(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t k = 0; k < dims.size(); ++k) {
    if (k > 0) s += ", ";
    s += std::to_string(dims[k]);
  }
  return s + "]";
}

std::string HumanBytes(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f %s", v, kUnits[u]);
  }
  return buf;
}

}  // namespace tachyon::gguf
