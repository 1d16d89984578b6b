#include "spec/speculative_config.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <string>

namespace tachyon::spec {
namespace {

using nlohmann::json;

Status FieldError(std::string_view field, std::string_view what) {
  return InvalidArgument("speculative config: \"" + std::string(field) +
                         "\": " + std::string(what));
}

std::string FormatNumber(double v) {
  std::string s = std::to_string(v);
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

Status ReadInt(const json& obj, const char* field, int lo, int hi, int* out) {
  auto it = obj.find(field);
  if (it == obj.end()) return OkStatus();
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (!it->is_number_integer()) return FieldError(field, "must be an integer in " + range);
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) {
    return FieldError(field, std::to_string(v) + " is outside " + range);
  }
  *out = static_cast<int>(v);
  return OkStatus();
}

// A number field in [lo, hi] (lo excluded when open_lo).
Status ReadDouble(const json& obj, const char* field, double lo, bool open_lo, double hi,
                  double* out) {
  auto it = obj.find(field);
  if (it == obj.end()) return OkStatus();
  const double v = it->is_number() ? it->get<double>() : std::nan("");
  if (!std::isfinite(v) || v < lo || (open_lo && v <= lo) || v > hi) {
    return FieldError(field, std::string("must be a number in ") + (open_lo ? "(" : "[") +
                                 FormatNumber(lo) + ", " + FormatNumber(hi) + "]");
  }
  *out = v;
  return OkStatus();
}

constexpr const char* kSuffixFields[] = {
    "suffix_decoding_max_tree_depth", "suffix_decoding_max_cached_requests",
    "suffix_decoding_max_spec_factor", "suffix_decoding_min_token_prob"};

}  // namespace

std::string_view SpecMethodName(SpecMethod m) {
  switch (m) {
    case SpecMethod::kNone:
      return "none";
    case SpecMethod::kNgram:
      return "ngram";
    case SpecMethod::kSuffix:
      return "suffix";
    case SpecMethod::kDraftModel:
      return "draft_model";
  }
  return "none";
}

Result<SpeculativeConfig> ParseSpeculativeConfig(std::string_view text) {
  json obj = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (obj.is_discarded()) return InvalidArgument("speculative config: not valid JSON");
  if (!obj.is_object()) return InvalidArgument("speculative config: must be a JSON object");
  static constexpr const char* kFields[] = {
      "method", "num_speculative_tokens", "prompt_lookup_min",   "prompt_lookup_max",
      "model",  "disable_by_batch_size",  "min_acceptance_rate", "draft_p_min",
      "draft_vocab_size"};
  for (const auto& [key, value] : obj.items()) {
    bool known = false;
    for (const char* f : kFields) known = known || key == f;
    for (const char* f : kSuffixFields) known = known || key == f;
    if (!known) return FieldError(key, "unknown field");
  }
  SpeculativeConfig c;
  auto method = obj.find("method");
  if (method == obj.end()) return FieldError("method", "missing (ngram, suffix or draft_model)");
  const std::string m = method->is_string() ? method->get<std::string>() : "";
  if (m == "ngram") {
    c.method = SpecMethod::kNgram;
  } else if (m == "suffix") {
    c.method = SpecMethod::kSuffix;
  } else if (m == "draft_model") {
    c.method = SpecMethod::kDraftModel;
  } else {
    return FieldError("method", "must be one of ngram, suffix, draft_model");
  }
  if (!obj.contains("num_speculative_tokens")) {
    return FieldError("num_speculative_tokens", "missing (tokens drafted per step)");
  }
  RETURN_IF_ERROR(
      ReadInt(obj, "num_speculative_tokens", 1, kMaxSpecTokens, &c.num_speculative_tokens));
  // One of the lookup bounds alone sets both (a single n-gram size).
  const bool has_min = obj.contains("prompt_lookup_min");
  const bool has_max = obj.contains("prompt_lookup_max");
  RETURN_IF_ERROR(ReadInt(obj, "prompt_lookup_min", 1, 64, &c.prompt_lookup_min));
  RETURN_IF_ERROR(ReadInt(obj, "prompt_lookup_max", 1, 64, &c.prompt_lookup_max));
  if (has_min && !has_max) c.prompt_lookup_max = std::max(c.prompt_lookup_min, c.prompt_lookup_max);
  if (has_max && !has_min) c.prompt_lookup_min = std::min(c.prompt_lookup_min, c.prompt_lookup_max);
  if (c.prompt_lookup_min > c.prompt_lookup_max) {
    return FieldError("prompt_lookup_min", "is larger than prompt_lookup_max");
  }
  if (auto it = obj.find("model"); it != obj.end()) {
    if (!it->is_string() || it->get<std::string>().empty()) {
      return FieldError("model", "must be a non-empty path or model name");
    }
    c.model = it->get<std::string>();
  }
  RETURN_IF_ERROR(ReadInt(obj, "disable_by_batch_size", 1, 1 << 20, &c.disable_by_batch_size));
  if (auto it = obj.find("min_acceptance_rate"); it != obj.end()) {
    const double r = it->is_number() ? it->get<double>() : -1;
    if (!it->is_number() || !std::isfinite(r) || r < 0 || r > 1) {
      return FieldError("min_acceptance_rate", "must be a number in [0, 1]");
    }
    c.min_acceptance_rate = r;
  }
  SuffixConfig& sc = c.suffix;
  RETURN_IF_ERROR(
      ReadInt(obj, "suffix_decoding_max_tree_depth", 2, kMaxSuffixTreeDepth, &sc.max_tree_depth));
  RETURN_IF_ERROR(
      ReadInt(obj, "suffix_decoding_max_cached_requests", 0, 1 << 20, &sc.max_cached_requests));
  RETURN_IF_ERROR(ReadDouble(obj, "suffix_decoding_max_spec_factor", 0, /*open_lo=*/true,
                             kMaxSpecTokens, &sc.max_spec_factor));
  RETURN_IF_ERROR(ReadDouble(obj, "suffix_decoding_min_token_prob", 0, /*open_lo=*/false, 1,
                             &sc.min_token_prob));
  if (c.method != SpecMethod::kSuffix) {
    for (const char* f : kSuffixFields) {
      if (obj.contains(f)) return FieldError(f, "is only used by method suffix");
    }
  }
  if (c.method == SpecMethod::kDraftModel && c.model.empty()) {
    return FieldError("model", "missing (the draft model of method draft_model)");
  }
  if (c.method != SpecMethod::kDraftModel && !c.model.empty()) {
    return FieldError("model", "is only used by method draft_model");
  }
  if (obj.contains("draft_p_min") && c.method != SpecMethod::kDraftModel) {
    return FieldError("draft_p_min", "is only used by method draft_model");
  }
  RETURN_IF_ERROR(ReadDouble(obj, "draft_p_min", 0, /*open_lo=*/false, 1, &c.draft_p_min));
  if (obj.contains("draft_vocab_size") && c.method != SpecMethod::kDraftModel) {
    return FieldError("draft_vocab_size", "is only used by method draft_model");
  }
  RETURN_IF_ERROR(ReadInt(obj, "draft_vocab_size", 0, 1 << 30, &c.draft_vocab_size));
  return c;
}

Status ValidateSpeculativeConfig(const SpeculativeConfig& c) {
  switch (c.method) {
    case SpecMethod::kNone:
      return OkStatus();
    case SpecMethod::kNgram:
    case SpecMethod::kSuffix:
      if (c.num_speculative_tokens < 1 || c.num_speculative_tokens > kMaxSpecTokens) {
        return FieldError("num_speculative_tokens", "must be in [1, 32]");
      }
      if (c.method == SpecMethod::kNgram &&
          (c.prompt_lookup_min < 1 || c.prompt_lookup_min > c.prompt_lookup_max)) {
        return FieldError("prompt_lookup_min", "must be in [1, prompt_lookup_max]");
      }
      if (c.method == SpecMethod::kSuffix &&
          (c.suffix.max_tree_depth < 2 || c.suffix.max_tree_depth > kMaxSuffixTreeDepth ||
           c.suffix.max_cached_requests < 0 || !(c.suffix.max_spec_factor > 0) ||
           !(c.suffix.min_token_prob >= 0 && c.suffix.min_token_prob <= 1))) {
        return InvalidArgument("speculative config: suffix_decoding_* fields out of range");
      }
      return OkStatus();
    case SpecMethod::kDraftModel:
      if (c.num_speculative_tokens < 1 || c.num_speculative_tokens > kMaxSpecTokens) {
        return FieldError("num_speculative_tokens", "must be in [1, 32]");
      }
      if (c.model.empty()) return FieldError("model", "missing (the draft model)");
      if (!(c.draft_p_min >= 0 && c.draft_p_min <= 1)) {
        return FieldError("draft_p_min", "must be in [0, 1]");
      }
      if (c.draft_vocab_size < 0) return FieldError("draft_vocab_size", "must be >= 0");
      return OkStatus();
  }
  return OkStatus();
}

}  // namespace tachyon::spec
