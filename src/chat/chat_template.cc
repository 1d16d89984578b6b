#include "chat/chat_template.h"

#include "chat/ast.h"
#include "chat/evaluator.h"
#include "chat/parser.h"

namespace tachyon::chat {

Result<ChatTemplate> ChatTemplate::Parse(std::string_view source) {
  ASSIGN_OR_RETURN(std::unique_ptr<Program> program, ParseTemplate(source));
  return ChatTemplate(std::shared_ptr<const Program>(std::move(program)));
}

const std::string& ChatTemplate::source() const {
  return program_->source;
}

namespace {
template <typename Json>
Result<std::string> RenderJson(const Program& program, const Json& context,
                               const RenderOptions& options) {
  if (!context.is_object()) return InvalidArgument("chat template context must be a JSON object");
  ASSIGN_OR_RETURN(Value ctx, FromJson(context));
  Renderer renderer(program, options);
  return renderer.Render(ctx);
}
}  // namespace

Result<std::string> ChatTemplate::Render(const nlohmann::ordered_json& context,
                                         const RenderOptions& options) const {
  return RenderJson(*program_, context, options);
}

Result<std::string> ChatTemplate::Render(const nlohmann::json& context,
                                         const RenderOptions& options) const {
  return RenderJson(*program_, context, options);
}

nlohmann::ordered_json MakeChatContext(const nlohmann::ordered_json& messages,
                                       const nlohmann::ordered_json& tools,
                                       bool add_generation_prompt, std::string_view bos_token,
                                       std::string_view eos_token,
                                       const nlohmann::ordered_json& extra_kwargs) {
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  ctx["messages"] = messages;
  ctx["tools"] = tools;
  ctx["documents"] = nullptr;
  ctx["add_generation_prompt"] = add_generation_prompt;
  ctx["bos_token"] = std::string(bos_token);
  ctx["eos_token"] = std::string(eos_token);
  if (extra_kwargs.is_object()) {
    for (auto it = extra_kwargs.begin(); it != extra_kwargs.end(); ++it) ctx[it.key()] = it.value();
  }
  return ctx;
}

}  // namespace tachyon::chat
