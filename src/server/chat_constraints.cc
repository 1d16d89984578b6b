#include "server/chat_constraints.h"

#include <algorithm>

#include "server/tool_grammar.h"

namespace tachyon::server {
namespace {

using Mode = ToolChoice::Mode;
using GrammarPtr = std::shared_ptr<const grammar::CompiledGrammar>;

bool EndsWithIgnoringSpace(std::string_view text, std::string_view end) {
  while (!text.empty() && (text.back() == ' ' || text.back() == '\n' || text.back() == '\t' ||
                           text.back() == '\r')) {
    text.remove_suffix(1);
  }
  return text.size() >= end.size() && text.substr(text.size() - end.size()) == end;
}

ApiError ToolsError(const Status& s) {
  ApiError e = ApiErrorFromStatus(s);
  if (e.http_status == 400) {
    e.param = "tools";
    e.message = "Invalid value for 'tools': " + e.message;
  }
  return e;
}

ApiResult<GrammarPtr> Triggered(const GrammarPtr& inner, const std::string& trigger,
                                TriggerCache& triggers) {
  auto table = triggers.Get(trigger);
  if (!table.ok()) return ApiErrorFromStatus(table.status());
  return GrammarPtr(std::make_shared<TriggeredGrammar>(*table, inner, /*free_may_end=*/true));
}

}  // namespace

Result<std::shared_ptr<const TriggerTable>> TriggerCache::Get(const std::string& trigger) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = tables_.find(trigger); it != tables_.end()) return it->second;
  if (!bytes_) {
    auto bytes = std::make_shared<std::vector<std::string>>(
        static_cast<size_t>(std::max(0, backend_->Info().vocab_size)));
    for (size_t id = 0; id < bytes->size(); ++id) {
      (*bytes)[id] = backend_->TokenBytes(static_cast<int32_t>(id));
    }
    bytes_ = std::move(bytes);
  }
  ASSIGN_OR_RETURN(std::shared_ptr<const TriggerTable> table, TriggerTable::Build(bytes_, trigger));
  tables_.emplace(trigger, table);
  return table;
}

std::string DetectReasoningEnd(std::string_view chat_template) {
  return chat_template.find("</think>") != std::string_view::npos ? "</think>" : "";
}

ApiResult<ChatConstraintPlan> PlanChatConstraints(const ChatConstraintInputs& in,
                                                  const GenerationBackend& backend,
                                                  TriggerCache& triggers) {
  const ChatRequest& cr = *in.request;
  ChatConstraintPlan plan;
  plan.grammar = in.response_grammar;
  const Mode mode = cr.tool_choice.mode;
  const bool tools =
      !cr.tool_names.empty() && mode != Mode::kNone && in.format != ToolCallFormat::kNone;
  const bool forced = tools && (mode == Mode::kRequired || mode == Mode::kFunction);
  // tool_choice auto with a response_format: that grammar rules, the calls are parsed.
  const bool tool_grammar = tools && (forced || !plan.grammar);
  if (!plan.grammar && !tool_grammar) return plan;

  // A reasoning section first, unless the rendered prompt already closed it.
  if (!in.reasoning_end.empty()) {
    auto prompt = backend.ApplyChatTemplate(cr.template_context);
    if (!prompt.ok()) {
      ApiError e = ApiErrorFromStatus(prompt.status());
      if (e.http_status == 400) e.param = "messages";
      return e;
    }
    if (!EndsWithIgnoringSpace(*prompt, in.reasoning_end)) plan.reasoning_end = in.reasoning_end;
  }
  const bool reasoning = !plan.reasoning_end.empty();

  if (tool_grammar) {
    std::vector<ToolSchema> schemas;
    for (size_t i = 0; i < cr.tool_names.size(); ++i) {
      if (mode == Mode::kFunction && cr.tool_names[i] != cr.tool_choice.function) continue;
      schemas.push_back({cr.tool_names[i], cr.tool_parameters[i]});
    }
    const std::string trigger(ToolCallTrigger(in.format));
    // llama3 has no trigger before its opening: the opening is the trigger.
    const std::string auto_trigger =
        trigger.empty() ? std::string(ToolCallOpening(in.format)) : trigger;
    ToolGrammarStart start = ToolGrammarStart::kAtName;
    if (forced && reasoning) {
      start = ToolGrammarStart::kAtTrigger;
    } else if (!forced && !trigger.empty()) {
      start = ToolGrammarStart::kAfterTrigger;
    }
    // A named function is called once; otherwise parallel_tool_calls says.
    const bool parallel = cr.parallel_tool_calls && mode != Mode::kFunction;
    auto gbnf = ToolCallGrammar(in.format, schemas, parallel, start);
    if (!gbnf.ok()) return ToolsError(gbnf.status());
    grammar::ConstraintSpec spec;
    spec.kind = grammar::ConstraintSpec::Kind::kGbnf;
    spec.source = std::move(*gbnf);
    auto compiled = backend.CompileConstraint(spec);
    if (!compiled.ok()) return ToolsError(compiled.status());
    plan.tool_grammar = true;
    plan.grammar = std::move(*compiled);
    if (forced && !reasoning) {
      plan.prompt_suffix = ForcedToolCallPrefix(in.format, "");  // the grammar starts at the name
    } else {
      // The reply's text is read from the opening on: Mistral's [TOOL_CALLS] may be a control
      // token the detokenizer drops; hermes' <tool_call> stays in the text.
      plan.tool_trigger =
          in.format == ToolCallFormat::kHermes ? trigger : std::string(ToolCallOpening(in.format));
    }
    if (!forced) {
      auto g = Triggered(plan.grammar, auto_trigger, triggers);
      if (!g.ok()) return g.error();
      plan.grammar = std::move(g.value());
    }
  }
  if (reasoning) {
    auto g = Triggered(plan.grammar, plan.reasoning_end, triggers);
    if (!g.ok()) return g.error();
    plan.grammar = std::move(g.value());
  }
  return plan;
}

}  // namespace tachyon::server
