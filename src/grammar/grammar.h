// What a request asks its output to match (ConstraintSpec) and a grammar compiled for one
// vocabulary (CompiledGrammar). Compile() and GrammarCache are in grammar/compile.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grammar/matcher.h"

namespace tachyon::grammar {

// Built at the server edge from response_format / structured_outputs / grammar / json_schema.
struct ConstraintSpec {
  enum class Kind { kJsonObject, kJsonSchema, kRegex, kChoice, kGbnf };
  Kind kind = Kind::kGbnf;
  std::string source;                // schema JSON text, regex, or GBNF text
  std::vector<std::string> choices;  // kChoice: the output is exactly one of these strings
  bool operator==(const ConstraintSpec&) const = default;
};

// A grammar compiled for one vocabulary; immutable (its lazily filled mask caches are
// internally synchronised) and shared by every request that uses it. Thread-safe.
// Subclasses: the real one made by Compile(), and test fakes (src/engine/testing/).
class CompiledGrammar {
 public:
  virtual ~CompiledGrammar() = default;
  CompiledGrammar(const CompiledGrammar&) = delete;
  CompiledGrammar& operator=(const CompiledGrammar&) = delete;

  // A fresh matcher at the start of the grammar. The matcher keeps this grammar alive.
  virtual std::unique_ptr<TokenMatcher> NewMatcher() const = 0;

  // Length-aware masks (TokenMatcher::SetTokenLimit): the least limit that promises an end.
  // A fresh matcher given SetTokenLimit(n) with n >= MinTokenLimit() ends its output as a
  // complete sentence of the grammar within n tokens, whatever it samples among the allowed
  // tokens; below that nothing is promised (the output may be cut). It bounds from above the
  // tokens of the grammar's shortest sentence (grammar/length_limit.h: the start's distance).
  // kNoTokenLimit where no limit promises an end; 0 for matchers that ignore limits (fakes).
  static constexpr int64_t kNoTokenLimit = INT64_MAX;
  virtual int64_t MinTokenLimit() const { return 0; }

  // The memory it holds now: its rules and the caches it fills as matchers walk it (each of
  // them bounded). For GrammarCache's byte bound.
  virtual size_t MemoryBytes() const { return 0; }

 protected:
  CompiledGrammar() = default;
};

}  // namespace tachyon::grammar
