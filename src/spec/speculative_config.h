// SpeculativeConfig: how (and whether) the engine speculates, as `--speculative-config JSON`
// spells it (vLLM's field names):
//
//   {"method": "ngram" | "suffix" | "draft_model",
//    "num_speculative_tokens": K,          // most tokens drafted per step (1..kMaxSpecTokens)
//    "prompt_lookup_min": N, "prompt_lookup_max": M,   // ngram: n-gram sizes tried, M..N
//    "model": PATH,                        // draft_model
//    "disable_by_batch_size": B,           // no drafts while B or more sequences run
//    "min_acceptance_rate": R}             // a request whose drafts are accepted less often
//                                          // stops drafting (probing again now and then)
//
// Only "ngram" is implemented; "suffix" and "draft_model" parse but Validate() refuses them
// with a message saying so. Plain data; copied into the engine config.
#pragma once

#include <string>
#include <string_view>

#include "util/status.h"

namespace tachyon::spec {

enum class SpecMethod { kNone, kNgram, kSuffix, kDraftModel };

inline constexpr int kMaxSpecTokens = 32;
// The batch size from which drafting stops by default: see docs/speculative.md.
inline constexpr int kDefaultDisableByBatchSize = 8;

struct SpeculativeConfig {
  SpecMethod method = SpecMethod::kNone;  // kNone: no speculation
  int num_speculative_tokens = 0;
  int prompt_lookup_min = 2;
  int prompt_lookup_max = 5;
  std::string model;
  int disable_by_batch_size = kDefaultDisableByBatchSize;
  double min_acceptance_rate = 0.25;

  bool enabled() const { return method != SpecMethod::kNone; }
};

// Parses the JSON object. Errors: InvalidArgument naming the field (unknown field, wrong type,
// out of range, missing num_speculative_tokens / method, min > max) or the JSON problem.
Result<SpeculativeConfig> ParseSpeculativeConfig(std::string_view json);

// InvalidArgument (Unimplemented for the methods not built yet) when the engine cannot run
// this config; OK for kNone.
Status ValidateSpeculativeConfig(const SpeculativeConfig& config);

std::string_view SpecMethodName(SpecMethod m);

}  // namespace tachyon::spec
