#include "server/tool_calls.h"

#include <atomic>
#include <cstdio>
#include <random>

#include <nlohmann/json.hpp>

#include "server/json_limits.h"

namespace tachyon::server {

using nlohmann::json;

namespace {

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kMistralCalls = "[TOOL_CALLS]";
constexpr std::string_view kMistralArgs = "[ARGS]";

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsJsonSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsJsonSpace(s.back())) s.remove_suffix(1);
  return s;
}

bool AllSpace(std::string_view s) {
  for (char c : s) {
    if (!IsJsonSpace(c)) return false;
  }
  return true;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// {"name": "f", "arguments"|"parameters": {...} or "json text"} -> a call.
std::optional<ToolCall> CallFromJson(const json& j) {
  if (!j.is_object()) return std::nullopt;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty()) {
    return std::nullopt;
  }
  ToolCall call;
  call.name = name->get<std::string>();
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  if (args == j.end() || args->is_null()) {
    call.arguments = "{}";
  } else if (args->is_object()) {
    call.arguments = args->dump(-1, ' ', false, json::error_handler_t::replace);
  } else if (args->is_string()) {
    // Some models emit the arguments as a JSON string; keep it when it holds an object.
    std::optional<json> inner = ParseBoundedJson(args->get_ref<const std::string&>());
    if (!inner || !inner->is_object()) return std::nullopt;
    call.arguments = inner->dump(-1, ' ', false, json::error_handler_t::replace);
  } else {
    return std::nullopt;
  }
  return call;
}

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

// Length of the leading function name (name characters) of `s`.
size_t NameLength(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && IsNameChar(s[n])) ++n;
  return n;
}

// Where the JSON object starting at s[0] == '{' ends (one past its '}'), or npos.
size_t JsonObjectEnd(std::string_view s) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

// Model output is client-influenced: parsed with the same depth and size bounds as a body
// (a value over them is not a call), so dump() below never recurses deeper than kMaxJsonDepth.
json ParseJson(std::string_view text) {
  std::optional<json> j = ParseBoundedJson(text);
  return j ? std::move(*j) : json(json::value_t::discarded);
}

// One object or an array of objects -> calls; false if any is not a call.
bool CallsFromJson(const json& j, std::vector<ToolCall>& calls) {
  if (j.is_discarded()) return false;
  if (j.is_array()) {
    if (j.empty()) return false;
    for (const json& item : j) {
      auto call = CallFromJson(item);
      if (!call) return false;
      calls.push_back(std::move(*call));
    }
    return true;
  }
  auto call = CallFromJson(j);
  if (!call) return false;
  calls.push_back(std::move(*call));
  return true;
}

}  // namespace

std::string NewToolCallId() {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng{std::random_device{}()};
  uint64_t a = rng() ^ (counter.fetch_add(1) * 0x9e3779b97f4a7c15ULL);
  uint64_t b = rng();
  char buf[32];
  std::snprintf(buf, sizeof(buf), "call_%016llx%08llx", static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b & 0xffffffffULL));
  return buf;
}

std::string_view ToolCallFormatName(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return "hermes";
    case ToolCallFormat::kLlama3:
      return "llama3";
    case ToolCallFormat::kMistral:
      return "mistral";
    case ToolCallFormat::kNone:
      break;
  }
  return "none";
}

Result<ToolCallFormat> ParseToolCallFormat(std::string_view name) {
  for (ToolCallFormat f : {ToolCallFormat::kNone, ToolCallFormat::kHermes, ToolCallFormat::kLlama3,
                           ToolCallFormat::kMistral}) {
    if (name == ToolCallFormatName(f)) return f;
  }
  return InvalidArgument("unknown tool-call parser '" + std::string(name) +
                         "' (expected hermes, llama3, mistral or none)");
}

ToolCallFormat DetectToolCallFormat(std::string_view t) {
  auto has = [&](std::string_view s) { return t.find(s) != std::string_view::npos; };
  if (has(kHermesOpen)) return ToolCallFormat::kHermes;
  if (has(kMistralCalls)) return ToolCallFormat::kMistral;
  if (has("<|start_header_id|>") && (has(kPythonTag) || has("\"parameters\""))) {
    return ToolCallFormat::kLlama3;
  }
  return ToolCallFormat::kNone;
}

std::string ForcedToolCallPrefix(ToolCallFormat format, std::string_view function) {
  std::string name = json(std::string(function)).dump();  // quoted and escaped
  switch (format) {
    case ToolCallFormat::kHermes:
      return function.empty() ? "<tool_call>\n{\"name\": \""
                              : "<tool_call>\n{\"name\": " + name + ", \"arguments\": {";
    case ToolCallFormat::kLlama3:
      return function.empty() ? "{\"name\": \"" : "{\"name\": " + name + ", \"parameters\": {";
    case ToolCallFormat::kMistral:
      return function.empty() ? "[TOOL_CALLS][{\"name\": \""
                              : "[TOOL_CALLS][{\"name\": " + name + ", \"arguments\": {";
    case ToolCallFormat::kNone:
      break;
  }
  return "";
}

ToolCallParser::ToolCallParser(ToolCallFormat format, int max_calls)
    : format_(format), max_calls_(max_calls) {
  if (format_ == ToolCallFormat::kNone) mode_ = Mode::kContent;
}

ToolCallParser::Output ToolCallParser::Push(std::string_view text) {
  Output out;
  buf_.append(text);
  Process(/*final=*/false, out);
  return out;
}

ToolCallParser::Output ToolCallParser::Finish() {
  Output out;
  Process(/*final=*/true, out);
  return out;
}

void ToolCallParser::Process(bool final, Output& out) {
  bool progress = true;
  while (progress) {
    switch (mode_) {
      case Mode::kStart:
        progress = ProcessStart(final);
        break;
      case Mode::kContent:
        progress = ProcessContent(final, out);
        break;
      case Mode::kCall:
        progress = ProcessCall(final, out);
        break;
    }
  }
}

// At the start of the reply: Llama 3 and Mistral may begin with a bare JSON call.
bool ToolCallParser::ProcessStart(bool final) {
  std::string_view rest = Trim(buf_);
  if (rest.empty() && !final) return false;  // only whitespace so far: wait
  if (format_ == ToolCallFormat::kLlama3) {
    if (StartsWith(rest, kPythonTag) || StartsWith(rest, "{")) {
      mode_ = Mode::kCall;
      return true;
    }
    if (!final && StartsWith(kPythonTag, rest)) return false;  // a partial <|python_tag|>
  }
  // Mistral without its [TOOL_CALLS] / [ARGS] markers in the text (control tokens a
  // detokenizer drops): a reply that starts as a JSON array of objects, or as name{...}.
  if (format_ == ToolCallFormat::kMistral && StartsWith(rest, "[") &&
      !StartsWith(rest, kMistralCalls)) {
    std::string_view after = Trim(rest.substr(1));
    if (StartsWith(after, "{")) {
      mode_ = Mode::kCall;
      return true;
    }
    if (after.empty() && !final) return false;
  }
  if (format_ == ToolCallFormat::kMistral && !rest.empty() && IsNameChar(rest[0])) {
    size_t n = NameLength(rest);
    if (n == rest.size() && !final) return false;  // the name may go on
    if (n < rest.size() && rest[n] == '{') {
      mode_ = Mode::kCall;
      return true;
    }
  }
  mode_ = Mode::kContent;
  return true;
}

bool ToolCallParser::ProcessContent(bool final, Output& out) {
  std::string_view marker = format_ == ToolCallFormat::kHermes    ? kHermesOpen
                            : format_ == ToolCallFormat::kMistral ? kMistralCalls
                                                                  : std::string_view();
  size_t pos = marker.empty() ? std::string::npos : buf_.find(marker);
  size_t release = buf_.size();
  if (pos != std::string::npos) {
    release = pos;
  } else if (!final && !marker.empty()) {
    release -= PartialMarker(buf_, marker);
  }
  std::string_view text(buf_.data(), release);
  // Whitespace between or after calls is not content.
  bool drop = num_calls_ > 0 && AllSpace(text);
  if (drop && pos == std::string::npos && !final) return false;  // wait: more may follow
  if (!drop) out.content.append(text);
  buf_.erase(0, release);
  if (pos == std::string::npos) return false;
  mode_ = Mode::kCall;
  return true;
}

bool ToolCallParser::ProcessCall(bool final, Output& out) {
  size_t end = std::string::npos;
  if (format_ == ToolCallFormat::kHermes) {
    size_t close = buf_.find(kHermesClose);
    if (close != std::string::npos) end = close + kHermesClose.size();
  }
  if (end == std::string::npos) {
    if (!final) return false;  // the call is still being generated
    end = buf_.size();
  }
  std::vector<ToolCall> calls;
  std::string_view region(buf_.data(), end);
  if (ParseRegion(region, calls)) {
    Emit(calls, out);
  } else {
    out.content.append(region);  // not a call after all: the model's text, verbatim
  }
  buf_.erase(0, end);
  mode_ = Mode::kContent;
  return !buf_.empty() || final;
}

bool ToolCallParser::ParseRegion(std::string_view region, std::vector<ToolCall>& calls) const {
  std::string_view body = Trim(region);
  switch (format_) {
    case ToolCallFormat::kHermes: {
      body.remove_prefix(kHermesOpen.size());
      if (body.size() >= kHermesClose.size() &&
          body.substr(body.size() - kHermesClose.size()) == kHermesClose) {
        body.remove_suffix(kHermesClose.size());
      }
      return CallsFromJson(ParseJson(Trim(body)), calls);
    }
    case ToolCallFormat::kLlama3: {
      if (StartsWith(body, kPythonTag)) body = Trim(body.substr(kPythonTag.size()));
      if (CallsFromJson(ParseJson(body), calls)) return true;
      // Several calls joined by ';'.
      calls.clear();
      size_t start = 0;
      while (start <= body.size()) {
        size_t semi = body.find(';', start);
        std::string_view part =
            Trim(body.substr(start, semi == std::string::npos ? std::string::npos : semi - start));
        if (!part.empty() && !CallsFromJson(ParseJson(part), calls)) return false;
        if (semi == std::string::npos) break;
        start = semi + 1;
      }
      return !calls.empty();
    }
    case ToolCallFormat::kMistral: {
      if (StartsWith(body, kMistralCalls)) body = Trim(body.substr(kMistralCalls.size()));
      if (StartsWith(body, "[")) return CallsFromJson(ParseJson(body), calls);
      if (body.find(kMistralArgs) == std::string_view::npos) {
        // Markers dropped: name{...}name{...}.
        while (!body.empty()) {
          size_t n = NameLength(body);
          if (n == 0 || n >= body.size() || body[n] != '{') return false;
          size_t end = JsonObjectEnd(body.substr(n));
          if (end == std::string_view::npos) return false;
          json arguments = ParseJson(body.substr(n, end));
          if (!arguments.is_object()) return false;
          calls.push_back({"", std::string(body.substr(0, n)),
                           arguments.dump(-1, ' ', false, json::error_handler_t::replace)});
          body = Trim(body.substr(n + end));
        }
        return !calls.empty();
      }
      // name[ARGS]{...}, repeated with [TOOL_CALLS] before each further call.
      while (!body.empty()) {
        size_t args = body.find(kMistralArgs);
        if (args == std::string_view::npos) return false;
        std::string name(Trim(body.substr(0, args)));
        body.remove_prefix(args + kMistralArgs.size());
        size_t next = body.find(kMistralCalls);
        json arguments = ParseJson(Trim(body.substr(0, next)));
        if (name.empty() || !arguments.is_object()) return false;
        calls.push_back({"", name, arguments.dump(-1, ' ', false, json::error_handler_t::replace)});
        if (next == std::string_view::npos) break;
        body = Trim(body.substr(next + kMistralCalls.size()));
      }
      return !calls.empty();
    }
    case ToolCallFormat::kNone:
      break;
  }
  return false;
}

void ToolCallParser::Emit(std::vector<ToolCall>& calls, Output& out) {
  for (ToolCall& call : calls) {
    if (max_calls_ > 0 && num_calls_ >= max_calls_) break;
    call.id = NewToolCallId();
    out.calls.push_back(std::move(call));
    ++num_calls_;
  }
}

ToolCallParser::Output ParseToolCalls(ToolCallFormat format, std::string_view text, int max_calls) {
  ToolCallParser parser(format, max_calls);
  ToolCallParser::Output out = parser.Push(text);
  ToolCallParser::Output rest = parser.Finish();
  out.content += rest.content;
  for (ToolCall& c : rest.calls) out.calls.push_back(std::move(c));
  return out;
}

size_t PartialMarker(std::string_view s, std::string_view marker) {
  if (marker.empty()) return 0;
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n) {
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace tachyon::server
