// Chat templates: a sandboxed Jinja2 interpreter that renders a model's chat template the
// way Hugging Face transformers' apply_chat_template does (ImmutableSandboxedEnvironment,
// trim_blocks, lstrip_blocks, lenient Undefined, loop controls, {% generation %}, the
// transformers tojson filter, raise_exception / strftime_now globals).
//
// Usage:
//   ASSIGN_OR_RETURN(ChatTemplate tmpl, ChatTemplate::Parse(source));   // once per model
//   nlohmann::ordered_json ctx = MakeChatContext(messages, tools, true, bos, eos, extra);
//   ASSIGN_OR_RETURN(std::string prompt, tmpl.Render(ctx));             // per request
//
// Key order matters (tojson prints dicts in insertion order, as Python does): parse request
// JSON with nlohmann::ordered_json. A nlohmann::json overload exists but its objects come
// back with sorted keys.
//
// Errors: every failure is a Status (InvalidArgument) whose message says what went wrong.
// A template's raise_exception(msg) yields exactly `msg` as the message. Hostile templates
// are bounded by RenderLimits (recursion depth, total loop iterations / macro calls, output
// and value sizes) and fail with ResourceExhausted instead of hanging or exhausting memory.
//
// Thread-safety: ChatTemplate is immutable after Parse; Render is const and may be called
// concurrently from many threads. Copies share the parsed program.
#pragma once

#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace tachyon::gguf {
class GgufFile;
}

namespace tachyon::chat {

struct Program;  // the parsed template (chat/ast.h)

struct RenderLimits {
  int max_call_depth = 200;             // nested macro / caller / recursive-loop calls
  int64_t max_steps = 2'000'000;        // loop iterations + macro calls, in total
  size_t max_output_bytes = 32u << 20;  // rendered text, and any single string value
  size_t max_list_items = 1u << 20;     // any single list / dict value
  // Stack the evaluator may use for nesting (statements, expressions, macro calls) before
  // failing; the rendering thread needs at least this much stack plus a margin.
  size_t max_stack_bytes = 2u << 20;
};

struct RenderOptions {
  RenderLimits limits;
  // Clock for strftime_now(); returns seconds since the epoch. Empty: the system clock.
  // strftime_now formats the result as local time (like Python's datetime.now()).
  std::function<std::time_t()> clock;
  // If true, strftime_now interprets the clock as UTC (tests use this for a fixed time).
  bool clock_is_utc = false;
};

// A rendering with the provenance of its bytes (see RenderTracked).
struct TrackedRender {
  std::string text;
  // Byte ranges [first, second) of `text` that came from client data: sorted, disjoint,
  // non-empty.
  std::vector<std::pair<size_t, size_t>> client_spans;
};

class ChatTemplate {
 public:
  // Parses a Jinja template source. Errors: InvalidArgument "line N: <what>".
  static Result<ChatTemplate> Parse(std::string_view source);

  // Renders with `context` (a JSON object) as the template's variables: typically
  // messages, tools, documents, add_generation_prompt, bos_token, eos_token and any extra
  // kwargs merged at the top level (see MakeChatContext).
  Result<std::string> Render(const nlohmann::ordered_json& context,
                             const RenderOptions& options = {}) const;
  Result<std::string> Render(const nlohmann::json& context,
                             const RenderOptions& options = {}) const;

  // Renders like Render and also reports which bytes of the output came from client data.
  // Client data: every string in `context` (values and object keys, at any depth) except the
  // values at the paths in `trusted` (the model's own strings such as bos_token, and fields the
  // caller has validated, such as message roles). A path is "/name/name/..." from the context
  // root; "*" matches any array index or object key, e.g. "/bos_token", "/messages/*/role".
  // Everything below a trusted path is trusted. Output
  // bytes copied from client strings stay client bytes through printing, concatenation, join,
  // format, slicing, strip / trim, split, partition and replace; tojson / repr of a value that
  // holds client text, and any other string transformation of client text, count as client
  // text in full. The template's own literals are never client bytes unless transformed
  // together with client text. The text is identical to Render's.
  Result<TrackedRender> RenderTracked(const nlohmann::ordered_json& context,
                                      const std::vector<std::string>& trusted,
                                      const RenderOptions& options = {}) const;

  const std::string& source() const;

 private:
  explicit ChatTemplate(std::shared_ptr<const Program> program) : program_(std::move(program)) {}
  std::shared_ptr<const Program> program_;
};

// The variables transformers' apply_chat_template passes: messages, tools (null when
// absent), documents (null), add_generation_prompt, bos_token, eos_token, then every key
// of `extra_kwargs` (an object or null) at the top level.
nlohmann::ordered_json MakeChatContext(const nlohmann::ordered_json& messages,
                                       const nlohmann::ordered_json& tools,
                                       bool add_generation_prompt, std::string_view bos_token,
                                       std::string_view eos_token,
                                       const nlohmann::ordered_json& extra_kwargs = nullptr);

// --- Template sources ---------------------------------------------------------------

// GGUF metadata tokenizer.chat_template, or tokenizer.chat_template.<name> when `name` is
// non-empty. NotFound when absent.
Result<std::string> ChatTemplateFromGguf(const gguf::GgufFile& file, std::string_view name = "");

// tokenizer_config.json's chat_template: a string, or a list of {"name", "template"}
// (picks `name`, else "default", else the first). `path` may be the JSON file or a folder
// holding tokenizer_config.json. NotFound / InvalidArgument with the path in the message.
Result<std::string> ChatTemplateFromTokenizerConfig(const std::string& path,
                                                    std::string_view name = "");

// Same, from the JSON text of a tokenizer_config.json (`origin` names it in errors).
Result<std::string> ChatTemplateFromTokenizerConfigText(std::string_view json_text,
                                                        std::string_view name,
                                                        std::string_view origin);

// A --chat-template FILE: a tokenizer_config.json (a path ending in .json, as
// ChatTemplateFromTokenizerConfig) or a plain Jinja source file. NotFound when unreadable.
Result<std::string> ReadChatTemplateFile(const std::string& path);

// Where `--model PATH` points: a .gguf file, a tokenizer_config.json, or a folder holding
// one. Also returns the bos/eos token strings when the source names them ("" otherwise).
struct ModelChatTemplate {
  std::string source;
  std::string bos_token;
  std::string eos_token;
};
Result<ModelChatTemplate> LoadChatTemplate(const std::string& model_path,
                                           std::string_view name = "");

}  // namespace tachyon::chat
