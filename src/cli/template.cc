// `tachyon template render`: renders chat templates (the way /v1/chat/completions does).
//
//   tachyon template render (--template FILE | --model PATH) [--name NAME] [--batch]
//                           [--now YYYY-MM-DDTHH:MM:SS]
//
// Input on stdin: JSON objects {"messages", "tools", "add_generation_prompt", "bos_token",
// "eos_token", "extra_kwargs"} (all optional but messages). With --batch, one object per
// line, and one JSON line out per input line: {"text": ...} or {"error": ...}. Without it,
// a single object and the rendered text printed as is.
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "cli/command.h"
#include "cli/flags.h"
#include "util/mmap_file.h"

namespace tachyon::cli {
namespace template_cmd {

using nlohmann::ordered_json;

struct Request {
  ordered_json messages = ordered_json::array();
  ordered_json tools = nullptr;
  bool add_generation_prompt = false;
  std::string bos, eos;
  ordered_json extra = nullptr;
};

Result<Request> ParseRequest(const std::string& line, const chat::ModelChatTemplate& model) {
  ordered_json j;
  try {
    j = ordered_json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("invalid JSON input: ") + e.what());
  }
  if (!j.is_object()) return InvalidArgument("input must be a JSON object");
  Request r;
  r.bos = model.bos_token;
  r.eos = model.eos_token;
  if (j.contains("messages")) r.messages = j["messages"];
  if (j.contains("tools")) r.tools = j["tools"];
  if (j.contains("extra_kwargs")) r.extra = j["extra_kwargs"];
  if (j.contains("add_generation_prompt")) {
    if (!j["add_generation_prompt"].is_boolean()) {
      return InvalidArgument("add_generation_prompt must be a boolean");
    }
    r.add_generation_prompt = j["add_generation_prompt"].get<bool>();
  }
  for (const char* key : {"bos_token", "eos_token"}) {
    if (!j.contains(key) || j[key].is_null()) continue;
    if (!j[key].is_string()) return InvalidArgument(std::string(key) + " must be a string");
    (std::strcmp(key, "bos_token") == 0 ? r.bos : r.eos) = j[key].get<std::string>();
  }
  if (!r.extra.is_null() && !r.extra.is_object()) {
    return InvalidArgument("extra_kwargs must be an object");
  }
  return r;
}

Result<std::string> RenderLine(const chat::ChatTemplate& tmpl, const std::string& line,
                               const chat::ModelChatTemplate& model,
                               const chat::RenderOptions& options) {
  ASSIGN_OR_RETURN(Request r, ParseRequest(line, model));
  return tmpl.Render(
      chat::MakeChatContext(r.messages, r.tools, r.add_generation_prompt, r.bos, r.eos, r.extra),
      options);
}

std::string Dump(const ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

int RunTemplate(int argc, char** argv) {
  std::string template_file, model_path, name, now;
  bool batch = false;
  auto app = NewCommandApp("template", "Chat template tools.");
  app->require_subcommand(1);
  CLI::App* render = app->add_subcommand(
      "render",
      "Renders a chat template the way /v1/chat/completions does. Input on stdin: a JSON\n"
      "object {\"messages\", \"tools\", \"add_generation_prompt\", \"bos_token\", \"eos_token\",\n"
      "\"extra_kwargs\"} (all optional but messages); with --batch one per line.");
  render->add_option("--template,--chat-template", template_file, "a Jinja chat template file");
  render->add_option("--model", model_path,
                     "a .gguf file, a tokenizer_config.json, or a folder with one");
  render->add_option("--name", name, "a named template variant (e.g. tool_use)");
  render->add_flag("--batch", batch,
                   "JSON Lines on stdin, one {\"text\"}/{\"error\"} line out each");
  render->add_option("--now", now, "fixed UTC time for strftime_now(), YYYY-MM-DDTHH:MM:SS");
  if (std::optional<int> rc = ParseFlags(*app, argc, argv)) return *rc;
  if (template_file.empty() == model_path.empty()) {
    std::fprintf(stderr, "tachyon template: error: give exactly one of --template or --model\n");
    return 2;
  }
  chat::ModelChatTemplate model;
  if (!model_path.empty()) {
    auto loaded = chat::LoadChatTemplate(model_path, name);
    if (!loaded.ok()) {
      std::fprintf(stderr, "tachyon template: error: %s\n", loaded.status().message().c_str());
      return 1;
    }
    model = std::move(*loaded);
  } else {
    auto text = ReadFileToString(template_file);
    if (!text.ok()) {
      std::fprintf(stderr, "tachyon template: error: %s\n", text.status().message().c_str());
      return 1;
    }
    model.source = std::move(*text);
  }
  auto tmpl = chat::ChatTemplate::Parse(model.source);
  if (!tmpl.ok()) {
    std::fprintf(stderr, "tachyon template: error: %s: %s\n",
                 model_path.empty() ? template_file.c_str() : model_path.c_str(),
                 tmpl.status().message().c_str());
    return 1;
  }
  chat::RenderOptions options;
  if (!now.empty()) {
    std::tm tm{};
    const char* end = strptime(now.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
    if (!end || *end) {
      std::fprintf(stderr,
                   "tachyon template: error: --now: '%s' is not a time like 2026-01-15T00:00:00\n",
                   now.c_str());
      return 2;
    }
    std::time_t t = timegm(&tm);
    options.clock = [t] { return t; };
    options.clock_is_utc = true;
  }
  if (!batch) {
    std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    auto out = RenderLine(*tmpl, input, model, options);
    if (!out.ok()) {
      std::fprintf(stderr, "tachyon template: error: %s\n", out.status().message().c_str());
      return 1;
    }
    std::fwrite(out->data(), 1, out->size(), stdout);
    return 0;
  }
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto out = RenderLine(*tmpl, line, model, options);
    ordered_json j = ordered_json::object();
    if (out.ok()) {
      j["text"] = *out;
    } else {
      j["error"] = out.status().message();
    }
    std::string s = Dump(j);
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }
  return 0;
}

TACHYON_COMMAND(template, "Render a chat template (template render --template FILE --batch)",
                RunTemplate);

}  // namespace template_cmd
}  // namespace tachyon::cli
