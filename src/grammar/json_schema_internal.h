// Internals of the JSON Schema -> GBNF converter (json_schema*.cc); not a public header.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"
#include "util/status.h"

namespace tachyon::grammar::schema_internal {

using Json = nlohmann::ordered_json;

// ---- GBNF text helpers (json_schema_text.cc) ----
// A GBNF string literal matching exactly the UTF-8 bytes of `s` (escapes everything outside
// printable ASCII; invalid UTF-8 bytes become U+FFFD).
std::string Literal(std::string_view s);
// One code point as it is written inside a GBNF char class.
std::string ClassChar(uint32_t cp);
// The JSON text of a value as a compact encoder writes it (UTF-8 raw, escapes as JSON needs).
std::string JsonText(const Json& v);
// Decodes UTF-8 into code points (invalid bytes -> U+FFFD, as tokenizer::DecodeUtf8).
std::vector<uint32_t> DecodeUtf8(std::string_view s);
// "{m}", "{m,}", "{m,n}", "*", "+", "?" or "" (m..max, max < 0 = unbounded).
std::string RepeatSuffix(int64_t min, int64_t max);
// JSON pointer token escaping (~0, ~1).
std::string PointerToken(std::string_view key);

// ---- Sets of code points (json_schema_regex.cc) ----
using CodeRanges = std::vector<std::pair<uint32_t, uint32_t>>;  // sorted, disjoint, inclusive
// GBNF expression matching the JSON-string-content encodings of the code points in `set`:
// raw where JSON allows, escapes for '"', '\' and control characters. "" if the set is empty.
std::string JsonCharsExpr(const CodeRanges& set);

// The GBNF expression of the content (between the quotes) of the JSON strings whose decoded value
// matches `pattern` (ECMA-262 / Python `re` search semantics, a common subset), with the length
// of the decoded string within [min_length, max_length] (max < 0 = unbounded).
// `char_rule` is the name of the rule for one JSON string character. Errors: InvalidArgument
// naming the unsupported regex feature (or the length bounds that cannot be combined).
Result<std::string> RegexToJsonContent(std::string_view pattern, int64_t min_length,
                                       int64_t max_length, const std::string& char_rule);

// ---- Numbers (json_schema_number.cc) ----
// A signed integer as decimal digits ("-12", "0"), or unbounded.
struct Bound {
  bool present = false;
  bool negative = false;
  std::string digits;  // magnitude without leading zeros ("0" for zero)
  bool exclusive = false;
};
// The stricter of two lower (or upper) bounds; either may be absent.
Bound Stricter(const Bound& a, const Bound& b, bool lower);
// GBNF for the integers in [lo, hi] (inclusive; absent = unbounded); "" if empty.
std::string IntegerRangeExpr(const Bound& lo, const Bound& hi);
// GBNF for JSON numbers x with lo <= x <= hi (or < / > where exclusive), integer-valued bounds.
// "" if empty.
std::string NumberRangeExpr(const Bound& lo, const Bound& hi);
// Reads a numeric bound; for integers rounds inward (ceil for lower, floor for upper) and makes
// it inclusive. Err if not a number or not integer-valued (for number schemas).
Result<Bound> ReadBound(const Json& v, bool exclusive, bool lower, bool integer,
                        const std::string& where);

// ---- String formats (json_schema_format.cc) ----
// The GBNF expression of the content of a string of `format`, std::nullopt if the format is an
// annotation only (unknown to validators), or an error if it is known but not supported.
Result<std::optional<std::string>> FormatContentExpr(const std::string& format,
                                                     const std::string& where);

// ---- The converter (json_schema.cc, json_schema_object.cc) ----
class Converter {
 public:
  Converter(const Json& root, const JsonSchemaOptions& options) : root_(root), options_(options) {}

  // The whole grammar text for the root schema.
  Result<std::string> Run();
  // The grammar text for "any JSON object".
  std::string AnyObjectGrammar();

  // A GBNF expression (a rule name or a short inline expression) for the JSON texts valid under
  // `schema`, found at JSON pointer `where`.
  Result<std::string> Visit(const Json& schema, const std::string& where, int depth = 0);

 private:
  friend class ObjectBuilder;

  Status CheckBudget();
  // Adds `name-hint ::= body` unless an identical body exists; returns the rule name.
  std::string AddRule(std::string_view hint, std::string body);
  std::string NewName(std::string_view hint);
  void Define(const std::string& name, std::string body);
  // The shared rules, defined on first use.
  std::string Ws();  // " ws " or " " (compact)
  std::string CharRule();
  std::string StringRule();
  std::string NumberRule();
  std::string IntegerRule();
  std::string ValueRule();
  std::string AnyObjectRule();
  std::string AnyArrayRule();

  Result<const Json*> Resolve(const std::string& ref, const std::string& where);
  Result<std::string> VisitRef(const std::string& ref, const std::string& where, int depth);
  Result<std::string> VisitTyped(const Json& s, const std::string& where, int depth);
  // One type's alternative ("" when covered by another type).
  Result<std::string> TypeExpr(const Json& s, const std::string& type, bool has_number,
                               const std::string& where, int depth);
  // Visit of a schema built by merging (no pointer of its own), memoized by its text so that
  // recursion through merged schemas ends in a rule.
  Result<std::string> VisitMerged(const Json& s, const std::string& where, int depth);
  // Drops the rules defined since rules_.size() was `mark` (and `reserved`) after a failed visit.
  void ForgetSince(size_t mark, const std::string& reserved);
  Result<std::string> VisitEnum(const Json& s, const std::string& where);
  Result<std::string> VisitAlternatives(const Json& s, const std::string& where, int depth);
  Result<std::string> StringExpr(const Json& s, const std::string& where);
  Result<std::string> NumberExpr(const Json& s, const std::string& where, bool integer);
  Result<std::string> ArrayExpr(const Json& s, const std::string& where, int depth);
  Result<std::string> ObjectExpr(const Json& s, const std::string& where, int depth);

  // allOf and keyword merging (json_schema_merge.cc).
 public:
  Result<Json> Merge(const Json& a, const Json& b, const std::string& where, int depth);
  Result<Json> Deref(const Json& s, const std::string& where, int depth);
  // Whether no text generated for `a` can be valid under `b` (conservative: false = unknown).
  bool GenFails(const Json& a, const Json& b, int depth);
  // Narrows `gen` (a oneOf branch as generated) so that fewer of its texts are valid under
  // `other` (another branch as written): requires or drops optional properties. True if changed.
  bool Tighten(Json* gen, const Json& other);

 private:
  const Json& root_;
  JsonSchemaOptions options_;
  std::vector<std::pair<std::string, std::string>> rules_;  // in definition order
  std::unordered_map<std::string, std::string> by_body_;
  std::set<std::string> names_;
  std::unordered_map<std::string, std::string> ref_rules_;  // pointer -> rule name
  std::map<std::string, std::string> shared_;               // shared rule kind -> name
  size_t bytes_ = 0;
  int checks_ = 0;
};

// The types a schema without "type" generates: those whose keywords it uses (empty = any).
std::vector<std::string> InferTypes(const Json& s);

// Keyword sets.
bool IsAnnotation(std::string_view key);
// Keywords that constrain values (everything the converter acts on).
bool IsAssertion(std::string_view key);
// Standard keywords the converter refuses (value-dependent: uniqueItems false is fine).
bool IsUnsupported(std::string_view key, const Json& value);
// A schema with assertion keywords other than those in `except`.
bool HasAssertionsExcept(const Json& s, std::initializer_list<std::string_view> except);

Status Refuse(std::string_view keyword, const std::string& where, std::string_view why = {});
// "<what> at <where> admits no value": a subschema no value satisfies. Internal code kNotFound,
// so that callers can drop an optional property, a branch or a type; JsonSchemaToGbnf reports
// it as InvalidArgument.
Status Unsatisfiable(std::string_view what, const std::string& where);
bool IsUnsatisfiable(const Status& s);

}  // namespace tachyon::grammar::schema_internal
