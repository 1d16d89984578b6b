// tachyon inspect FILE.gguf [--json]: a GGUF file's architecture, hyperparameters, tokenizer,
// tensors and totals, as text or as one JSON object.
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/flags.h"
#include "gguf/gguf.h"
#include "gguf/summary.h"

namespace tachyon::cli {
namespace inspect_cmd {

using gguf::GgufFile;
using gguf::Value;
using gguf::ValueType;
// ordered_json keeps metadata in file order.
using json = nlohmann::ordered_json;

constexpr size_t kMaxShownString = 80;  // longer strings are summarized in text output
constexpr size_t kMaxJsonArray = 64;    // longer arrays are summarized in JSON

bool StartsWith(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}

// One-line rendering for text output: long strings and arrays summarized.
std::string Show(const Value& v) {
  if (v.type == ValueType::kString && v.s.size() > kMaxShownString) {
    return "<string, " + std::to_string(v.s.size()) + " bytes>";
  }
  if (v.type == ValueType::kArray && v.arr.size() > 8) {
    return "<array of " + std::to_string(v.arr.size()) + " " +
           std::string(gguf::ValueTypeName(v.elem_type)) + ">";
  }
  return v.ToString(8);
}

json ToJson(const Value& v, bool summarize_arrays) {
  switch (v.type) {
    case ValueType::kBool:
      return v.u != 0;
    case ValueType::kFloat32:
    case ValueType::kFloat64:
      return v.f;
    case ValueType::kString:
      return v.s;
    case ValueType::kArray: {
      if (summarize_arrays && v.arr.size() > kMaxJsonArray) {
        return json{{"array_of", gguf::ValueTypeName(v.elem_type)}, {"length", v.arr.size()}};
      }
      json a = json::array();
      for (const Value& e : v.arr) a.push_back(ToJson(e, summarize_arrays));
      return a;
    }
    default:
      if (gguf::IsSignedType(v.type)) return v.i;
      return v.u;
  }
}

// Keys that the tokenizer summary already shows.
bool IsSummarizedTokenizerKey(std::string_view key) {
  return key == "tokenizer.ggml.model" || key == "tokenizer.ggml.pre" ||
         key == "tokenizer.ggml.add_bos_token" || key == "tokenizer.ggml.add_eos_token" ||
         (StartsWith(key, "tokenizer.ggml.") && key.size() > 9 &&
          key.substr(key.size() - 9) == "_token_id");
}

void PrintKeys(const GgufFile& f, std::string_view prefix, bool strip) {
  for (const auto& [key, value] : f.metadata()) {
    if (!StartsWith(key, prefix)) continue;
    const std::string name = strip ? key.substr(prefix.size()) : key;
    std::printf("  %-40s %s\n", name.c_str(), Show(value).c_str());
  }
}

std::string Quoted(const std::optional<std::string>& s) {
  return s ? Value::String(*s).ToString() : "(none)";
}

void PrintText(const GgufFile& f) {
  const std::string arch = f.Architecture();
  std::printf("file:         %s\n", f.path().c_str());
  std::printf(
      "format:       GGUF v%u, %zu metadata keys, %zu tensors, alignment %zu, "
      "data at offset %zu, file %s\n",
      f.version(), f.metadata().size(), f.tensors().size(), f.alignment(), f.data_offset(),
      gguf::HumanBytes(f.file_size()).c_str());
  std::printf("architecture: %s\n", arch.empty() ? "(none)" : arch.c_str());
  std::printf("\ngeneral:\n");
  PrintKeys(f, "general.", true);
  if (!arch.empty()) {
    std::printf("\nhyperparameters (%s.*):\n", arch.c_str());
    PrintKeys(f, arch + ".", true);
  }
  const gguf::TokenizerSummary t = gguf::SummarizeTokenizer(f);
  std::printf("\ntokenizer:\n");
  std::printf("  %-40s %s\n", "model", t.model ? t.model->c_str() : "(none)");
  std::printf("  %-40s %s\n", "pre", t.pre ? t.pre->c_str() : "(none)");
  std::printf("  %-40s %s\n", "vocab size",
              t.vocab_size ? std::to_string(*t.vocab_size).c_str() : "(none)");
  std::printf("  %-40s %s\n", "merges", t.merges ? std::to_string(*t.merges).c_str() : "(none)");
  for (const auto& s : t.special) {
    std::printf("  %-40s %lld %s\n", (s.role + " token").c_str(), static_cast<long long>(s.id),
                s.text ? Quoted(s.text).c_str() : "(not in vocab)");
  }
  auto show_bool = [](const std::optional<bool>& b) {
    return b ? (*b ? "true" : "false") : "(unset)";
  };
  std::printf("  %-40s %s\n", "add_bos_token", show_bool(t.add_bos));
  std::printf("  %-40s %s\n", "add_eos_token", show_bool(t.add_eos));
  std::printf("  %-40s %s\n", "chat template",
              t.chat_template_bytes
                  ? ("present, " + std::to_string(*t.chat_template_bytes) + " bytes").c_str()
                  : "(none)");
  for (const auto& [name, bytes] : t.chat_template_variants) {
    std::printf("  %-40s present, %zu bytes\n", ("chat template '" + name + "'").c_str(), bytes);
  }
  // The remaining tokenizer keys (token arrays summarized, flags, ...).
  for (const auto& [key, value] : f.metadata()) {
    if (!StartsWith(key, "tokenizer.") || StartsWith(key, "tokenizer.chat_template") ||
        IsSummarizedTokenizerKey(key)) {
      continue;
    }
    std::printf("  %-40s %s\n", key.c_str(), Show(value).c_str());
  }
  bool header = false;
  for (const auto& [key, value] : f.metadata()) {
    if (StartsWith(key, "general.") || (!arch.empty() && StartsWith(key, arch + ".")) ||
        StartsWith(key, "tokenizer.")) {
      continue;
    }
    if (!header) std::printf("\nother metadata:\n");
    header = true;
    std::printf("  %-40s %s\n", key.c_str(), Show(value).c_str());
  }
  std::printf("\ntensors (%zu):\n", f.tensors().size());
  if (!f.tensors().empty()) {
    std::printf("  %-5s %-40s %-8s %-24s %12s\n", "#", "name", "type", "shape", "bytes");
  }
  for (size_t k = 0; k < f.tensors().size(); ++k) {
    const auto& ti = f.tensors()[k];
    std::printf("  %-5zu %-40s %-8s %-24s %12llu\n", k, ti.name.c_str(),
                std::string(TypeName(ti.type)).c_str(), gguf::ShapeString(ti.dims).c_str(),
                static_cast<unsigned long long>(ti.nbytes));
  }
  const gguf::TensorTotals tot = gguf::SummarizeTensors(f);
  std::printf("\ntotals: %zu tensors, %llu parameters, %llu bytes (%s)\n", tot.tensors,
              static_cast<unsigned long long>(tot.parameters),
              static_cast<unsigned long long>(tot.bytes), gguf::HumanBytes(tot.bytes).c_str());
  for (const auto& tt : tot.by_type) {
    std::printf("  %-8s %5zu tensors %14llu parameters %14llu bytes (%s)\n",
                std::string(TypeName(tt.type)).c_str(), tt.tensors,
                static_cast<unsigned long long>(tt.parameters),
                static_cast<unsigned long long>(tt.bytes), gguf::HumanBytes(tt.bytes).c_str());
  }
}

json BuildJson(const GgufFile& f) {
  const std::string arch = f.Architecture();
  json j;
  j["file"] = f.path();
  j["version"] = f.version();
  j["alignment"] = f.alignment();
  j["data_offset"] = f.data_offset();
  j["file_size"] = f.file_size();
  j["architecture"] = arch;
  json hp = json::object();
  json meta = json::object();
  for (const auto& [key, value] : f.metadata()) {
    meta[key] = ToJson(value, /*summarize_arrays=*/true);
    if (!arch.empty() && StartsWith(key, arch + ".")) {
      hp[key.substr(arch.size() + 1)] = ToJson(value, true);
    }
  }
  j["hyperparameters"] = hp;
  const gguf::TokenizerSummary t = gguf::SummarizeTokenizer(f);
  json tok = json::object();
  tok["model"] = t.model ? json(*t.model) : json(nullptr);
  tok["pre"] = t.pre ? json(*t.pre) : json(nullptr);
  tok["vocab_size"] = t.vocab_size ? json(*t.vocab_size) : json(nullptr);
  tok["merges"] = t.merges ? json(*t.merges) : json(nullptr);
  tok["has_scores"] = t.has_scores;
  tok["has_token_types"] = t.has_token_types;
  json special = json::object();
  for (const auto& s : t.special) {
    special[s.role] = json{{"id", s.id}, {"text", s.text ? json(*s.text) : json(nullptr)}};
  }
  tok["special_tokens"] = special;
  tok["add_bos_token"] = t.add_bos ? json(*t.add_bos) : json(nullptr);
  tok["add_eos_token"] = t.add_eos ? json(*t.add_eos) : json(nullptr);
  tok["chat_template"] = json{{"present", t.chat_template_bytes.has_value()},
                              {"bytes", t.chat_template_bytes.value_or(0)}};
  json variants = json::object();
  for (const auto& [name, bytes] : t.chat_template_variants) variants[name] = bytes;
  tok["chat_template_variants"] = variants;
  j["tokenizer"] = tok;
  j["metadata"] = meta;
  json tensors = json::array();
  for (const auto& ti : f.tensors()) {
    tensors.push_back(json{{"name", ti.name},
                           {"type", TypeName(ti.type)},
                           {"shape", ti.dims},
                           {"elements", ti.NumElements()},
                           {"bytes", ti.nbytes},
                           {"offset", ti.offset}});
  }
  j["tensors"] = tensors;
  const gguf::TensorTotals tot = gguf::SummarizeTensors(f);
  json by_type = json::object();
  for (const auto& tt : tot.by_type) {
    by_type[std::string(TypeName(tt.type))] =
        json{{"tensors", tt.tensors}, {"parameters", tt.parameters}, {"bytes", tt.bytes}};
  }
  j["totals"] = json{{"tensors", tot.tensors},
                     {"parameters", tot.parameters},
                     {"bytes", tot.bytes},
                     {"by_type", by_type}};
  return j;
}

int RunInspect(int argc, char** argv) {
  bool as_json = false;
  std::string path;
  auto app = NewCommandApp(
      "inspect",
      "Shows a GGUF file's architecture, hyperparameters, tokenizer summary, tensor table and\n"
      "totals. Long arrays (tokens, merges) are summarized.");
  app->add_option("FILE", path, "the GGUF file")->required();
  app->add_flag("--json", as_json, "print one JSON object (all scalar metadata included)");
  if (std::optional<int> rc = ParseFlags(*app, argc, argv)) return *rc;
  auto file = GgufFile::Open(path);
  if (!file.ok()) {
    const std::string& msg = file.status().message();
    if (StartsWith(msg, path + ": ")) {
      std::fprintf(stderr, "tachyon inspect: %s\n", msg.c_str());
    } else {
      std::fprintf(stderr, "tachyon inspect: %s: %s\n", path.c_str(), msg.c_str());
    }
    return 1;
  }
  if (as_json) {
    // Token strings need not be valid UTF-8: replace bad bytes rather than throw.
    const std::string out = BuildJson(*file).dump(2, ' ', false, json::error_handler_t::replace);
    std::printf("%s\n", out.c_str());
  } else {
    PrintText(*file);
  }
  return 0;
}

TACHYON_COMMAND(inspect, "Show a GGUF file's metadata, tokenizer and tensors", RunInspect);

}  // namespace inspect_cmd

}  // namespace tachyon::cli
