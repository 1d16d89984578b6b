// tachyon tokenize / detokenize: text <-> token ids with a model's tokenizer.
//
//   tachyon tokenize --model PATH [--no-add-special] [--no-parse-special] [--json] TEXT...|-
//   tachyon tokenize --model PATH --batch      < JSON Lines {"text": ..., "add_special": bool}
//   tachyon detokenize --model PATH [--skip-special] IDS...
//
// PATH is a .gguf file, a tokenizer.json, or a folder holding tokenizer.json.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/flags.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::cli {
namespace tokenize_cmd {

using nlohmann::json;
using tokenizer::Tokenizer;

int Fail(const char* cmd, const std::string& msg) {
  std::fprintf(stderr, "tachyon %s: error: %s\n", cmd, msg.c_str());
  return 1;
}

std::string IdsLine(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s.push_back(' ');
    s += std::to_string(ids[i]);
  }
  return s;
}

// JSON Lines in, one {"ids": [...]} line out per input line, in order. A bad line gives an
// {"error": ...} line in its place and a non-zero exit status at the end.
int RunBatch(const Tokenizer& tok, bool parse_special_default) {
  std::string line;
  int lineno = 0;
  int errors = 0;
  while (std::getline(std::cin, line)) {
    ++lineno;
    if (line.empty() || line == "\r") continue;
    json in = json::parse(line, nullptr, /*allow_exceptions=*/false);
    json out;
    if (in.is_discarded() || !in.is_object() || !in.contains("text") || !in["text"].is_string()) {
      out["error"] = "line " + std::to_string(lineno) + ": expected {\"text\": string, ...}";
      ++errors;
    } else {
      const bool add_special = in.contains("add_special") && in["add_special"].is_boolean()
                                   ? in["add_special"].get<bool>()
                                   : true;
      const bool parse_special = in.contains("parse_special") && in["parse_special"].is_boolean()
                                     ? in["parse_special"].get<bool>()
                                     : parse_special_default;
      out["ids"] = tok.Encode(in["text"].get_ref<const std::string&>(), add_special, parse_special);
    }
    const std::string s = out.dump(-1, ' ', false, json::error_handler_t::replace);
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fputc('\n', stdout);
  }
  std::fflush(stdout);
  return errors ? 1 : 0;
}

int RunTokenize(int argc, char** argv) {
  std::string model;
  std::vector<std::string> words;
  bool no_add_special = false, no_parse_special = false, batch = false, as_json = false;
  auto app = NewCommandApp(
      "tokenize",
      "Encodes text to token ids: the TEXT words joined by spaces, '-' for stdin, or with\n"
      "--batch JSON Lines {\"text\": ..., \"add_special\": bool, \"parse_special\": bool} on "
      "stdin\n"
      "(one {\"ids\": [...]} line out per line). Use -- before text that starts with '-'.");
  app->add_option("-m,--model", model,
                  "a .gguf file, a tokenizer.json, or a folder holding tokenizer.json")
      ->required();
  app->add_flag("--no-add-special", no_add_special, "do not add BOS/EOS");
  app->add_flag("--no-parse-special", no_parse_special, "encode special-token text as plain text");
  app->add_flag("--json", as_json, "print the ids as a JSON array");
  app->add_flag("--batch", batch, "JSON Lines on stdin (see above)");
  app->add_option("TEXT", words, "the text ('-': read stdin)");
  if (std::optional<int> rc = ParseFlags(*app, argc, argv)) return *rc;
  if (batch == !words.empty()) {
    std::fprintf(stderr, "tachyon tokenize: error: give TEXT (or -) or --batch, not both\n");
    return 2;
  }
  const bool add_special = !no_add_special, parse_special = !no_parse_special;
  std::string text;
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i] == "-") {
      text.append(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    } else {
      if (i > 0) text.push_back(' ');
      text += words[i];
    }
  }
  auto tok = Tokenizer::FromFile(model);
  if (!tok.ok()) return Fail("tokenize", tok.status().message());
  if (batch) return RunBatch(**tok, parse_special);
  const auto ids = (*tok)->Encode(text, add_special, parse_special);
  if (as_json) {
    std::printf("%s\n", json(ids).dump().c_str());
  } else {
    std::printf("%s\n", IdsLine(ids).c_str());
  }
  return 0;
}

// Token ids separated by spaces, commas or brackets ("1 2 3", "[1,2,3]").
bool ParseIdList(const std::string& arg, std::vector<int32_t>* ids) {
  size_t i = 0;
  while (i < arg.size()) {
    const size_t j = std::min(arg.find_first_of(",[] ", i), arg.size());
    if (j > i) {
      const std::optional<int32_t> v =
          ParseInteger<int32_t>(std::string_view(arg).substr(i, j - i));
      if (!v || *v < 0) return false;
      ids->push_back(*v);
    }
    i = j + 1;
  }
  return true;
}

int RunDetokenize(int argc, char** argv) {
  std::string model;
  bool skip_special = false;
  std::vector<std::string> args;
  auto app = NewCommandApp("detokenize", "Decodes token ids to text.");
  app->add_option("-m,--model", model,
                  "a .gguf file, a tokenizer.json, or a folder holding tokenizer.json")
      ->required();
  app->add_flag("--skip-special", skip_special, "leave special tokens out of the text");
  app->add_option("IDS", args, "token ids, separated by spaces or commas (\"[1,2,3]\" too)");
  if (std::optional<int> rc = ParseFlags(*app, argc, argv)) return *rc;
  std::vector<int32_t> ids;
  for (const std::string& a : args) {
    if (!ParseIdList(a, &ids)) {
      std::fprintf(stderr, "tachyon detokenize: error: IDS: '%s' is not a token id\n", a.c_str());
      return 2;
    }
  }
  auto tok = Tokenizer::FromFile(model);
  if (!tok.ok()) return Fail("detokenize", tok.status().message());
  for (int32_t id : ids) {
    if (id >= (*tok)->vocab_size()) {
      return Fail("detokenize", "token id " + std::to_string(id) +
                                    " is outside the vocabulary (size " +
                                    std::to_string((*tok)->vocab_size()) + ")");
    }
  }
  const std::string text = (*tok)->Decode(ids, skip_special);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
  return 0;
}

TACHYON_COMMAND(tokenize, "Encode text to token ids (--batch: JSON Lines)", RunTokenize);
TACHYON_COMMAND(detokenize, "Decode token ids to text", RunDetokenize);

}  // namespace tokenize_cmd

}  // namespace tachyon::cli
