#include "server/chat_prompt.h"

namespace tachyon::server {

nlohmann::ordered_json ChatTemplateVariables(const nlohmann::ordered_json& context,
                                             std::string_view bos_text, std::string_view eos_text) {
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  for (const auto& [key, value] : context.items()) {
    if (key != "messages" && key != "tools" && key != "add_generation_prompt") extra[key] = value;
  }
  return chat::MakeChatContext(
      context.at("messages"), context.value("tools", nlohmann::ordered_json(nullptr)),
      context.value("add_generation_prompt", true), bos_text, eos_text, extra);
}

std::vector<tokenizer::TextSegment> ChatPromptSegments(const chat::TrackedRender& render,
                                                       std::string_view suffix) {
  std::vector<tokenizer::TextSegment> segments;
  const std::string_view text = render.text;
  size_t pos = 0;
  for (const auto& [begin, end] : render.client_spans) {
    if (begin > pos) segments.push_back({text.substr(pos, begin - pos), true});
    segments.push_back({text.substr(begin, end - begin), false});
    pos = end;
  }
  if (pos < text.size()) segments.push_back({text.substr(pos), true});
  if (!suffix.empty()) segments.push_back({suffix, true});
  return segments;
}

Result<std::vector<int32_t>> EncodeChatPrompt(const chat::ChatTemplate& tmpl,
                                              const tokenizer::Tokenizer& tok,
                                              const nlohmann::ordered_json& context,
                                              std::string_view suffix,
                                              const ChatPromptOptions& options) {
  if (options.allow_special_in_content) {
    ASSIGN_OR_RETURN(std::string text, tmpl.Render(context, options.render));
    text += suffix;
    return tok.Encode(text, options.add_special, /*parse_special=*/true);
  }
  ASSIGN_OR_RETURN(chat::TrackedRender render,
                   tmpl.RenderTracked(context, TrustedChatVariables(), options.render));
  const std::vector<tokenizer::TextSegment> segments = ChatPromptSegments(render, suffix);
  return tok.EncodeSegments(segments, options.add_special);
}

}  // namespace tachyon::server
