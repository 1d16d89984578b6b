// SpeculativeConfig: how (and whether) the engine speculates, as `--speculative-config JSON`
// spells it (vLLM's field names):
//
//   {"method": "ngram" | "suffix" | "draft_model",
//    "num_speculative_tokens": K,          // most tokens drafted per step (1..kMaxSpecTokens)
//    "prompt_lookup_min": N, "prompt_lookup_max": M,   // ngram: n-gram sizes tried, M..N
//    "model": PATH,                        // draft_model
//    "draft_p_min": P,                     // draft_model: stop drafting below this confidence
//    "draft_vocab_size": N,                // draft_model: the draft's logits over tokens < N
//                                          // only (0: the whole vocabulary)
//    "suffix_decoding_max_tree_depth": D,        // suffix: longest string its trees keep
//    "suffix_decoding_max_cached_requests": N,   // suffix: outputs in the global tree (0: none)
//    "suffix_decoding_max_spec_factor": F,       // suffix: draft <= F x the match length
//    "suffix_decoding_min_token_prob": P,        // suffix: stop below this estimated probability
//    "disable_by_batch_size": B,           // no drafts while B or more sequences run
//    "min_acceptance_rate": R}             // a request whose drafts are accepted less often
//                                          // stops drafting (probing again now and then)
//
// "ngram" and "suffix" are implemented here; "draft_model" drafts with a second model
// (engine/draft_runner.h) that BuildServingEngine loads from `model`. Plain data; copied into
// the engine config.
#pragma once

#include <string>
#include <string_view>

#include "util/status.h"

namespace tachyon::spec {

enum class SpecMethod { kNone, kNgram, kSuffix, kDraftModel };

inline constexpr int kMaxSpecTokens = 32;
inline constexpr int kMaxSuffixTreeDepth = 64;
// The batch size from which drafting stops by default: see docs/speculative.md.
inline constexpr int kDefaultDisableByBatchSize = 8;
// draft_model's default draft_p_min: see docs/speculative.md.
inline constexpr double kDefaultDraftPMin = 0;
// draft_model's default draft_vocab_size: see docs/speculative.md.
inline constexpr int kDefaultDraftVocabSize = 32768;

// Method "suffix" (spec/suffix_drafter.h), vLLM's suffix_decoding_* fields and defaults.
struct SuffixConfig {
  int max_tree_depth = 24;
  int max_cached_requests = 10000;  // 0: no global tree
  double max_spec_factor = 1.0;
  double min_token_prob = 0.1;
};

struct SpeculativeConfig {
  SpecMethod method = SpecMethod::kNone;  // kNone: no speculation
  int num_speculative_tokens = 0;
  int prompt_lookup_min = 2;
  int prompt_lookup_max = 5;
  std::string model;
  // draft_model: a sequence stops drafting at the first draft the draft model gives less
  // than this probability (that draft is dropped), as llama.cpp's --draft-p-min. 0: never.
  double draft_p_min = kDefaultDraftPMin;
  // draft_model: the draft model computes the logits of token ids [0, draft_vocab_size) only,
  // the first rows of its output matrix (FR-Spec: BPE vocabularies number their tokens roughly
  // by frequency), so it drafts from those tokens and its output matrix costs that share of
  // its full size. Exact either way: greedy drafts are verified by the target, sampled drafts
  // carry the distribution they were drawn from (zero past N). 0, or N >= the vocabulary: all.
  int draft_vocab_size = kDefaultDraftVocabSize;
  SuffixConfig suffix;
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
