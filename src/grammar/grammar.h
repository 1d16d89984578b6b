// What a request asks its output to match (ConstraintSpec) and a grammar compiled for one
// vocabulary (CompiledGrammar). Compile() and GrammarCache are in grammar/compile.h.
#pragma once

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

 protected:
  CompiledGrammar() = default;
};

}  // namespace tachyon::grammar
