// tachyon perplexity -m MODEL -f TEXT [--ctx N] [--chunks K] [-t THREADS] [--quantize Q]
//                    [--kv-cache-dtype D] [--kl-divergence-base FILE [--kl-divergence]]
//
// Perplexity as llama.cpp's llama-perplexity computes it: the text is tokenized once and cut
// into windows of N tokens; each window starts with BOS (when the tokenizer adds one), is run
// in one pass, and only the second half of its predictions is scored (every scored token then
// has at least N/2 tokens of context). PPL = exp(mean negative log-likelihood).
//
// KL divergence (the standard check of a quantization, like llama.cpp's):
//   1. --kl-divergence-base FILE with the reference (unquantized) model saves the windows'
//      tokens and the log-probabilities of every scored position to FILE;
//   2. --kl-divergence-base FILE --kl-divergence with the quantized model (-f not needed: the
//      tokens come from FILE) reports the mean KL(reference || quantized) per token, the top-1
//      agreement and the perplexity of both models over the same tokens.
// --kv-cache-dtype measures a KV cache dtype the same way: save the base with f16 (or f32) KV,
// then run --kl-divergence with the same model and --kv-cache-dtype q4_0 (docs/attention.md).
// FILE layout (little-endian): "TKLD" u32 version=1, i64 n_ctx, n_vocab, n_chunks, first,
// i32 tokens[n_chunks * n_ctx], then f32 log-probs [n_chunks][n_ctx - 1 - first][n_vocab].
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/flags.h"
#include "hub/resolve.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/mmap_file.h"

namespace tachyon::cli {
namespace perplexity_cmd {

constexpr const char* kDescription =
    "Perplexity of a model on a text file (windows of --ctx tokens, the second half of each\n"
    "scored), or the KL divergence of a model to a base model's saved log-probabilities:\n"
    "  tachyon perplexity -m BASE_MODEL -f TEXT --kl-divergence-base FILE   (save)\n"
    "  tachyon perplexity -m QUANT_MODEL --kl-divergence-base FILE --kl-divergence";

constexpr uint32_t kKlMagic = 0x444c4b54;  // "TKLD"
constexpr uint32_t kKlVersion = 1;

int Fail(const std::string& msg) {
  std::fprintf(stderr, "tachyon perplexity: error: %s\n", msg.c_str());
  return 1;
}

// log softmax(logits) into out[n_vocab], computed stably.
void LogSoftmax(const float* logits, int64_t n_vocab, std::vector<double>* out) {
  const float max_l = *std::max_element(logits, logits + n_vocab);
  double sum = 0;
  for (int64_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - max_l);
  const double log_sum = std::log(sum) + max_l;
  out->resize(static_cast<size_t>(n_vocab));
  for (int64_t i = 0; i < n_vocab; ++i) (*out)[i] = logits[i] - log_sum;
}

// Mean and standard error of a running sum.
struct Stat {
  double sum = 0, sq = 0;
  int64_t n = 0;
  void Add(double x) {
    sum += x;
    sq += x * x;
    ++n;
  }
  double Mean() const { return n ? sum / n : 0; }
  double StdErr() const {
    if (n < 2) return 0;
    const double var = std::max(0.0, sq / n - Mean() * Mean());
    return std::sqrt(var / (n - 1));
  }
};

struct KlHeader {
  int64_t n_ctx = 0, n_vocab = 0, n_chunks = 0, first = 0;
};

class File {
 public:
  File(const std::string& path, const char* mode)
      : path_(path), f_(std::fopen(path.c_str(), mode)) {}
  ~File() {
    if (f_) std::fclose(f_);
  }
  bool ok() const { return f_ != nullptr; }
  bool Write(const void* p, size_t n) { return std::fwrite(p, 1, n, f_) == n; }
  bool Read(void* p, size_t n) { return std::fread(p, 1, n, f_) == n; }
  bool Close() {
    const bool ok = std::fclose(f_) == 0;
    f_ = nullptr;
    return ok;
  }

 private:
  std::string path_;
  FILE* f_;
};

struct Options {
  std::string model_path, text_path, kl_base;
  bool kl = false;
  int64_t n_ctx = 0, max_chunks = -1;
  int threads = 0;
  model::LoadOptions load;
  model::KvDtype kv_dtype = model::kDefaultKvDtype;
};

// Runs window `chunk` of `tokens` and returns the logits of every position.
Status RunWindow(model::Model& m, model::KvCache* kv, ThreadPool* pool,
                 const std::vector<int32_t>& window, model::ForwardOutput* out) {
  model::Batch batch;
  batch.seqs.resize(1);
  const int64_t n = static_cast<int64_t>(window.size());
  const int64_t bs = kv->block_size();
  for (int64_t b = 0; b < (n + bs - 1) / bs; ++b) {
    batch.seqs[0].block_table.push_back(static_cast<int32_t>(b));
  }
  batch.tokens = window;
  batch.seqs[0].n_tokens = n;
  batch.seqs[0].num_logits = n;
  batch.seqs[0].pos_start = 0;
  return m.Forward(batch, kv, pool, out);
}

int RunKlDivergence(const Options& o, model::Model& m) {
  File in(o.kl_base, "rb");
  if (!in.ok()) return Fail("cannot open " + o.kl_base + ": " + std::strerror(errno));
  uint32_t magic = 0, version = 0;
  KlHeader h;
  if (!in.Read(&magic, 4) || !in.Read(&version, 4) || magic != kKlMagic || version != kKlVersion ||
      !in.Read(&h, sizeof(h))) {
    return Fail(o.kl_base +
                ": not a KL-divergence base file (write one with "
                "--kl-divergence-base FILE and the reference model, without "
                "--kl-divergence)");
  }
  if (h.n_ctx < 4 || h.n_ctx > (1 << 20) || h.n_chunks < 1 || h.n_chunks > (1 << 20) ||
      h.first < 1 || h.first >= h.n_ctx - 1 || h.n_vocab < 1 || h.n_vocab > (1 << 24)) {
    return Fail(o.kl_base + ": corrupt header");
  }
  if (h.n_vocab != m.config().n_vocab) {
    return Fail(o.kl_base + " holds logits over " + std::to_string(h.n_vocab) +
                " tokens but the model's vocabulary has " + std::to_string(m.config().n_vocab));
  }
  if (h.n_ctx > m.config().n_ctx_train && m.config().n_ctx_train > 0) {
    std::fprintf(stderr, "warning: windows of %lld tokens exceed the model's context %lld\n",
                 static_cast<long long>(h.n_ctx), static_cast<long long>(m.config().n_ctx_train));
  }
  std::vector<int32_t> tokens(static_cast<size_t>(h.n_chunks * h.n_ctx));
  if (!in.Read(tokens.data(), tokens.size() * sizeof(int32_t))) {
    return Fail(o.kl_base + ": truncated");
  }
  for (int32_t t : tokens) {
    if (t < 0 || t >= h.n_vocab) return Fail(o.kl_base + ": token id out of range");
  }
  int64_t n_chunks = h.n_chunks;
  if (o.max_chunks > 0) n_chunks = std::min(n_chunks, o.max_chunks);
  const int64_t bs = model::kDefaultBlockSize;
  auto kv = m.CreateKvCache((h.n_ctx + bs - 1) / bs, bs, o.kv_dtype);
  if (!kv.ok()) return Fail(kv.status().message());
  ThreadPool pool(o.threads);
  model::ForwardOutput out;
  std::vector<float> base(static_cast<size_t>(h.n_vocab));
  std::vector<double> lq;
  Stat kl, nll_base, nll_q, top1;
  double kl_max = 0;
  for (int64_t c = 0; c < n_chunks; ++c) {
    const std::vector<int32_t> window(tokens.begin() + c * h.n_ctx,
                                      tokens.begin() + (c + 1) * h.n_ctx);
    Status st = RunWindow(m, kv->get(), &pool, window, &out);
    if (!st.ok()) return Fail(st.message());
    for (int64_t j = h.first; j + 1 < h.n_ctx; ++j) {
      if (!in.Read(base.data(), base.size() * sizeof(float))) {
        return Fail(o.kl_base + ": truncated");
      }
      LogSoftmax(out.Row(j), h.n_vocab, &lq);
      double d = 0;
      int64_t arg_b = 0, arg_q = 0;
      for (int64_t v = 0; v < h.n_vocab; ++v) {
        const double lb = base[v];
        if (std::isnan(lb) || lb > 1e-4) return Fail(o.kl_base + ": corrupt log-probabilities");
        if (std::isfinite(lb)) d += std::exp(lb) * (lb - lq[v]);
        if (base[v] > base[arg_b]) arg_b = v;
        if (lq[v] > lq[arg_q]) arg_q = v;
      }
      d = std::max(0.0, d);
      kl.Add(d);
      kl_max = std::max(kl_max, d);
      top1.Add(arg_b == arg_q ? 1.0 : 0.0);
      const int32_t next = window[j + 1];
      nll_base.Add(-static_cast<double>(base[next]));
      nll_q.Add(-lq[next]);
    }
    std::fprintf(stderr, "[%lld]%.6f ", static_cast<long long>(c + 1), kl.Mean());
  }
  std::fprintf(stderr, "\n");
  const double ppl_b = std::exp(nll_base.Mean()), ppl_q = std::exp(nll_q.Mean());
  std::printf("scored tokens: %lld (%lld chunks of %lld)\n", static_cast<long long>(kl.n),
              static_cast<long long>(n_chunks), static_cast<long long>(h.n_ctx));
  std::printf("perplexity (base):  %.4f +/- %.4f\n", ppl_b, ppl_b * nll_base.StdErr());
  std::printf("perplexity (model): %.4f +/- %.4f\n", ppl_q, ppl_q * nll_q.StdErr());
  std::printf("perplexity ratio:   %.6f\n", ppl_q / ppl_b);
  std::printf("mean KL divergence: %.6f +/- %.6f (max %.6f)\n", kl.Mean(), kl.StdErr(), kl_max);
  std::printf("top-1 agreement:    %.3f%% +/- %.3f%%\n", 100 * top1.Mean(), 100 * top1.StdErr());
  return 0;
}

// Returns std::nullopt when the options are complete, else the exit code.
std::optional<int> ParseArgs(int argc, char** argv, Options* o) {
  auto app = NewCommandApp("perplexity", kDescription);
  app->add_option("-m,--model", o->model_path, "GGUF file, Hugging Face folder or ORG/NAME[:FILE]")
      ->required();
  app->add_option("-f,--file", o->text_path, "the text to score (not needed with --kl-divergence)");
  AddInt<int64_t>(*app, "-c,--ctx", &o->n_ctx, 4, 1 << 20,
                  "tokens per window (default: 512, at most the model's context)")
      ->default_str("");
  AddInt<int64_t>(*app, "--chunks", &o->max_chunks, 1, int64_t{1} << 40,
                  "score at most this many windows (default: all)")
      ->default_str("");
  AddInt(*app, "-t,--threads", &o->threads, 0, 1024, "threads (0: all hardware threads)");
  AddChoice(*app, "--quantize", &o->load.quantize, QuantizeAtLoadChoices(),
            "quantize float weights at load");
  AddKvDtype(*app, "--kv-cache-dtype", &o->kv_dtype, "KV cache storage");
  app->add_option("--kl-divergence-base", o->kl_base,
                  "without --kl-divergence: save the log-probabilities here; with it: read them");
  app->add_flag("--kl-divergence", o->kl, "report KL(base || model) against --kl-divergence-base")
      ->needs("--kl-divergence-base");
  if (std::optional<int> rc = ParseFlags(*app, argc, argv)) return rc;
  if (o->text_path.empty() && !o->kl) {
    std::fprintf(stderr,
                 "tachyon perplexity: error: -f TEXT is required (unless --kl-divergence)\n");
    return 2;
  }
  o->load.threads = o->threads;
  return std::nullopt;
}

int RunPerplexity(int argc, char** argv) {
  Options o;
  if (std::optional<int> rc = ParseArgs(argc, argv, &o)) return *rc;
  auto resolved = hub::ResolveModel(o.model_path);
  if (!resolved.ok()) return Fail(resolved.status().message());
  auto model = model::Model::Load(resolved->model_path, o.load);
  if (!model.ok()) return Fail(model.status().message());
  model::Model& m = **model;
  if (o.kl) return RunKlDivergence(o, m);
  auto text = ReadFileToString(o.text_path);
  if (!text.ok()) return Fail(text.status().message());
  auto tok = tokenizer::Tokenizer::FromGguf(m.file());
  if (!tok.ok()) return Fail(tok.status().message());
  int64_t n_ctx = o.n_ctx;
  if (n_ctx == 0) n_ctx = std::min<int64_t>(512, m.config().n_ctx_train);
  if (n_ctx < 4) return Fail("the model's context is under 4 tokens");
  const std::vector<int32_t> ids = (*tok)->Encode(*text, /*add_special=*/false);
  const bool add_bos = (*tok)->add_bos() && (*tok)->bos_id() >= 0;
  int64_t n_chunks = static_cast<int64_t>(ids.size()) / n_ctx;
  if (n_chunks == 0) {
    return Fail(o.text_path + " has " + std::to_string(ids.size()) + " tokens; need at least " +
                std::to_string(n_ctx) + " (lower --ctx)");
  }
  if (o.max_chunks > 0) n_chunks = std::min(n_chunks, o.max_chunks);
  const int64_t bs = model::kDefaultBlockSize;
  auto kv = m.CreateKvCache((n_ctx + bs - 1) / bs, bs, o.kv_dtype);
  if (!kv.ok()) return Fail(kv.status().message());
  ThreadPool pool(o.threads);
  model::ForwardOutput out;
  const int64_t first = n_ctx / 2;
  // KL base: header and tokens first, log-probs as the windows run.
  std::unique_ptr<File> base;
  if (!o.kl_base.empty()) {
    base = std::make_unique<File>(o.kl_base, "wb");
    if (!base->ok()) return Fail("cannot open " + o.kl_base + ": " + std::strerror(errno));
    KlHeader h{n_ctx, m.config().n_vocab, n_chunks, first};
    std::vector<int32_t> all;
    for (int64_t c = 0; c < n_chunks; ++c) {
      all.insert(all.end(), ids.begin() + c * n_ctx, ids.begin() + (c + 1) * n_ctx);
      if (add_bos) all[c * n_ctx] = (*tok)->bos_id();
    }
    if (!base->Write(&kKlMagic, 4) || !base->Write(&kKlVersion, 4) || !base->Write(&h, sizeof(h)) ||
        !base->Write(all.data(), all.size() * sizeof(int32_t))) {
      return Fail("write to " + o.kl_base + " failed");
    }
  }
  Stat nll;
  std::vector<double> lp;
  std::vector<float> lp32;
  for (int64_t chunk = 0; chunk < n_chunks; ++chunk) {
    std::vector<int32_t> window(ids.begin() + chunk * n_ctx, ids.begin() + (chunk + 1) * n_ctx);
    if (add_bos) window[0] = (*tok)->bos_id();
    Status st = RunWindow(m, kv->get(), &pool, window, &out);
    if (!st.ok()) return Fail(st.message());
    for (int64_t j = first; j + 1 < n_ctx; ++j) {
      LogSoftmax(out.Row(j), out.n_vocab, &lp);
      nll.Add(-lp[window[j + 1]]);
      if (base) {
        lp32.assign(lp.begin(), lp.end());
        if (!base->Write(lp32.data(), lp32.size() * sizeof(float))) {
          return Fail("write to " + o.kl_base + " failed");
        }
      }
    }
    std::fprintf(stderr, "[%lld]%.4f ", static_cast<long long>(chunk + 1), std::exp(nll.Mean()));
  }
  std::fprintf(stderr, "\n");
  if (base && !base->Close()) return Fail("write to " + o.kl_base + " failed");
  const double ppl = std::exp(nll.Mean());
  // Delta method: the standard error of exp(mean) is exp(mean) * stderr(mean).
  std::printf("perplexity: %.4f +/- %.4f over %lld chunks of %lld tokens (%lld scored)\n", ppl,
              ppl * nll.StdErr(), static_cast<long long>(n_chunks), static_cast<long long>(n_ctx),
              static_cast<long long>(nll.n));
  if (base)
    std::printf("saved the log-probabilities for --kl-divergence to %s\n", o.kl_base.c_str());
  return 0;
}

TACHYON_COMMAND(perplexity, "Perplexity of a model on a text file (and KL divergence to a base)",
                RunPerplexity);

}  // namespace perplexity_cmd

}  // namespace tachyon::cli
