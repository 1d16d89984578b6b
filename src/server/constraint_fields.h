// Structured-output request fields -> one grammar::ConstraintSpec (or none).
//
// The sources, on /v1/chat/completions and /v1/completions alike:
//   response_format  {"type": "text"}                     no constraint
//                    {"type": "json_object"}              any JSON object
//                    {"type": "json_object", "schema": S} S (llama.cpp's form)
//                    {"type": "json_schema", "json_schema": {"name", "schema": S, "strict"}}
//   structured_outputs (vLLM) exactly one of {"json": S (object or JSON text), "regex": "...",
//                    "choice": ["a", "b"], "grammar": "GBNF", "json_object": true}
//   grammar          GBNF text (llama.cpp)
//   json_schema      S (llama.cpp)
// response_format and structured_outputs may also hold "complete_within_max_tokens": a boolean
// (RequestedConstraint::complete_within_max_tokens; docs/grammar.md).
// More than one source in one request is a 400, as is a malformed value (naming the field).
// The spec is only parsed here; compiling it (schema keywords, GBNF syntax, budget) happens at
// the edge through the backend's grammar cache, and its errors name `param`.
// Pure and thread-safe.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "server/protocol.h"

namespace tachyon::server {

// Reads the fields above from `body` (a JSON object). nullopt: the request is unconstrained.
// RequestedConstraint::param is the field it came from ("response_format",
// "structured_outputs.regex", ...).
// Ordered: a schema's properties keep the client's order (the order the grammar emits them).
ApiResult<std::optional<RequestedConstraint>> ParseConstraintFields(
    const nlohmann::ordered_json& body);

}  // namespace tachyon::server
