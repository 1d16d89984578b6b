// Tokenizer throughput: encode MB/s on ~1 MB of English prose and ~1 MB of CJK + source
// code, generated deterministically, with the Llama 3 and Qwen 3 tokenizers from testdata
// (byte-level BPE), plus decode and streaming-decode rates.
//
//   build/tokenizer_bench [--benchmark_filter=Encode]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tokenizer/pipeline.h"
#include "tokenizer/tokenizer.h"
#include "util/testing/testdata.h"

namespace {

using tachyon::tokenizer::IncrementalDetokenizer;
using tachyon::tokenizer::Tokenizer;

constexpr size_t kCorpusBytes = 1 << 20;

std::string EnglishCorpus() {
  static const char* const kWords[] = {
      "the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with", "be",
      "by", "on", "not", "he", "I", "this", "are", "or", "his", "from", "at", "which", "but",
      "have", "an", "had", "they", "you", "were", "their", "one", "all", "we", "can", "her",
      "has", "there", "been", "if", "more", "when", "will", "would", "who", "so", "no",
      "inference", "server", "tokenizer", "throughput", "memory", "bandwidth", "request",
      "generation", "transformer", "attention", "cache", "latency", "Llama", "Qwen", "model's",
      "don't", "it's", "we'll", "1024", "3.14", "2026", "extraordinary", "understanding"};
  std::mt19937 rng(7);
  std::uniform_int_distribution<size_t> pick(0, std::size(kWords) - 1);
  std::uniform_int_distribution<int> punct(0, 30);
  std::string s;
  s.reserve(kCorpusBytes + 64);
  bool cap = true;
  while (s.size() < kCorpusBytes) {
    std::string w = kWords[pick(rng)];
    if (cap && w[0] >= 'a' && w[0] <= 'z') w[0] = static_cast<char>(w[0] - 32);
    cap = false;
    s += w;
    const int p = punct(rng);
    if (p == 0) {
      s += ".\n\n";
      cap = true;
    } else if (p < 3) {
      s += ". ";
      cap = true;
    } else if (p < 5) {
      s += ", ";
    } else {
      s += ' ';
    }
  }
  return s;
}

std::string CjkCodeCorpus() {
  static const char* const kCode[] = {
      "for (int i = 0; i < n; ++i) {\n", "    sum += a[i] * b[i];\n", "}\n",
      "def forward(self, x):\n", "        return self.proj(x)  # 投影\n",
      "const auto it = map.find(key);\n", "if (!status.ok()) return status;\n",
      "    \"name\": \"张三\", \"age\": 42,\n", "std::vector<int32_t> ids;\n"};
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> han(0x4E00, 0x9FA5);
  std::uniform_int_distribution<int> kind(0, 9);
  std::uniform_int_distribution<size_t> code(0, std::size(kCode) - 1);
  std::string s;
  s.reserve(kCorpusBytes + 64);
  while (s.size() < kCorpusBytes) {
    const int k = kind(rng);
    if (k < 5) {
      for (int i = 0; i < 12; ++i) {
        const uint32_t cp = han(rng);
        s += static_cast<char>(0xE0 | (cp >> 12));
        s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (cp & 0x3F));
      }
      s += k == 0 ? "。\n" : "，";
    } else {
      s += kCode[code(rng)];
    }
  }
  return s;
}

void BM_Encode(benchmark::State& state, const Tokenizer* tok, const std::string* text) {
  size_t n = 0;
  for (auto _ : state) {
    auto ids = tok->Encode(*text, false);
    n = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text->size()));
  state.counters["tokens"] = static_cast<double>(n);
  state.counters["bytes/token"] = static_cast<double>(text->size()) / static_cast<double>(n);
}

// The regex pre-tokenization alone (PCRE2 JIT), to see its share of the encode time.
void BM_PreTokenize(benchmark::State& state, const Tokenizer* tok, const std::string* text) {
  std::vector<std::string> pieces;
  for (auto _ : state) {
    pieces.clear();
    tachyon::tokenizer::ApplyPreTokenizers(tok->pipeline().pre_tokenizers, *text, true, &pieces);
    benchmark::DoNotOptimize(pieces.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text->size()));
  state.counters["pieces"] = static_cast<double>(pieces.size());
}

void BM_Decode(benchmark::State& state, const Tokenizer* tok, const std::string* text) {
  const auto ids = tok->Encode(*text, false);
  for (auto _ : state) {
    auto s = tok->Decode(ids);
    benchmark::DoNotOptimize(s.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text->size()));
}

void BM_StreamDecode(benchmark::State& state, const Tokenizer* tok, const std::string* text) {
  const auto all = tok->Encode(*text, false);
  const std::vector<int32_t> ids(all.begin(), all.begin() + std::min<size_t>(all.size(), 20000));
  size_t bytes = 0;
  for (auto _ : state) {
    IncrementalDetokenizer d(*tok);
    bytes = 0;
    for (int32_t id : ids) bytes += d.Push(id).size();
    bytes += d.Flush().size();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * ids.size()));
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const std::string td = tachyon::TestdataDir();
  if (td.empty()) {
    std::fprintf(stderr, "tokenizer_bench: testdata not found (set TACHYON_TESTDATA)\n");
    return 1;
  }
  static const std::string english = EnglishCorpus();
  static const std::string cjk_code = CjkCodeCorpus();
  static std::vector<std::unique_ptr<Tokenizer>> tokenizers;
  for (const char* name : {"llama3", "qwen3"}) {
    auto tok = Tokenizer::FromFile(td + "/tokenizers/" + name);
    if (!tok.ok()) {
      std::fprintf(stderr, "tokenizer_bench: %s\n", tok.status().ToString().c_str());
      return 1;
    }
    tokenizers.push_back(std::move(tok).value());
    const Tokenizer* t = tokenizers.back().get();
    const std::string n = name;
    benchmark::RegisterBenchmark(("Encode/" + n + "/english").c_str(), BM_Encode, t, &english)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("Encode/" + n + "/cjk_code").c_str(), BM_Encode, t, &cjk_code)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("PreTokenize/" + n + "/english").c_str(), BM_PreTokenize, t,
                                 &english)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("Decode/" + n + "/english").c_str(), BM_Decode, t, &english)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("StreamDecode/" + n + "/english").c_str(), BM_StreamDecode, t,
                                 &english)
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
