// Helpers for mapping another API's request onto the chat path (server/responses_api.h,
// server/anthropic_api.h build a /v1/chat/completions body and OpenAiApi::StartChat runs it).
// Pure and thread-safe.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/protocol.h"

namespace tachyon::server {

// tachyon's sampling extensions (docs/server.md): passed through unchanged by every mapping, so
// a client can add them to a Responses or Messages body as it can to a chat completion.
inline constexpr std::initializer_list<const char*> kSamplingExtensions = {
    "top_k",          "min_p",   "repetition_penalty", "presence_penalty", "frequency_penalty",
    "logit_bias",     "seed",    "ignore_eos",         "min_tokens",       "cache_salt",
    "stop_token_ids", "priority"};

// Copies the fields `names` of `from` that are present and not null into `to`.
void CopyFields(const nlohmann::ordered_json& from, std::initializer_list<const char*> names,
                nlohmann::ordered_json& to);

// Renames the parameter an error names: `from` itself, or a path below it ("messages[2].content"
// with from = "messages", to = "input" becomes "input[2].content"); the message too.
void RenameParam(ApiError& error, std::string_view from, std::string_view to);

// The text of `content`: a string, or an array of parts {"type": T, "text": "..."} whose T is one
// of `text_types` (joined with "\n"). Any other part is a 400 naming `param` and the part's type.
ApiResult<std::string> TextContent(const nlohmann::ordered_json& content,
                                   std::initializer_list<std::string_view> text_types,
                                   const std::string& param);

// The present, non-null field `name` of `obj`, or null.
const nlohmann::ordered_json* Field(const nlohmann::ordered_json& obj, const char* name);

}  // namespace tachyon::server
