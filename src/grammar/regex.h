// Regular expressions (ConstraintSpec::kRegex) into the grammar IR. The whole output must
// match the regex (full match, as vLLM's structured_outputs.regex).
//
// Supported: literal characters (UTF-8), escapes \n \r \t \f \v \0 \xHH \uHHHH and escaped
// punctuation, classes [...] / [^...] with ranges and \d \w \s \D \W \S (ASCII digits, word
// characters [A-Za-z0-9_] and whitespace [ \t\n\r\f\v]; their negations are every other code
// point), '.' (any character but newline), groups ( ), (?: ), (?<name> ), (?P<name> ),
// alternation |, quantifiers * + ? {m} {m,} {m,n} {,n} (lazy forms *? +? ?? {..}? are treated
// as greedy: the language is the same), '^' at the start and '$' at the end of a top-level
// branch. Refused with InvalidArgument naming the feature: backreferences, lookahead and
// lookbehind, word boundaries, inline flags, possessive quantifiers, \p{..} classes, anchors
// anywhere else.
#pragma once

#include <string_view>

#include "grammar/ir.h"
#include "util/status.h"

namespace tachyon::grammar {

// Adds rules for `regex` to *b; *root = the rule matching exactly the regex's language.
Status ParseRegex(std::string_view regex, GrammarBuilder* b, int32_t* root, Deadline& deadline);

}  // namespace tachyon::grammar
