// Jinja lexer: template source → tokens, applying Jinja's whitespace rules as the
// transformers environment configures them (trim_blocks, lstrip_blocks, `-` / `+` markers,
// keep_trailing_newline=False, newlines normalised to "\n"). Comments vanish; raw blocks
// become text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace tachyon::chat {

enum class TokenType : uint8_t {
  kText,        // literal template text (already whitespace-processed)
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,  // value: the decoded string
  kInt,
  kFloat,
  kOp,  // value: the operator, e.g. "//", "(", "|"
  kEof,
};

struct Token {
  TokenType type = TokenType::kEof;
  std::string value;
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
};

struct LexerOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

// Errors: InvalidArgument "line N: ..." (unterminated tag/string/comment, bad character).
Result<std::vector<Token>> Tokenize(std::string_view source, const LexerOptions& options = {});

}  // namespace tachyon::chat
