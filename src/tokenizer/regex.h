// A compiled PCRE2 pattern (UTF + UCP, JIT when available) for pre-tokenizer splits.
// Thread-safe: Find* may run concurrently (match data is per thread).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/status.h"

namespace tachyon::tokenizer {

class Regex {
 public:
  // Compiles a pattern in the syntax of Hugging Face / Oniguruma split patterns (\p{L},
  // (?i:...), (?!...)). Errors name the pattern and PCRE2's message.
  static Result<std::unique_ptr<Regex>> Compile(std::string_view pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Byte ranges [start, end) of all non-overlapping matches in valid UTF-8 `text`, left to
  // right (empty matches are skipped).
  void FindAll(std::string_view text, std::vector<std::pair<size_t, size_t>>* matches) const;
  const std::string& pattern() const { return pattern_; }

 private:
  Regex() = default;
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
};

}  // namespace tachyon::tokenizer
