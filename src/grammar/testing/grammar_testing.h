// Test helpers for grammar/: small vocabularies, the brute-force reference mask, and the
// testdata tokenizers as Vocabularies, a JSON-like GBNF grammar.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grammar/compile.h"

namespace tachyon::grammar::testing {

// A JSON-like GBNF grammar: objects at the root, arrays, strings with escapes, numbers with
// bounded repetitions, at most two whitespace characters in a row.
inline constexpr const char* kJsonLikeGbnf = R"(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9]{1,3})? ws
ws ::= [ \t\n]{0,2}
)";

// 256 single-byte tokens (id = byte value) and EOS id 256.
std::shared_ptr<const Vocabulary> ByteVocab();
// Tokens with the given bytes (ids in order) plus EOS as the last id.
std::shared_ptr<const Vocabulary> MakeVocab(const std::vector<std::string>& tokens);

// Compiles GBNF over `vocab` (ByteVocab() when null); a failure fails the calling test and
// returns null.
std::shared_ptr<const CompiledGrammar> CompileGbnf(const std::string& gbnf,
                                                   std::shared_ptr<const Vocabulary> vocab = {});

// Feeds `text` one byte at a time (ByteVocab ids); true when every byte was accepted and the
// grammar may end there.
bool MatchesBytes(const CompiledGrammar& g, const std::string& text);

// The allowed set by brute force: every token tried with AcceptToken and rolled back (EOS
// included), as a bitmask of vocab.mask_words() words.
std::vector<uint32_t> BruteForceMask(TokenMatcher& m, const Vocabulary& vocab);

// testdata/tokenizers/<name> as a Vocabulary (EOS = the tokenizer's end-of-generation ids),
// loaded once per process; null when testdata is absent.
std::shared_ptr<const Vocabulary> TestdataVocab(const std::string& name);

}  // namespace tachyon::grammar::testing
