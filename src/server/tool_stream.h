// ToolCallStream: the reply of a chat request whose tool calls are constrained by a tool-call
// grammar (server/tool_grammar.h), read as the text streams in: ordinary content, then each
// call's id and name and its arguments as they are generated (OpenAI's incremental tool-call
// deltas). ReasoningSplit: the reasoning section of a reply (before "</think>") apart from the
// answer.
//
// ToolCallStream reads, per call, NAME '"' ... '{' ARGUMENTS '}' and, for further calls,
// '"name": "' NAME ... again. Forced (no trigger) it starts inside the first call's name (right
// after ForcedToolCallPrefix(format, "")); with a trigger it releases content until the
// trigger appears (a partial trigger at the end of a chunk is held back) and reads calls after
// it. Arguments are released minified (whitespace outside strings dropped), so a call's
// argument deltas concatenate to its `arguments` in calls(), however the text is split. The
// grammar guarantees the syntax; a reply cut short (max_tokens) ends where it stops.
// Not thread-safe (one per choice).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/tool_calls.h"

namespace tachyon::server {

struct ToolCallDelta {
  int index = 0;       // the call's index in the reply
  bool start = false;  // the call's first delta: id and name are set, arguments empty
  std::string id;
  std::string name;
  std::string arguments;  // the next piece of the arguments
};

class ToolCallStream {
 public:
  // `trigger` "": the text starts inside the first call's name. `max_calls` > 0: calls past
  // that many are not reported.
  explicit ToolCallStream(std::string trigger = "", int max_calls = 0);

  struct Output {
    std::string content;                // content released now
    std::vector<ToolCallDelta> deltas;  // call deltas, in order (a start before its arguments)
  };
  Output Push(std::string_view text);
  // The end of the reply: releases a held-back partial trigger as content.
  Output Finish();

  // The calls started so far, arguments as released (complete once the call has closed).
  const std::vector<ToolCall>& calls() const { return calls_; }

 private:
  enum class State { kContent, kName, kToArgs, kArgs, kBetween };
  void Delta(Output& out, std::string piece);
  void ReadCallByte(char c, Output& out, std::string& args);

  std::string trigger_;
  int max_calls_;
  State state_;
  std::string held_;        // kContent: a possible partial trigger
  std::string name_;        // kName: the raw (escaped) name so far
  bool escape_ = false;     // the previous byte was a backslash inside a string
  bool in_string_ = false;  // kArgs: inside a JSON string
  int depth_ = 0;           // kArgs: nesting depth of the arguments
  std::string between_;     // kBetween: the last bytes since a call (to find the next name)
  bool skipping_ = false;   // the current call is past max_calls
  std::vector<ToolCall> calls_;
};

// Splits "<think>REASONING</think>ANSWER" as it streams: text up to `end` (a leading "<think>"
// and the whitespace around the reasoning dropped) is reasoning, the rest (leading whitespace
// dropped) the answer. A reply that never writes `end` is all reasoning.
class ReasoningSplit {
 public:
  explicit ReasoningSplit(std::string end = "</think>", std::string start = "<think>");
  struct Output {
    std::string reasoning;
    std::string answer;
  };
  Output Push(std::string_view text);
  Output Finish();
  bool in_answer() const { return in_answer_; }

 private:
  std::string end_, start_;
  std::string held_;      // reasoning not released yet: a possible partial `end`, or trailing space
  bool started_ = false;  // past the leading "<think>" (or sure there is none)
  bool in_answer_ = false;        // `end` seen
  bool reasoning_begun_ = false;  // the reasoning's first non-space byte seen
  bool answer_begun_ = false;     // the answer's first non-space byte seen
};

}  // namespace tachyon::server
