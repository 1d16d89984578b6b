// Tool calls: turning a model's generated text into OpenAI `message.tool_calls`.
//
// Formats (chosen from the chat template text, or by `tachyon serve --tool-call-parser`):
//   hermes   Hermes 2 Pro / 3, Qwen2.5, Qwen3 and friends:
//              <tool_call>{"name": "f", "arguments": {...}}</tool_call>   (one block per call)
//   llama3   Llama 3.1 / 3.2 JSON tool calling: the whole reply is
//              [<|python_tag|>]{"name": "f", "parameters": {...}}   (several joined by ';')
//   mistral  [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]   or, newer tokenizers,
//              [TOOL_CALLS]f[ARGS]{...}   (repeated per call)
//
// ToolCallParser works on the text as it streams in. It releases ordinary content as soon as it
// cannot be the start of a call (a partial marker at the end of a chunk is held back), buffers a
// call until it is complete, and then releases it as a ToolCall. A call whose JSON is malformed
// is released as content, verbatim. Parsing a whole text at once (ParseToolCalls) runs the same
// machine, so streamed and non-streamed answers agree.
// Not thread-safe (one parser per choice); the free functions are pure.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace tachyon::server {

enum class ToolCallFormat { kNone, kHermes, kLlama3, kMistral };

// "none", "hermes", "llama3", "mistral".
std::string_view ToolCallFormatName(ToolCallFormat format);
// Parses a --tool-call-parser value (the names above); InvalidArgument otherwise.
Result<ToolCallFormat> ParseToolCallFormat(std::string_view name);
// The format a chat template teaches its model, from markers in the template text; kNone when
// the template shows no known tool-call syntax.
ToolCallFormat DetectToolCallFormat(std::string_view chat_template);

struct ToolCall {
  std::string id;         // "call_" + 24 hex digits, unique per call
  std::string name;       // function name
  std::string arguments;  // a JSON object, serialized compactly
};

// A fresh call id: "call_" + 24 hex digits, unique per call. Thread-safe.
std::string NewToolCallId();

// Length of the longest suffix of `s` that is a proper prefix of `marker` (a marker that may
// be completed by the next chunk of text); 0 for an empty marker.
size_t PartialMarker(std::string_view s, std::string_view marker);

// Text that, appended to the rendered prompt, starts a tool call in `format`: a call to
// `function` (its arguments object opened) or, with `function` empty, to any function.
// Empty for kNone.
std::string ForcedToolCallPrefix(ToolCallFormat format, std::string_view function);

class ToolCallParser {
 public:
  // `max_calls` > 0 keeps only that many calls (parallel_tool_calls = false is 1); later calls
  // are dropped.
  explicit ToolCallParser(ToolCallFormat format, int max_calls = 0);

  struct Output {
    std::string content;          // content released now
    std::vector<ToolCall> calls;  // calls completed now
  };
  // Feeds more generated text.
  Output Push(std::string_view text);
  // The end of the generation: releases everything still held.
  Output Finish();

  int num_calls() const { return num_calls_; }

 private:
  enum class Mode { kStart, kContent, kCall };
  void Process(bool final, Output& out);
  bool ProcessStart(bool final);
  bool ProcessContent(bool final, Output& out);
  bool ProcessCall(bool final, Output& out);
  // Parses one buffered call region (markers included); false: not a valid call.
  bool ParseRegion(std::string_view region, std::vector<ToolCall>& calls) const;
  void Emit(std::vector<ToolCall>& calls, Output& out);

  ToolCallFormat format_;
  int max_calls_;
  Mode mode_ = Mode::kStart;
  std::string buf_;  // text not released yet
  int num_calls_ = 0;
};

// The whole text at once: the content (empty when there is none) and the calls.
ToolCallParser::Output ParseToolCalls(ToolCallFormat format, std::string_view text,
                                      int max_calls = 0);

}  // namespace tachyon::server
