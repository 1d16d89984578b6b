#include "chat/chat_template.h"

#include <algorithm>

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
  ASSIGN_OR_RETURN(TrackedText out, renderer.Render(ctx));
  return out.TakeText();
}
}  // namespace

namespace {

using Path = std::vector<std::string_view>;

// `j` as a Value whose strings are client data except below the trusted `paths` (each the
// rest of a trusted path from this node).
Result<Value> FromJsonTrusting(const nlohmann::ordered_json& j, const std::vector<Path>& paths) {
  for (const Path& p : paths) {
    if (p.empty()) return FromJson(j, /*client=*/false);
  }
  if (paths.empty() || !(j.is_object() || j.is_array())) return FromJson(j, /*client=*/true);
  auto rest = [&](std::string_view name) {
    std::vector<Path> out;
    for (const Path& p : paths) {
      if (p[0] == "*" || p[0] == name) out.emplace_back(p.begin() + 1, p.end());
    }
    return out;
  };
  if (j.is_array()) {
    std::vector<Value> items;
    for (size_t i = 0; i < j.size(); ++i) {
      ASSIGN_OR_RETURN(Value v, FromJsonTrusting(j[i], rest(std::to_string(i))));
      items.push_back(std::move(v));
    }
    return Value::List(std::move(items));
  }
  std::vector<std::pair<Value, Value>> items;
  for (auto it = j.begin(); it != j.end(); ++it) {
    ASSIGN_OR_RETURN(Value v, FromJsonTrusting(it.value(), rest(it.key())));
    ASSIGN_OR_RETURN(Value key, FromJson(nlohmann::ordered_json(it.key()), /*client=*/true));
    items.emplace_back(std::move(key), std::move(v));
  }
  return Value::Dict(std::move(items));
}

}  // namespace

Result<TrackedRender> ChatTemplate::RenderTracked(const nlohmann::ordered_json& context,
                                                  const std::vector<std::string>& trusted,
                                                  const RenderOptions& options) const {
  if (!context.is_object()) return InvalidArgument("chat template context must be a JSON object");
  std::vector<Path> paths;
  for (const std::string& t : trusted) {
    Path p;
    size_t pos = 0;
    while (pos < t.size()) {
      if (t[pos] == '/') ++pos;
      const size_t end = std::min(t.find('/', pos), t.size());
      p.push_back(std::string_view(t).substr(pos, end - pos));
      pos = end;
    }
    if (p.empty()) return InvalidArgument("empty trusted path");
    paths.push_back(std::move(p));
  }
  std::vector<std::pair<Value, Value>> vars;
  for (auto it = context.begin(); it != context.end(); ++it) {
    std::vector<Path> rest;
    for (const Path& p : paths) {
      if (p[0] == "*" || p[0] == it.key()) rest.emplace_back(p.begin() + 1, p.end());
    }
    ASSIGN_OR_RETURN(Value v, FromJsonTrusting(it.value(), rest));
    vars.emplace_back(Value(it.key()), std::move(v));
  }
  Renderer renderer(*program_, options);
  ASSIGN_OR_RETURN(TrackedText out, renderer.Render(Value::Dict(std::move(vars))));
  TrackedRender result;
  for (const Span& s : out.spans()) result.client_spans.emplace_back(s.begin, s.end);
  result.text = out.TakeText();
  return result;
}

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
