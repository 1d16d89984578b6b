// GBNF (llama.cpp's grammar syntax) into the grammar IR.
//
//   root   ::= "{" ws pair ("," ws pair)* "}"   # comments run to the end of the line
//   pair   ::= [a-z]+ ":" ws ( "true" | "false" )
//   ws     ::= [ \t\n]{0,2}
//
// Rules `name ::= alternatives` (names of letters, digits, '-' and '_'), one per line (a rule
// continues over lines inside parentheses, after '|', and on lines starting with '|');
// string literals "..." and character classes [...] / [^...] with escapes \n \r \t \\ \" \[
// \] \- \xHH \uHHHH \UHHHHHHHH (code points, encoded as UTF-8); '.' any character; grouping
// ( ); alternation |; repetition * + ? {m} {m,} {m,n} {,n}. The start rule is `root`.
#pragma once

#include <string_view>

#include "grammar/ir.h"
#include "util/status.h"

namespace tachyon::grammar {

// Adds the grammar's rules to *b and sets *root to the `root` rule. Errors are InvalidArgument
// "GBNF syntax error at LINE:COL: ..." (undefined rules, duplicate definitions, bad escapes,
// unterminated literals, a missing root included).
Status ParseGbnf(std::string_view text, GrammarBuilder* b, int32_t* root, Deadline& deadline);

}  // namespace tachyon::grammar
