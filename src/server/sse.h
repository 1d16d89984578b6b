// Server-sent events framing for OpenAI streams: each event is one `data: <json>` line followed
// by a blank line; the stream ends with `data: [DONE]`. Pure functions, thread-safe.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tachyon::server {

inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// "data: <compact JSON>\n\n". Invalid UTF-8 in strings becomes U+FFFD; JSON escapes any newline
// inside strings, so an event never spans lines.
std::string SseData(const nlohmann::json& event);

// "event: <name>\ndata: <compact JSON>\n\n": a named event, as the Responses API and
// Anthropic's Messages API stream them (their streams have no [DONE]).
std::string SseEvent(std::string_view name, const nlohmann::json& data);

}  // namespace tachyon::server
