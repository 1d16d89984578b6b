// Bounded JSON parsing: the one way server/ turns text it did not write (request bodies, and
// JSON inside model output such as tool-call arguments) into nlohmann values.
//
// The linear pre-scan of util/json_text.h (nesting depth, and here also the number of values)
// runs BEFORE any value is materialised; a document beyond a limit is refused with a 400 naming
// the limit. Only then is it parsed (without exceptions).
// Every later recursion over the parsed value (nlohmann's copy, conversion, dump and ==, the
// chat template's JSON -> Value conversion) is therefore bounded by max_depth.
//
//   auto body = ParseJsonBody(req.body);            // 400 ApiError on limits / syntax / non-object
//   if (!body.ok()) return SendError(body.error());
//
// All functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/protocol.h"
#include "util/json_text.h"

namespace tachyon::server {

// Values count containers and scalars (object keys are not values): `{"a": [1, 2]}` has 4.
inline constexpr size_t kMaxJsonValues = size_t{1} << 20;
// A ceiling for any one document; HTTP bodies are bounded earlier by --max-body-bytes (413).
inline constexpr size_t kMaxJsonBytes = size_t{64} << 20;

struct JsonLimits {
  int max_depth = kMaxJsonDepth;
  size_t max_values = kMaxJsonValues;
  size_t max_bytes = kMaxJsonBytes;
};

// Scans `text` without parsing it. Returns a 400 naming the exceeded limit (code
// "json_too_deep", "json_too_many_values" or "json_too_large"), or nullopt when within limits
// (the text may still be malformed JSON). Stops at the first limit crossed.
std::optional<ApiError> CheckJsonLimits(std::string_view text, const JsonLimits& limits = {},
                                        JsonShape* shape = nullptr);

// Request bodies: limits, then syntax, then "must be a JSON object"; each failure a 400.
ApiResult<nlohmann::json> ParseJsonBody(std::string_view body, const JsonLimits& limits = {});
ApiResult<nlohmann::ordered_json> ParseOrderedJsonBody(std::string_view body,
                                                       const JsonLimits& limits = {});

// Any JSON text (e.g. found in model output, or a schema given as text inside a request):
// nullopt when it is over a limit or malformed.
std::optional<nlohmann::json> ParseBoundedJson(std::string_view text,
                                               const JsonLimits& limits = {});
// The same, keeping object members in their order (in time linear in the members: nlohmann's
// own ordered parse takes O(n^2) for an object of n members). A repeated key keeps its first
// position and its last value.
std::optional<nlohmann::ordered_json> ParseBoundedOrderedJson(std::string_view text,
                                                              const JsonLimits& limits = {});

}  // namespace tachyon::server
