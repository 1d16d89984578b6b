// tachyon perplexity -m MODEL -f TEXT [--ctx N] [--chunks K] [-t THREADS]
//
// Perplexity as llama.cpp's llama-perplexity computes it: the text is tokenized once and cut
// into windows of N tokens; each window starts with BOS (when the tokenizer adds one), is run
// in one pass, and only the second half of its predictions is scored (every scored token then
// has at least N/2 tokens of context). PPL = exp(mean negative log-likelihood).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/command.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/mmap_file.h"

namespace tachyon::cli {
namespace {

constexpr const char* kUsage =
    "usage: tachyon perplexity -m MODEL -f TEXT [--ctx N=512] [--chunks K] [-t THREADS]\n";

int Fail(const std::string& msg) {
  std::fprintf(stderr, "tachyon perplexity: error: %s\n", msg.c_str());
  return 1;
}

// -log softmax(logits)[target], computed stably.
double NegLogLikelihood(const float* logits, int64_t n_vocab, int32_t target) {
  const float max_l = *std::max_element(logits, logits + n_vocab);
  double sum = 0;
  for (int64_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - max_l);
  return std::log(sum) - (static_cast<double>(logits[target]) - max_l);
}

int RunPerplexity(int argc, char** argv) {
  std::string model_path, text_path;
  int64_t n_ctx = 0, max_chunks = -1;
  int threads = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if ((a == "-m" || a == "--model") && (v = value())) {
      model_path = v;
    } else if ((a == "-f" || a == "--file") && (v = value())) {
      text_path = v;
    } else if ((a == "-c" || a == "--ctx") && (v = value())) {
      n_ctx = std::atoll(v);
    } else if (a == "--chunks" && (v = value())) {
      max_chunks = std::atoll(v);
    } else if ((a == "-t" || a == "--threads") && (v = value())) {
      threads = std::atoi(v);
    } else {
      std::fputs(kUsage, stderr);
      return Fail("bad or incomplete argument '" + a + "'");
    }
  }
  if (model_path.empty() || text_path.empty()) {
    std::fputs(kUsage, stderr);
    return Fail("-m and -f are required");
  }
  auto text = ReadFileToString(text_path);
  if (!text.ok()) return Fail(text.status().message());
  auto model = model::Model::Load(model_path);
  if (!model.ok()) return Fail(model.status().message());
  model::Model& m = **model;
  auto tok = tokenizer::Tokenizer::FromGguf(m.file());
  if (!tok.ok()) return Fail(tok.status().message());
  if (n_ctx == 0) n_ctx = std::min<int64_t>(512, m.config().n_ctx_train);
  if (n_ctx < 4) return Fail("--ctx must be >= 4");
  const std::vector<int32_t> ids = (*tok)->Encode(*text, /*add_special=*/false);
  const bool add_bos = (*tok)->add_bos() && (*tok)->bos_id() >= 0;
  int64_t n_chunks = static_cast<int64_t>(ids.size()) / n_ctx;
  if (n_chunks == 0) {
    return Fail(text_path + " has " + std::to_string(ids.size()) + " tokens; need at least " +
                std::to_string(n_ctx) + " (lower --ctx)");
  }
  if (max_chunks > 0) n_chunks = std::min(n_chunks, max_chunks);
  const int64_t bs = model::kDefaultBlockSize;
  auto kv = m.CreateKvCache((n_ctx + bs - 1) / bs, bs);
  if (!kv.ok()) return Fail(kv.status().message());
  ThreadPool pool(threads);
  model::Batch batch;
  batch.seqs.resize(1);
  for (int64_t b = 0; b < (n_ctx + bs - 1) / bs; ++b) {
    batch.seqs[0].block_table.push_back(static_cast<int32_t>(b));
  }
  batch.seqs[0].all_logits = true;
  model::ForwardOutput out;
  double nll_sum = 0, nll_sq_sum = 0;
  int64_t count = 0;
  const int64_t first = n_ctx / 2;
  for (int64_t chunk = 0; chunk < n_chunks; ++chunk) {
    const auto begin = ids.begin() + chunk * n_ctx;
    batch.tokens.assign(begin, begin + n_ctx);
    if (add_bos) batch.tokens[0] = (*tok)->bos_id();
    batch.seqs[0].n_tokens = n_ctx;
    batch.seqs[0].pos_start = 0;
    Status st = m.Forward(batch, kv->get(), &pool, &out);
    if (!st.ok()) return Fail(st.message());
    for (int64_t j = first; j + 1 < n_ctx; ++j) {
      const double nll = NegLogLikelihood(out.Row(j), out.n_vocab, begin[j + 1]);
      nll_sum += nll;
      nll_sq_sum += nll * nll;
      ++count;
    }
    std::fprintf(stderr, "[%lld]%.4f ", static_cast<long long>(chunk + 1),
                 std::exp(nll_sum / count));
  }
  std::fprintf(stderr, "\n");
  const double mean = nll_sum / count;
  const double var = std::max(0.0, nll_sq_sum / count - mean * mean);
  const double ppl = std::exp(mean);
  // Delta method: the standard error of exp(mean) is exp(mean) * stderr(mean).
  const double err = ppl * std::sqrt(var / std::max<int64_t>(1, count - 1));
  std::printf("perplexity: %.4f +/- %.4f over %lld chunks of %lld tokens (%lld scored)\n", ppl,
              err, static_cast<long long>(n_chunks), static_cast<long long>(n_ctx),
              static_cast<long long>(count));
  return 0;
}

}  // namespace

TACHYON_COMMAND(perplexity, "Perplexity of a model on a text file", RunPerplexity);

}  // namespace tachyon::cli
