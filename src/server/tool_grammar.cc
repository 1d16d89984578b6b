#include "server/tool_grammar.h"

#include <chrono>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"

namespace tachyon::server {
namespace {

// The JSON whitespace policy of the arguments, as response_format's (grammar/compile.h).
constexpr int kArgumentsWhitespace = 2;
constexpr std::chrono::milliseconds kConversionBudget{100};

bool IsRuleChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

// Skips a quoted run ("..." or [...]) starting at i; returns the index past its end.
size_t SkipQuoted(std::string_view s, size_t i, char close) {
  for (++i; i < s.size(); ++i) {
    if (s[i] == '\\') {
      ++i;
    } else if (s[i] == close) {
      return i + 1;
    }
  }
  return s.size();
}

struct Syntax {
  std::string_view after_name;  // between the name and the arguments
  std::string_view close;       // after the arguments' closing brace
  std::string_view next;        // between two calls (parallel), up to the next name
  std::string_view end;         // after the last call
};

Syntax SyntaxOf(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return {"\", \"arguments\": ", "}\n</tool_call>", "\n<tool_call>\n{\"name\": \"", ""};
    case ToolCallFormat::kLlama3:
      return {"\", \"parameters\": ", "}", "; {\"name\": \"", ""};
    case ToolCallFormat::kMistral:
      return {"\", \"arguments\": ", "}", ", {\"name\": \"", "]"};
    case ToolCallFormat::kNone:
      break;
  }
  return {};
}

}  // namespace

std::string_view ToolCallTrigger(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return "<tool_call>";
    case ToolCallFormat::kMistral:
      return "[TOOL_CALLS]";
    case ToolCallFormat::kLlama3:
    case ToolCallFormat::kNone:
      break;
  }
  return "";
}

std::string_view ToolCallOpening(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return "\n{\"name\": \"";
    case ToolCallFormat::kLlama3:
      return "{\"name\": \"";
    case ToolCallFormat::kMistral:
      return "[{\"name\": \"";
    case ToolCallFormat::kNone:
      break;
  }
  return "";
}

std::string PrefixGbnfRules(std::string_view gbnf, std::string_view prefix) {
  std::string out;
  out.reserve(gbnf.size() + gbnf.size() / 4);
  size_t i = 0;
  while (i < gbnf.size()) {
    const char c = gbnf[i];
    size_t end = i + 1;
    if (c == '"') {
      end = SkipQuoted(gbnf, i, '"');
    } else if (c == '[') {
      end = SkipQuoted(gbnf, i, ']');
    } else if (c == '{') {
      end = gbnf.find('}', i);
      end = end == std::string_view::npos ? gbnf.size() : end + 1;
    } else if (c == '#') {
      end = gbnf.find('\n', i);
      if (end == std::string_view::npos) end = gbnf.size();
    } else if (IsRuleChar(c)) {
      while (end < gbnf.size() && IsRuleChar(gbnf[end])) ++end;
      out += prefix;
    }
    out.append(gbnf.substr(i, end - i));
    i = end;
  }
  return out;
}

std::string GbnfLiteral(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02X", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

Result<std::string> ToolCallGrammar(ToolCallFormat format, std::span<const ToolSchema> tools,
                                    bool parallel, ToolGrammarStart start) {
  if (format == ToolCallFormat::kNone) return InvalidArgument("no tool-call format");
  if (tools.empty()) return InvalidArgument("no tools to call");
  const Syntax syn = SyntaxOf(format);
  grammar::JsonSchemaOptions jo;
  jo.max_whitespace = kArgumentsWhitespace;
  jo.deadline = std::chrono::steady_clock::now() + kConversionBudget;
  std::string rules;
  std::string call = "call ::=";
  for (size_t i = 0; i < tools.size(); ++i) {
    const ToolSchema& t = tools[i];
    const std::string prefix = "t" + std::to_string(i) + "-";
    std::string args;
    if (t.parameters.empty()) {
      args = grammar::JsonObjectGbnf(jo);
    } else {
      auto converted = grammar::JsonSchemaToGbnf(t.parameters, jo);
      if (!converted.ok()) {
        return InvalidArgument("the parameters of function '" + t.name + "' (tools[" +
                               std::to_string(i) + "]): " + converted.status().message());
      }
      args = std::move(*converted);
    }
    rules += PrefixGbnfRules(args, prefix) + "\n";
    // The name inside a JSON string, escaped as JSON writes it.
    std::string name =
        nlohmann::json(t.name).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    name = name.substr(1, name.size() - 2);
    call += std::string(i == 0 ? " " : " | ") + GbnfLiteral(name + std::string(syn.after_name)) +
            " " + prefix + "root " + GbnfLiteral(syn.close);
  }
  std::string root = "root ::=";
  if (start == ToolGrammarStart::kAtTrigger && !ToolCallTrigger(format).empty()) {
    root += " " + GbnfLiteral(ToolCallTrigger(format));
  }
  if (start != ToolGrammarStart::kAtName) root += " " + GbnfLiteral(ToolCallOpening(format));
  root += " call";
  if (parallel) root += " (" + GbnfLiteral(syn.next) + " call)*";
  if (!syn.end.empty()) root += " " + GbnfLiteral(syn.end);
  return root + "\n" + call + "\n" + rules;
}

}  // namespace tachyon::server
