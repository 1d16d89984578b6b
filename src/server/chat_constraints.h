// The output constraint of a chat request, planned at the edge: response_format's grammar, the
// tool-call grammar tool_choice asks for, and a reasoning section before either.
//
//   tool_choice "required" / a function   the reply is tool calls (server/tool_grammar.h): the
//                                         prompt opens the first call (ForcedToolCallPrefix)
//                                         and the grammar forces a name among the allowed
//                                         functions and arguments valid under its schema;
//                                         a named function or parallel_tool_calls false:
//                                         exactly one call
//   tool_choice "auto"                    free text; once the model writes the format's trigger
//                                         ("<tool_call>", "[TOOL_CALLS]", llama3: '{"name": "')
//                                         the calls follow the grammar (TriggeredGrammar).
//                                         With a response_format, that grammar applies instead
//                                         and the calls are parsed from free text
//   reasoning                             with ApiOptions::reasoning_end set (a template that
//                                         writes "</think>") and a rendered prompt that does not
//                                         already end the reasoning (e.g. Qwen3's
//                                         enable_thinking false does), a constrained reply is
//                                         free until the reasoning end, then constrained; the
//                                         reasoning is answered apart (reasoning_content)
// Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "server/backend.h"
#include "server/protocol.h"
#include "server/tool_calls.h"
#include "server/triggered_grammar.h"

namespace tachyon::server {

// TriggerTables of one backend's vocabulary, built on first use and kept. Thread-safe.
class TriggerCache {
 public:
  // `backend` must outlive this object.
  explicit TriggerCache(const GenerationBackend* backend) : backend_(backend) {}
  Result<std::shared_ptr<const TriggerTable>> Get(const std::string& trigger);

 private:
  const GenerationBackend* backend_;
  std::mutex mu_;
  std::shared_ptr<const std::vector<std::string>> bytes_;              // GUARDED_BY(mu_)
  std::map<std::string, std::shared_ptr<const TriggerTable>> tables_;  // GUARDED_BY(mu_)
};

struct ChatConstraintPlan {
  std::shared_ptr<const grammar::CompiledGrammar> grammar;  // null: unconstrained
  std::string prompt_suffix;  // appended to the rendered prompt (a forced call's opening)
  bool tool_grammar = false;  // the calls follow a tool grammar (JobSpec::tool_grammar)
  std::string tool_trigger;   // JobSpec::tool_trigger
  std::string reasoning_end;  // JobSpec::reasoning_end
};

struct ChatConstraintInputs {
  const ChatRequest* request;
  // response_format & co., compiled (null: none).
  std::shared_ptr<const grammar::CompiledGrammar> response_grammar;
  ToolCallFormat format = ToolCallFormat::kNone;
  std::string reasoning_end;  // ApiOptions::reasoning_end
};

// Errors: 400 naming "tools" (a parameters schema the converter refuses, by keyword) or
// "tool_choice"; what the backend's compiler or template rendering returns otherwise.
ApiResult<ChatConstraintPlan> PlanChatConstraints(const ChatConstraintInputs& in,
                                                  const GenerationBackend& backend,
                                                  TriggerCache& triggers);

// "</think>" when the chat template writes one (a reasoning model), else "".
std::string DetectReasoningEnd(std::string_view chat_template);

}  // namespace tachyon::server
