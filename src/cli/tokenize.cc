// tachyon tokenize / detokenize: text <-> token ids with a model's tokenizer.
//
//   tachyon tokenize --model PATH [--no-add-special] [--no-parse-special] [--json] TEXT...
//   tachyon tokenize --model PATH --batch      < JSON Lines {"text": ..., "add_special": bool}
//   tachyon detokenize --model PATH [--skip-special] IDS...
//
// PATH is a .gguf file, a tokenizer.json, or a folder holding tokenizer.json.
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::cli {
namespace {

using nlohmann::json;
using tokenizer::Tokenizer;

int Fail(const char* cmd, const std::string& msg) {
  std::fprintf(stderr, "tachyon %s: error: %s\n", cmd, msg.c_str());
  return 1;
}

int Usage(const char* cmd, const char* usage) {
  std::fprintf(stderr, "usage: tachyon %s %s\n", cmd, usage);
  return 2;
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
      const bool add_special =
          in.contains("add_special") && in["add_special"].is_boolean() ? in["add_special"].get<bool>() : true;
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

constexpr char kTokenizeUsage[] =
    "--model PATH [--no-add-special] [--no-parse-special] [--json] (TEXT... | - | --batch)";

int RunTokenize(int argc, char** argv) {
  std::string model, text;
  bool add_special = true, parse_special = true, batch = false, as_json = false, have_text = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--model" && i + 1 < argc) {
      model = argv[++i];
    } else if (a == "--batch") {
      batch = true;
    } else if (a == "--no-add-special") {
      add_special = false;
    } else if (a == "--no-parse-special") {
      parse_special = false;
    } else if (a == "--json") {
      as_json = true;
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: tachyon tokenize %s\n", kTokenizeUsage);
      return 0;
    } else if (a == "-") {
      text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
      have_text = true;
    } else if (a.size() > 1 && a[0] == '-' && a[1] == '-') {
      return Usage("tokenize", kTokenizeUsage);
    } else {
      if (have_text) text.push_back(' ');
      text += a;
      have_text = true;
    }
  }
  if (model.empty() || (batch == have_text)) return Usage("tokenize", kTokenizeUsage);
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

constexpr char kDetokenizeUsage[] = "--model PATH [--skip-special] IDS...";

int RunDetokenize(int argc, char** argv) {
  std::string model;
  bool skip_special = false;
  std::vector<int32_t> ids;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--model" && i + 1 < argc) {
      model = argv[++i];
    } else if (a == "--skip-special") {
      skip_special = true;
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: tachyon detokenize %s\n", kDetokenizeUsage);
      return 0;
    } else {
      // Ids separated by spaces, commas or brackets ("1 2 3", "[1,2,3]").
      std::string num;
      auto flush = [&]() -> bool {
        if (num.empty()) return true;
        char* end = nullptr;
        const long v = std::strtol(num.c_str(), &end, 10);
        if (*end != '\0' || v < 0 || v > INT32_MAX) return false;
        ids.push_back(static_cast<int32_t>(v));
        num.clear();
        return true;
      };
      for (char c : a) {
        if (c == ',' || c == '[' || c == ']' || c == ' ') {
          if (!flush()) return Fail("detokenize", "bad token id '" + a + "'");
        } else {
          num.push_back(c);
        }
      }
      if (!flush()) return Fail("detokenize", "bad token id '" + a + "'");
    }
  }
  if (model.empty()) return Usage("detokenize", kDetokenizeUsage);
  auto tok = Tokenizer::FromFile(model);
  if (!tok.ok()) return Fail("detokenize", tok.status().message());
  for (int32_t id : ids) {
    if (id >= (*tok)->vocab_size()) {
      return Fail("detokenize", "token id " + std::to_string(id) + " is outside the vocabulary (size " +
                                    std::to_string((*tok)->vocab_size()) + ")");
    }
  }
  const std::string text = (*tok)->Decode(ids, skip_special);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
  return 0;
}

}  // namespace

TACHYON_COMMAND(tokenize, "Encode text to token ids (--batch: JSON Lines)", RunTokenize);
TACHYON_COMMAND(detokenize, "Decode token ids to text", RunDetokenize);

}  // namespace tachyon::cli
