// Jinja parser: tokens → Program (statements and expressions, Jinja's operator precedence).
// Nesting deeper than kMaxParseDepth fails, so hostile input cannot exhaust the stack.
#pragma once

#include <memory>
#include <string_view>

#include "chat/ast.h"
#include "util/status.h"

namespace tachyon::chat {

inline constexpr int kMaxParseDepth = 200;

// Lexes and parses a template. Errors: InvalidArgument "line N: <what>".
Result<std::unique_ptr<Program>> ParseTemplate(std::string_view source);

}  // namespace tachyon::chat
