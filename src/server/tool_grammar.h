// Tool-call grammars: what a model may generate when its reply must be (or, once opened, must
// continue as) tool calls in its format's syntax, each call naming one of the request's
// functions with arguments valid under that function's `parameters` JSON Schema
// (grammar/json_schema.h: exact or tighter, never looser).
//
// A call in each format is TRIGGER OPENING NAME AFTER_NAME ARGUMENTS CLOSE:
//   hermes   "<tool_call>" "\n{\"name\": \"" f "\", \"arguments\": " {...} "}\n</tool_call>"
//   llama3   ""            "{\"name\": \""   f "\", \"parameters\": " {...} "}"
//   mistral  "[TOOL_CALLS]" "[{\"name\": \"" f "\", \"arguments\": " {...} "}"   then "]"
// ForcedToolCallPrefix(format, "") (server/tool_calls.h) is TRIGGER OPENING. With `parallel`,
// further calls may follow (hermes: "\n" and another block; llama3: "; " and another object;
// mistral: ", " and another object inside the array); without it there is exactly one call.
// Pure and thread-safe.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "server/tool_calls.h"
#include "util/status.h"

namespace tachyon::server {

struct ToolSchema {
  std::string name;
  std::string parameters;  // JSON Schema text of the arguments; "" = any JSON object
};

// Where the grammar's text starts.
enum class ToolGrammarStart {
  kAtName,        // after ForcedToolCallPrefix(format, ""): the prompt opened the first call
  kAfterTrigger,  // after the format's trigger (tool_choice auto: the model opened a call)
  kAtTrigger,     // the whole reply (after a reasoning section): the trigger first
};

// The text that opens a call in `format` ("" for llama3, whose calls start with OPENING).
std::string_view ToolCallTrigger(ToolCallFormat format);
// The text after the trigger up to the first function name.
std::string_view ToolCallOpening(ToolCallFormat format);

// GBNF text (root rule `root`). Errors: InvalidArgument from the schema conversion (naming the
// keyword and its JSON pointer) prefixed with the function's name and index; InvalidArgument
// for kNone or no tools.
Result<std::string> ToolCallGrammar(ToolCallFormat format, std::span<const ToolSchema> tools,
                                    bool parallel, ToolGrammarStart start);

// `gbnf` with every rule name prefixed by `prefix` (definitions and references alike; string
// literals, character classes, repetition counts and comments untouched).
std::string PrefixGbnfRules(std::string_view gbnf, std::string_view prefix);

// `text` as a GBNF string literal, quotes included.
std::string GbnfLiteral(std::string_view text);

}  // namespace tachyon::server
