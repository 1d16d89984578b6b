// Bounded JSON text: the one way tachyon turns JSON it did not write (request bodies, a model
// folder's config.json and tokenizer.json, a safetensors header) into nlohmann values.
//
// nlohmann's copy, conversion, dump, == and the chat template's conversion recurse once per
// nesting level, so a document is first scanned — linearly, tracking string / escape state,
// allocating nothing — and refused when it nests deeper than its limit; only then is it parsed
// (without exceptions). Every later recursion over the value is bounded by that depth.
//
//   ASSIGN_OR_RETURN(nlohmann::json config, ParseJsonDocument(text, path));
//
// All functions are pure and thread-safe. server/json_limits.h adds the HTTP bodies' limits.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace tachyon {

// Depth counts containers: `{}` is depth 1, `{"a": []}` depth 2, a bare scalar depth 0.
inline constexpr int kMaxJsonDepth = 64;

// What a scan measured: an upper bound on values for invalid JSON, exact for valid JSON.
// Values count containers and scalars (object keys are not values): `{"a": [1, 2]}` has 4.
struct JsonShape {
  int depth = 0;
  size_t values = 0;
};

enum class JsonLimit { kNone, kDepth, kValues };

// Scans `text` without parsing it; stops at the first limit crossed and says which (kNone:
// within both; the text may still be malformed). `shape`, if given, gets what was measured.
JsonLimit ScanJson(std::string_view text, int max_depth, size_t max_values,
                   JsonShape* shape = nullptr);

// JSON's insignificant whitespace: space, tab, line feed, carriage return.
inline bool IsJsonSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// A whole JSON document of a file (or other text) named `what` in the errors: InvalidArgument
// when it nests deeper than kMaxJsonDepth or is not valid JSON.
Result<nlohmann::json> ParseJsonDocument(std::string_view text, const std::string& what);

}  // namespace tachyon
