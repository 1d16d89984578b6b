// JSON Schema -> GBNF: the grammar of the JSON texts a schema accepts, as GBNF text (llama.cpp's
// documented syntax, root rule `root`) for the grammar compiler (grammar/compile.h).
//
// The grammar is exact or tighter, never looser: every text it accepts is valid under the schema;
// a keyword that cannot be honoured exactly is refused with InvalidArgument naming the keyword
// and the JSON pointer where it sits. Where it is tighter, the output is what a well-formed JSON
// encoder writes for the value (docs/grammar.md, "JSON Schema", lists the policy):
// - whitespace: a run of at most `max_whitespace` characters of [ \t\n] after '{' '[' ':' ','
//   and before '}' ']'; none before ':' or ',', none around the document;
// - object keys in the order the schema declares them, then the other keys (where allowed);
// - strings: raw UTF-8 except '"', '\' and control characters, which are escaped; \uXXXX only
//   outside the surrogate range;
// - numbers: JSON number syntax; integers without fraction or exponent.
//
// Thread-safety: pure functions.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "util/status.h"

namespace tachyon::grammar {

struct JsonSchemaOptions {
  // Longest whitespace run where JSON allows whitespace (see above); 0 = compact output only.
  int max_whitespace = 20;
  // An object schema without "additionalProperties": false = only the declared properties
  // (OpenAI strict mode, as llama.cpp and XGrammar generate); true = JSON Schema's meaning, any
  // other key with any value after the declared ones.
  bool additional_properties_default = false;
  // Past this time point the conversion stops with InvalidArgument ("... compile budget").
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // Largest GBNF text produced, in bytes; beyond it InvalidArgument.
  size_t max_grammar_bytes = size_t{8} << 20;
};

// The GBNF of the JSON texts valid under the schema `schema_json` (a JSON Schema document:
// drafts 4 to 2020-12 as far as their keywords agree; $ref within the document).
// Errors (InvalidArgument): malformed JSON, an unsupported keyword or combination (message names
// the keyword and its JSON pointer, e.g. "unsupported JSON Schema keyword 'not' at
// /properties/a"), an unsatisfiable schema, a $ref that does not resolve, the deadline or size.
Result<std::string> JsonSchemaToGbnf(std::string_view schema_json,
                                     const JsonSchemaOptions& options = {});

// The GBNF of any JSON object (OpenAI response_format json_object), same whitespace policy.
std::string JsonObjectGbnf(const JsonSchemaOptions& options = {});

}  // namespace tachyon::grammar
