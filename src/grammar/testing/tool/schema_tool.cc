// grammar_schema_tool: the test-only bridge between the JSON Schema property test
// (tests/python/test_json_schema_property.py) and the grammar module. Built with TACHYON_TESTS.
//
//   grammar_schema_tool --schemas S.jsonl --tokenizer DIR --out O.jsonl
//                       [--docs D.jsonl] [--walks N] [--max-tokens T] [--seed X]
//                       [--max-whitespace W] [--budget-ms B] [--limited-walks L]
//
// S.jsonl: {"id", "schema"} a line. D.jsonl: {"id", "docs": [JSON text, ...]} a line.
// For each schema: JsonSchemaToGbnf, Compile over the tokenizer's vocabulary, then N random walks
// token by token through the matcher (each step: the mask, a random allowed token, biased toward
// tokens holding '"' ',' '}' ']' so that strings and containers close; stop with probability
// 1/2 wherever the grammar may end), and the given documents fed byte by byte (a byte
// vocabulary). One line out per schema:
//   {"id", "refused": message}   or
//   {"id", "gbnf_bytes", "walks": [text...], "unfinished": k, "dead_ends": [text...],
//    "rejected": [doc...], "checked": n}  (dead_ends: the texts where a walk got stuck)
// With --limited-walks L, also L walks under a token limit (TokenMatcher::SetTokenLimit) drawn
// at random from [d, d + 48], d = CompiledGrammar::MinTokenLimit() (the grammar's shortest
// completion in bytes, an upper bound on its tokens): uniform among the allowed tokens, never
// stopping before the grammar ends, so the limit is what closes the document. They add
// "limited": [{"limit", "tokens", "text", "ended"}...] (ended: the grammar could end where the
// walk stopped) and "start_distance": d.
// Exit status 0 unless the inputs cannot be read.
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/compile.h"
#include "grammar/json_schema.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::grammar {
namespace {

struct Args {
  std::string schemas, tokenizer, out, docs;
  int walks = 2, max_tokens = 400, max_whitespace = 20, budget_ms = 2000, limited_walks = 0;
  uint64_t seed = 1;
};

bool Parse(int argc, char** argv, Args* a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--schemas")
      a->schemas = v;
    else if (k == "--tokenizer")
      a->tokenizer = v;
    else if (k == "--out")
      a->out = v;
    else if (k == "--docs")
      a->docs = v;
    else if (k == "--walks")
      a->walks = std::stoi(v);
    else if (k == "--max-tokens")
      a->max_tokens = std::stoi(v);
    else if (k == "--seed")
      a->seed = std::stoull(v);
    else if (k == "--max-whitespace")
      a->max_whitespace = std::stoi(v);
    else if (k == "--budget-ms")
      a->budget_ms = std::stoi(v);
    else if (k == "--limited-walks")
      a->limited_walks = std::stoi(v);
    else
      return false;
  }
  return !a->schemas.empty() && !a->tokenizer.empty() && !a->out.empty() && argc % 2 == 1;
}

Result<std::shared_ptr<const CompiledGrammar>> CompileText(const std::string& gbnf,
                                                           std::shared_ptr<const Vocabulary> vocab,
                                                           const Args& a) {
  ConstraintSpec spec;
  spec.kind = ConstraintSpec::Kind::kGbnf;
  spec.source = gbnf;
  CompileOptions o;
  o.budget = std::chrono::milliseconds(a.budget_ms);
  return Compile(spec, std::move(vocab), o);
}

// One random walk; false if it did not finish within max_tokens (or hit a dead end, *dead).
bool Walk(const CompiledGrammar& g, const Vocabulary& vocab, int max_tokens, std::mt19937_64* rng,
          std::string* text, bool* dead) {
  auto m = g.NewMatcher();
  std::vector<uint32_t> mask(vocab.mask_words());
  std::vector<int32_t> allowed, closing;
  text->clear();
  *dead = false;
  for (int step = 0; step < max_tokens; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    m->FillNextTokenBitmask(mask);
    if (getenv("GRAMMAR_SCHEMA_TOOL_TRACE")) {
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (ms > 100) std::cerr << "slow mask " << ms << " ms after: " << *text << "\n";
    }
    allowed.clear();
    closing.clear();
    for (size_t w = 0; w < mask.size(); ++w) {
      for (uint32_t bits = mask[w]; bits; bits &= bits - 1) {
        const auto t = static_cast<int32_t>(w * 32 + __builtin_ctz(bits));
        if (vocab.IsEos(t)) continue;
        allowed.push_back(t);
        if (vocab.bytes(t).find_first_of("\",}]") != std::string_view::npos) closing.push_back(t);
      }
    }
    if (m->CanTerminate() && (allowed.empty() || (*rng)() % 2 == 0)) return true;
    if (allowed.empty()) {
      *dead = true;
      return false;
    }
    const bool close = !closing.empty() && (*rng)() % 3 != 0;
    const auto& pool = close ? closing : allowed;
    const int32_t t = pool[(*rng)() % pool.size()];
    if (!m->AcceptToken(t)) {
      *dead = true;  // the mask allowed a token the matcher refuses
      return false;
    }
    text->append(vocab.bytes(t));
  }
  return false;
}

// One walk under a token limit: uniform among the allowed tokens until the grammar terminates
// or the limit is used up.
nlohmann::json LimitedWalk(const CompiledGrammar& g, const Vocabulary& vocab, int64_t limit,
                           std::mt19937_64* rng) {
  auto m = g.NewMatcher();
  m->SetTokenLimit(limit);
  std::vector<uint32_t> mask(vocab.mask_words());
  std::vector<int32_t> allowed;
  std::string text;
  int64_t n = 0;
  for (; n < limit && !m->IsTerminated(); ++n) {
    m->FillNextTokenBitmask(mask);
    allowed.clear();
    for (size_t w = 0; w < mask.size(); ++w) {
      for (uint32_t bits = mask[w]; bits; bits &= bits - 1) {
        const auto t = static_cast<int32_t>(w * 32 + __builtin_ctz(bits));
        if (!vocab.IsEos(t)) allowed.push_back(t);
      }
    }
    if (allowed.empty()) break;
    const int32_t t = allowed[(*rng)() % allowed.size()];
    if (!m->AcceptToken(t)) break;
    text.append(vocab.bytes(t));
  }
  return {{"limit", limit}, {"tokens", n}, {"text", text}, {"ended", m->CanTerminate()}};
}

bool AcceptsBytes(const CompiledGrammar& g, const std::string& text) {
  auto m = g.NewMatcher();
  for (char c : text) {
    if (!m->AcceptToken(static_cast<uint8_t>(c))) return false;
  }
  return m->CanTerminate();
}

int Main(int argc, char** argv) {
  Args a;
  if (!Parse(argc, argv, &a)) {
    std::cerr << "usage: grammar_schema_tool --schemas S.jsonl --tokenizer DIR --out O.jsonl "
                 "[--docs D.jsonl] [--walks N] [--max-tokens T] [--seed X] "
                 "[--max-whitespace W] [--budget-ms B] [--limited-walks L]\n";
    return 2;
  }
  auto tok = tokenizer::Tokenizer::FromFile(a.tokenizer);
  if (!tok.ok()) {
    std::cerr << tok.status().ToString() << "\n";
    return 1;
  }
  auto vocab = Vocabulary::FromTokenizer(**tok, (*tok)->EogIds());
  if (!vocab.ok()) {
    std::cerr << vocab.status().ToString() << "\n";
    return 1;
  }
  std::vector<std::string> bytes(256);
  for (int b = 0; b < 256; ++b) bytes[b] = std::string(1, static_cast<char>(b));
  bytes.push_back("");
  auto byte_vocab = Vocabulary::FromTokenBytes(std::move(bytes), {256});
  if (!byte_vocab.ok()) return 1;

  std::map<std::string, std::vector<std::string>> docs;
  if (!a.docs.empty()) {
    std::ifstream in(a.docs);
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded()) continue;
      docs[j.value("id", "")] = j.value("docs", std::vector<std::string>{});
    }
  }
  std::ifstream in(a.schemas);
  std::ofstream out(a.out);
  if (!in || !out) {
    std::cerr << "cannot open " << a.schemas << " or " << a.out << "\n";
    return 1;
  }
  std::mt19937_64 rng(a.seed);
  for (std::string line; std::getline(in, line);) {
    auto row = nlohmann::ordered_json::parse(line, nullptr, false);  // keeps key order
    if (row.is_discarded() || !row.contains("schema")) continue;
    const std::string id = row.value("id", "");
    nlohmann::json result = {{"id", id}};
    JsonSchemaOptions jo;
    jo.max_whitespace = a.max_whitespace;
    jo.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(a.budget_ms);
    auto gbnf = JsonSchemaToGbnf(row["schema"].dump(), jo);
    Result<std::shared_ptr<const CompiledGrammar>> g =
        gbnf.ok() ? CompileText(*gbnf, *vocab, a)
                  : Result<std::shared_ptr<const CompiledGrammar>>(gbnf.status());
    Result<std::shared_ptr<const CompiledGrammar>> gb =
        gbnf.ok() ? CompileText(*gbnf, *byte_vocab, a) : g;
    if (!g.ok() || !gb.ok()) {
      result["refused"] = (!g.ok() ? g.status() : gb.status()).message();
      out << result.dump() << "\n";
      continue;
    }
    result["gbnf_bytes"] = gbnf->size();
    std::vector<std::string> walks, dead_ends;
    int unfinished = 0;
    for (int i = 0; i < a.walks; ++i) {
      std::string text;
      bool dead = false;
      if (Walk(**g, **vocab, a.max_tokens, &rng, &text, &dead)) {
        walks.push_back(text);
      } else {
        if (dead) {
          dead_ends.push_back(text);  // the prefix where the walk got stuck
        } else {
          ++unfinished;
        }
      }
    }
    if (a.limited_walks > 0) {
      const int64_t d = (*g)->MinTokenLimit();
      nlohmann::json limited = nlohmann::json::array();
      for (int i = 0; i < a.limited_walks && d < CompiledGrammar::kNoTokenLimit; ++i) {
        limited.push_back(LimitedWalk(**g, **vocab, std::max<int64_t>(1, d) + (rng() % 49), &rng));
      }
      result["limited"] = limited;
      result["start_distance"] = d;
    }
    std::vector<std::string> rejected;
    const auto& mine = docs[id];
    for (const std::string& d : mine) {
      if (!AcceptsBytes(**gb, d)) rejected.push_back(d);
    }
    result["walks"] = walks;
    result["unfinished"] = unfinished;
    result["dead_ends"] = dead_ends;
    result["rejected"] = rejected;
    result["checked"] = mine.size();
    out << result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace tachyon::grammar

int main(int argc, char** argv) {
  return tachyon::grammar::Main(argc, argv);
}
