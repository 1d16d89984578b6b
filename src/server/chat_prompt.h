// Chat prompts as token ids, safe against forged control tokens: the chat template is rendered
// with provenance tracking (chat::ChatTemplate::RenderTracked) and the text is encoded with
// tokenizer::Tokenizer::EncodeSegments, so that special-token spellings inside text that came
// from the request (message content, names, tool calls and their arguments, tool definitions,
// extra template variables) stay plain text. Only the template's own markup, the model's
// bos/eos strings, the validated message roles and the trusted `suffix` become control tokens.
//
// For content without special-token text the ids are exactly those of today's
// Encode(Render(context), add_special, parse_special=true).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace tachyon::server {

struct ChatPromptOptions {
  bool add_special = false;  // BOS/EOS around the prompt as Tokenizer::Encode adds them
  // Trusted deployments: parse special-token text in client content too (the old behaviour).
  bool allow_special_in_content = false;
  chat::RenderOptions render;
};

// The strings of a chat context that are not client text (chat::ChatTemplate::RenderTracked
// paths): the model's bos/eos tokens, and message roles, which the server has validated
// against the fixed set of OpenAI roles (templates build control tokens from them, e.g.
// "<|" + role + "|>").
inline const std::vector<std::string>& TrustedChatVariables() {
  static const std::vector<std::string> kTrusted = {"/bos_token", "/eos_token", "/messages/*/role"};
  return kTrusted;
}

// The template variables of a parsed chat request's `context` (ChatRequest::template_context:
// messages, tools, add_generation_prompt and chat_template_kwargs entries), built with
// chat::MakeChatContext and the model's bos/eos text. The one mapping serve and route share.
nlohmann::ordered_json ChatTemplateVariables(const nlohmann::ordered_json& context,
                                             std::string_view bos_text, std::string_view eos_text);

// Renders `context` (as chat::MakeChatContext builds it) with `tmpl`, appends `suffix`
// (trusted markup, e.g. the forced opening of a tool call) and encodes the result. Errors: the
// template's (InvalidArgument / ResourceExhausted).
Result<std::vector<int32_t>> EncodeChatPrompt(const chat::ChatTemplate& tmpl,
                                              const tokenizer::Tokenizer& tok,
                                              const nlohmann::ordered_json& context,
                                              std::string_view suffix,
                                              const ChatPromptOptions& options = {});

// The segments of a tracked rendering followed by `suffix`: client spans with
// parse_special = false, everything else with parse_special = true. The views point into
// `render.text` and `suffix`.
std::vector<tokenizer::TextSegment> ChatPromptSegments(const chat::TrackedRender& render,
                                                       std::string_view suffix);

}  // namespace tachyon::server
