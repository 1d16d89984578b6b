// Request fields tachyon does not implement: each is refused with a 400 naming it instead of
// being silently ignored (a client that asks for audio, a server-side tool or beam search must
// learn that it will not get it). docs/server.md lists every field as honoured, refused or
// ignored; this file is the code behind the "refused" rows.
//
// Fields OpenAI itself treats as bookkeeping (user, metadata, store, safety_identifier,
// prompt_cache_key, ...) are accepted and ignored. Other unknown fields are ignored, as OpenAI's
// compatible servers do, except well-known extensions of other servers that change the output
// (vLLM's older guided_* fields, beam search, ...), which are refused here too. Structured-output
// fields are parsed by server/constraint_fields.h.
// Pure and thread-safe.
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

#include "server/protocol.h"

namespace tachyon::server {

enum class RequestKind { kCompletion, kChat };

// The first unsupported field of `body` (a JSON object), as a 400 with `param` set, or nullopt.
std::optional<ApiError> CheckUnsupportedFields(const nlohmann::json& body, RequestKind kind);

}  // namespace tachyon::server
