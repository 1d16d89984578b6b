// Summaries of a parsed GGUF file for display (tachyon inspect) and logs: the tokenizer
// section and tensor totals. Pure functions of a GgufFile; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf.h"

namespace tachyon::gguf {

// One "tokenizer.ggml.<role>_token_id" key (bos, eos, unknown, padding, seperator, eot...).
struct SpecialToken {
  std::string role;                 // "bos", "eos", "unknown", ...
  int64_t id = -1;                  // as stored (may be out of range, e.g. 0xffffffff = none)
  std::optional<std::string> text;  // the token's string when id indexes the vocab
};

struct TokenizerSummary {
  std::optional<std::string> model;  // tokenizer.ggml.model ("llama", "gpt2", "bert"...)
  std::optional<std::string> pre;    // tokenizer.ggml.pre
  std::optional<size_t> vocab_size;  // length of tokenizer.ggml.tokens
  std::optional<size_t> merges;      // length of tokenizer.ggml.merges
  bool has_scores = false;
  bool has_token_types = false;
  std::vector<SpecialToken> special;          // in file order
  std::optional<bool> add_bos;                // tokenizer.ggml.add_bos_token
  std::optional<bool> add_eos;                // tokenizer.ggml.add_eos_token
  std::optional<size_t> chat_template_bytes;  // tokenizer.chat_template
  // tokenizer.chat_template.<name> variants: (name, bytes).
  std::vector<std::pair<std::string, size_t>> chat_template_variants;
};

struct TypeTotal {
  GgmlType type = GgmlType::kF32;
  size_t tensors = 0;
  uint64_t parameters = 0;
  uint64_t bytes = 0;
};

struct TensorTotals {
  size_t tensors = 0;
  uint64_t parameters = 0;
  uint64_t bytes = 0;
  std::vector<TypeTotal> by_type;  // ordered by type number
};

TokenizerSummary SummarizeTokenizer(const GgufFile& f);
TensorTotals SummarizeTensors(const GgufFile& f);

// "[256, 512]" (ne[0] first, as stored).
std::string ShapeString(const std::vector<int64_t>& dims);
// "1.50 MiB", "512 B".
std::string HumanBytes(uint64_t bytes);

}  // namespace tachyon::gguf
