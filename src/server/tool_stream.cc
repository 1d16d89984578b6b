#include "server/tool_stream.h"

#include <algorithm>
#include <utility>

#include <nlohmann/json.hpp>

#include "server/json_limits.h"

namespace tachyon::server {
namespace {

constexpr std::string_view kNextName = "\"name\": \"";

// A JSON string's escaped body -> its text (the raw body when it does not parse).
std::string Unescape(const std::string& body) {
  nlohmann::json j = nlohmann::json::parse("\"" + body + "\"", nullptr, false);
  return j.is_string() ? j.get<std::string>() : body;
}

size_t TrailingSpace(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && IsJsonSpace(s[s.size() - 1 - n])) ++n;
  return n;
}

// Drops leading whitespace from `s` until a non-space byte has been seen (`begun`).
void SkipLeadingSpace(std::string& s, bool& begun) {
  if (begun) return;
  size_t i = 0;
  while (i < s.size() && IsJsonSpace(s[i])) ++i;
  s.erase(0, i);
  begun = !s.empty();
}

}  // namespace

ToolCallStream::ToolCallStream(std::string trigger, int max_calls)
    : trigger_(std::move(trigger)),
      max_calls_(max_calls),
      state_(trigger_.empty() ? State::kName : State::kContent) {}

void ToolCallStream::Delta(Output& out, std::string piece) {
  if (piece.empty() || calls_.empty() || skipping_) return;
  calls_.back().arguments += piece;
  const int index = static_cast<int>(calls_.size()) - 1;
  if (!out.deltas.empty() && out.deltas.back().index == index && !out.deltas.back().start) {
    out.deltas.back().arguments += piece;
  } else {
    out.deltas.push_back({index, false, "", "", std::move(piece)});
  }
}

void ToolCallStream::ReadCallByte(char c, Output& out, std::string& args) {
  switch (state_) {
    case State::kContent:
      break;
    case State::kName:
      if (escape_) {
        escape_ = false;
      } else if (c == '\\') {
        escape_ = true;
      } else if (c == '"') {
        skipping_ = max_calls_ > 0 && static_cast<int>(calls_.size()) >= max_calls_;
        if (!skipping_) {
          ToolCall call;
          call.id = NewToolCallId();
          call.name = Unescape(name_);
          out.deltas.push_back({static_cast<int>(calls_.size()), true, call.id, call.name, ""});
          calls_.push_back(std::move(call));
        }
        name_.clear();
        state_ = State::kToArgs;
        return;
      }
      name_ += c;
      return;
    case State::kToArgs:
      if (c != '{') return;
      state_ = State::kArgs;
      depth_ = 0;
      in_string_ = escape_ = false;
      [[fallthrough]];
    case State::kArgs:
      if (in_string_) {
        args += c;
        if (escape_) {
          escape_ = false;
        } else if (c == '\\') {
          escape_ = true;
        } else if (c == '"') {
          in_string_ = false;
        }
        return;
      }
      if (IsJsonSpace(c)) return;
      args += c;
      if (c == '"') {
        in_string_ = true;
      } else if (c == '{' || c == '[') {
        ++depth_;
      } else if ((c == '}' || c == ']') && --depth_ == 0) {
        Delta(out, std::exchange(args, {}));
        state_ = State::kBetween;
        between_.clear();
      }
      return;
    case State::kBetween:
      between_ += c;
      if (between_.size() > kNextName.size()) between_.erase(0, 1);
      if (between_ == kNextName) {
        state_ = State::kName;
        escape_ = false;
      }
      return;
  }
}

ToolCallStream::Output ToolCallStream::Push(std::string_view text) {
  Output out;
  std::string rest;
  if (state_ == State::kContent) {
    held_.append(text);
    const size_t pos = held_.find(trigger_);
    if (pos == std::string::npos) {
      const size_t keep = PartialMarker(held_, trigger_);
      out.content = held_.substr(0, held_.size() - keep);
      held_.erase(0, held_.size() - keep);
      return out;
    }
    out.content = held_.substr(0, pos);
    rest = held_.substr(pos + trigger_.size());
    held_.clear();
    // After the trigger: inside the first name (llama3's trigger is '{"name": "'), or before it.
    const bool at_name =
        trigger_.size() >= kNextName.size() &&
        trigger_.compare(trigger_.size() - kNextName.size(), kNextName.size(), kNextName) == 0;
    state_ = at_name ? State::kName : State::kBetween;
    between_.clear();
    escape_ = false;
    text = rest;
  }
  std::string args;  // argument bytes of the current call read in this Push
  for (char c : text) ReadCallByte(c, out, args);
  Delta(out, std::move(args));
  return out;
}

ToolCallStream::Output ToolCallStream::Finish() {
  Output out;
  if (state_ == State::kContent) out.content = std::exchange(held_, {});
  return out;
}

ReasoningSplit::ReasoningSplit(std::string end, std::string start)
    : end_(std::move(end)), start_(std::move(start)) {}

ReasoningSplit::Output ReasoningSplit::Push(std::string_view text) {
  Output out;
  if (in_answer_) {
    out.answer = text;
    SkipLeadingSpace(out.answer, answer_begun_);
    return out;
  }
  held_.append(text);
  if (!started_) {
    size_t i = 0;
    while (i < held_.size() && IsJsonSpace(held_[i])) ++i;
    std::string_view rest = std::string_view(held_).substr(i);
    if (rest.size() < start_.size() && start_.substr(0, rest.size()) == rest) {
      return out;  // perhaps the opening tag, still arriving
    }
    if (rest.substr(0, start_.size()) == start_) held_.erase(0, i + start_.size());
    started_ = true;
  }
  const size_t pos = held_.find(end_);
  if (pos != std::string::npos) {
    out.reasoning = held_.substr(0, pos);
    out.reasoning.resize(out.reasoning.size() - TrailingSpace(out.reasoning));
    out.answer = held_.substr(pos + end_.size());
    held_.clear();
    in_answer_ = true;
    SkipLeadingSpace(out.answer, answer_begun_);
  } else {
    // Held back: a partial end tag, and whitespace that may turn out to precede it.
    size_t keep = PartialMarker(held_, end_);
    keep += TrailingSpace(std::string_view(held_).substr(0, held_.size() - keep));
    out.reasoning = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
  }
  SkipLeadingSpace(out.reasoning, reasoning_begun_);
  return out;
}

ReasoningSplit::Output ReasoningSplit::Finish() {
  Output out;
  if (!in_answer_) {
    out.reasoning = std::exchange(held_, {});
    SkipLeadingSpace(out.reasoning, reasoning_begun_);
  }
  return out;
}

}  // namespace tachyon::server
