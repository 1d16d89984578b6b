// Structured-output mask and compile times, one thread, with the Qwen 3 and Llama 3 tokenizers
// of testdata, printed against the targets of issue 18 (mask average <= 40 us, p99 <= 0.4 ms,
// max <= 10 ms; compile p50 <= 1 ms, p99 <= 20 ms).
//
//   build/grammar_bench [--walks N] [--steps N] [--schemas N] [--tokenizer qwen3|llama3]
//                       [--top K] [--cpu 1] [--only I] [--token-limit L]
//
// --top K: also lists the K specs with the most total mask time and the K slowest compiles
// (index in the workload, compile us, masks, total and max mask us): where the time goes.
// --cpu 1: times are this thread's CPU time (indicative figures on a loaded machine).
// --only I: only the I-th schema of the file (profiling one case).
// --token-limit L: every walk's matcher gets TokenMatcher::SetTokenLimit(L), or the grammar's
// MinTokenLimit() where that is larger (the server refuses a smaller max_tokens with the option
// on; counted as "limit raised"), and takes at most that many steps (length-aware masks: the
// walks then close their documents by the limit).
//
// Workloads: the JSON Schemas of testdata/structured/schemas.jsonl (kJsonSchema; schemas the
// build refuses are counted, not timed) and a few GBNF grammars. For each compiled grammar,
// N random walks: at each step the mask is computed (timed), then a random allowed token is
// accepted (tokens that let the grammar end are avoided while others exist, so walks go deep).
// Grammars are compiled cold (compile time) and shared by the walks (as requests share them).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/compile.h"
#include "grammar/testing/grammar_testing.h"
#include "tokenizer/tokenizer.h"
#include "util/testing/testdata.h"

namespace {

using namespace tachyon::grammar;
// --cpu: time with this thread's CPU clock instead of the wall clock (on a loaded machine the
// wall clock also counts the time other processes held the core).
bool g_cpu_clock = false;
int g_token_limit = 0;  // --token-limit

struct Clock {
  using duration = std::chrono::nanoseconds;
  struct time_point {
    int64_t ns;
    duration operator-(const time_point& o) const { return duration(ns - o.ns); }
  };
  static time_point now() {
    timespec ts;
    clock_gettime(g_cpu_clock ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return {int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec};
  }
};

double Us(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

struct SpecCost {
  int index;
  double compile_us, mask_total_us = 0, mask_max_us = 0;
  size_t masks = 0;
};

struct Stats {
  std::vector<double> mask_us, compile_us;
  std::vector<SpecCost> per_spec;
  int specs = 0, refused = 0, raised = 0;
};

// --token-limit for grammar g: raised to g's MinTokenLimit() where that is larger (and finite).
int64_t TokenLimitFor(const CompiledGrammar& g) {
  const int64_t least = g.MinTokenLimit();
  return least == CompiledGrammar::kNoTokenLimit ? g_token_limit
                                                 : std::max<int64_t>(g_token_limit, least);
}

void Walk(const CompiledGrammar& g, const Vocabulary& vocab, int steps, std::mt19937& rng,
          Stats* st) {
  auto m = g.NewMatcher();
  if (g_token_limit > 0) {
    const int64_t limit = TokenLimitFor(g);
    m->SetTokenLimit(limit);
    steps = static_cast<int>(std::min<int64_t>(steps, limit));
  }
  std::vector<uint32_t> mask(vocab.mask_words());
  std::vector<int32_t> allowed;
  for (int i = 0; i < steps; ++i) {
    const auto t0 = Clock::now();
    m->FillNextTokenBitmask(mask);
    st->mask_us.push_back(Us(Clock::now() - t0));
    allowed.clear();
    for (size_t w = 0; w < mask.size(); ++w) {
      for (uint32_t bits = mask[w]; bits != 0; bits &= bits - 1) {
        const auto t = static_cast<int32_t>(w * 32 + __builtin_ctz(bits));
        if (!vocab.IsEos(t)) allowed.push_back(t);
      }
    }
    if (allowed.empty()) return;
    for (int tries = 0;; ++tries) {
      if (!m->AcceptToken(allowed[rng() % allowed.size()])) {
        std::fprintf(stderr, "grammar_bench: a masked token was refused\n");
        std::exit(1);
      }
      if (!m->CanTerminate() || tries == 20) break;
      m->Rollback(1);
    }
  }
}

void Run(const std::vector<ConstraintSpec>& specs, std::shared_ptr<const Vocabulary> vocab,
         int walks, int steps, Stats* st) {
  std::mt19937 rng(1);
  for (const ConstraintSpec& spec : specs) {
    ++st->specs;
    const auto t0 = Clock::now();
    auto g = Compile(spec, vocab);
    const double us = Us(Clock::now() - t0);
    if (!g.ok()) {
      ++st->refused;
      continue;
    }
    st->compile_us.push_back(us);
    if (g_token_limit > 0 && TokenLimitFor(**g) > g_token_limit) ++st->raised;
    const size_t first = st->mask_us.size();
    for (int w = 0; w < walks; ++w) Walk(**g, *vocab, steps, rng, st);
    SpecCost c{st->specs - 1, us};
    for (size_t i = first; i < st->mask_us.size(); ++i) {
      c.mask_total_us += st->mask_us[i];
      c.mask_max_us = std::max(c.mask_max_us, st->mask_us[i]);
    }
    c.masks = st->mask_us.size() - first;
    st->per_spec.push_back(c);
  }
}

void ReportTop(const Stats& st, int top) {
  if (top <= 0) return;
  auto list = [&](const char* what, auto key) {
    std::vector<SpecCost> v = st.per_spec;
    std::sort(v.begin(), v.end(),
              [&](const SpecCost& a, const SpecCost& b) { return key(a) > key(b); });
    std::printf("  top %d by %s:\n", top, what);
    for (int i = 0; i < top && i < static_cast<int>(v.size()); ++i) {
      std::printf("    #%d  compile %.0f us  masks %zu  total %.0f us  max %.0f us\n", v[i].index,
                  v[i].compile_us, v[i].masks, v[i].mask_total_us, v[i].mask_max_us);
    }
  };
  list("total mask time", [](const SpecCost& c) { return c.mask_total_us; });
  list("compile time", [](const SpecCost& c) { return c.compile_us; });
  list("slowest mask", [](const SpecCost& c) { return c.mask_max_us; });
}

void Report(const char* what, const Stats& st) {
  const auto& m = st.mask_us;
  double sum = 0;
  for (double x : m) sum += x;
  const double avg = m.empty() ? 0 : sum / m.size();
  const double mx = m.empty() ? 0 : *std::max_element(m.begin(), m.end());
  std::printf("%s: %d specs (%d refused), %zu masks\n", what, st.specs, st.refused, m.size());
  if (g_token_limit > 0) {
    std::printf("  token limit %d, raised to MinTokenLimit() for %d specs\n", g_token_limit,
                st.raised);
  }
  std::printf(
      "  mask us: avg %.1f  p50 %.1f  p99 %.1f  max %.1f   (target ratio: avg %.2f, "
      "p99 %.2f, max %.2f)\n",
      avg, Pct(m, 0.5), Pct(m, 0.99), mx, avg / 40, Pct(m, 0.99) / 400, mx / 10000);
  const auto over = [&](double us) {
    return std::count_if(m.begin(), m.end(), [&](double x) { return x > us; });
  };
  std::printf("  masks over 0.4 ms: %td, over 1 ms: %td, over 10 ms: %td\n", over(400), over(1000),
              over(10000));
  std::printf("  compile us: p50 %.1f  p99 %.1f   (target ratio: p50 %.2f, p99 %.2f)\n",
              Pct(st.compile_us, 0.5), Pct(st.compile_us, 0.99), Pct(st.compile_us, 0.5) / 1000,
              Pct(st.compile_us, 0.99) / 20000);
}

}  // namespace

int main(int argc, char** argv) {
  int walks = 3, steps = 60, max_schemas = 290, top = 0, only = -1;
  std::vector<std::string> toks = {"qwen3", "llama3"};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--walks"))
      walks = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--steps"))
      steps = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--schemas"))
      max_schemas = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--cpu"))
      g_cpu_clock = std::atoi(argv[i + 1]) != 0;
    else if (!std::strcmp(argv[i], "--token-limit"))
      g_token_limit = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--only"))
      only = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--top"))
      top = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--tokenizer"))
      toks = {argv[i + 1]};
    else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  const std::string td = tachyon::TestdataDir();
  if (td.empty()) {
    std::fprintf(stderr, "grammar_bench: testdata not found (set TACHYON_TESTDATA)\n");
    return 1;
  }
  std::vector<ConstraintSpec> schemas;
  std::ifstream in(td + "/structured/schemas.jsonl");
  for (std::string line;
       std::getline(in, line) && static_cast<int>(schemas.size()) < max_schemas;) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("schema")) continue;
    schemas.push_back({ConstraintSpec::Kind::kJsonSchema, j["schema"].dump(), {}});
  }
  if (only >= 0) {
    // One schema alone (for profiling); the GBNF workloads still run.
    if (only >= static_cast<int>(schemas.size())) return 2;
    schemas = {schemas[only]};
  }
  const std::vector<ConstraintSpec> gbnf = {
      {ConstraintSpec::Kind::kGbnf, tachyon::grammar::testing::kJsonLikeGbnf, {}},
      {ConstraintSpec::Kind::kGbnf, "root ::= [a-z ]{1,200} \".\"", {}},
      {ConstraintSpec::Kind::kChoice, "", {"positive", "negative", "neutral"}},
  };
  for (const std::string& name : toks) {
    auto tok = tachyon::tokenizer::Tokenizer::FromFile(td + "/tokenizers/" + name);
    if (!tok.ok()) {
      std::fprintf(stderr, "%s\n", tok.status().ToString().c_str());
      return 1;
    }
    auto vocab = Vocabulary::FromTokenizer(**tok, (*tok)->EogIds());
    if (!vocab.ok()) return 1;
    std::printf("== %s (%d tokens), %d walks x %d steps\n", name.c_str(), (*vocab)->size(), walks,
                steps);
    Stats s1, s2;
    Run(schemas, *vocab, walks, steps, &s1);
    Report("json schemas", s1);
    ReportTop(s1, top);
    Run(gbnf, *vocab, walks, steps, &s2);
    Report("gbnf/choice", s2);
    ReportTop(s2, top);
  }
  return 0;
}
