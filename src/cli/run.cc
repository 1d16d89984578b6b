// tachyon run -m MODEL -p PROMPT [-n N] [--temp T] [--top-k K] [--top-p P] [--seed S]
//             [-t THREADS]
// Generates text for one prompt and streams it to stdout; stops after N tokens or at an
// end-of-generation token. Greedy when --temp 0. Timing goes to stderr.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cli/command.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::cli {
namespace {

constexpr const char* kUsage =
    "usage: tachyon run -m MODEL -p PROMPT [-n N=128] [--temp T=0.8] [--top-k K=40]\n"
    "                   [--top-p P=0.95] [--seed S] [-t THREADS]\n";

struct SamplerOptions {
  float temp = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
};

// A simple sampler: greedy at temp <= 0, else temperature -> top-k -> top-p -> draw.
class SimpleSampler {
 public:
  SimpleSampler(const SamplerOptions& o, uint64_t seed) : o_(o), rng_(seed) {}

  int32_t Sample(const float* logits, int64_t n_vocab) {
    if (o_.temp <= 0) return static_cast<int32_t>(std::max_element(logits, logits + n_vocab) - logits);
    idx_.resize(n_vocab);
    std::iota(idx_.begin(), idx_.end(), 0);
    const int64_t k = o_.top_k > 0 ? std::min<int64_t>(o_.top_k, n_vocab) : n_vocab;
    std::partial_sort(idx_.begin(), idx_.begin() + k, idx_.end(),
                      [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    probs_.resize(k);
    const float max_l = logits[idx_[0]];
    double sum = 0;
    for (int64_t i = 0; i < k; ++i) sum += probs_[i] = std::exp((logits[idx_[i]] - max_l) / o_.temp);
    int64_t keep = k;
    double cum = 0;
    for (int64_t i = 0; i < k; ++i) {
      cum += probs_[i] / sum;
      if (cum >= o_.top_p) {
        keep = i + 1;
        break;
      }
    }
    std::discrete_distribution<int64_t> dist(probs_.begin(), probs_.begin() + keep);
    return idx_[dist(rng_)];
  }

 private:
  SamplerOptions o_;
  std::mt19937_64 rng_;
  std::vector<int32_t> idx_;
  std::vector<double> probs_;
};

int Fail(const std::string& msg) {
  std::fprintf(stderr, "tachyon run: error: %s\n", msg.c_str());
  return 1;
}

int RunRun(int argc, char** argv) {
  std::string model_path, prompt;
  bool have_prompt = false;
  int64_t n_predict = 128;
  int threads = 0;
  uint64_t seed = std::random_device{}();
  SamplerOptions so;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if ((a == "-m" || a == "--model") && (v = value())) {
      model_path = v;
    } else if ((a == "-p" || a == "--prompt") && (v = value())) {
      prompt = v;
      have_prompt = true;
    } else if ((a == "-n" || a == "--n-predict") && (v = value())) {
      n_predict = std::atoll(v);
    } else if ((a == "-t" || a == "--threads") && (v = value())) {
      threads = std::atoi(v);
    } else if (a == "--temp" && (v = value())) {
      so.temp = std::strtof(v, nullptr);
    } else if (a == "--top-k" && (v = value())) {
      so.top_k = std::atoi(v);
    } else if (a == "--top-p" && (v = value())) {
      so.top_p = std::strtof(v, nullptr);
    } else if (a == "--seed" && (v = value())) {
      seed = std::strtoull(v, nullptr, 10);
    } else {
      std::fputs(kUsage, stderr);
      return Fail("bad or incomplete argument '" + a + "'");
    }
  }
  if (model_path.empty() || !have_prompt) {
    std::fputs(kUsage, stderr);
    return Fail("-m and -p are required");
  }
  if (n_predict < 0) return Fail("-n must be >= 0");
  if (!(so.top_p > 0 && so.top_p <= 1) || !std::isfinite(so.temp)) {
    return Fail("--top-p must be in (0, 1] and --temp finite");
  }
  auto model = model::Model::Load(model_path);
  if (!model.ok()) return Fail(model.status().message());
  model::Model& m = **model;
  auto tok = tokenizer::Tokenizer::FromGguf(m.file());
  if (!tok.ok()) return Fail(tok.status().message());
  std::vector<int32_t> ids = (*tok)->Encode(prompt);
  if (ids.empty()) ids.push_back(std::max<int32_t>(0, (*tok)->bos_id()));
  const int64_t n_ctx = std::max<int64_t>(m.config().n_ctx_train, 1);
  const int64_t n_prompt = static_cast<int64_t>(ids.size());
  if (n_prompt >= n_ctx) {
    return Fail("prompt of " + std::to_string(n_prompt) + " tokens does not fit the context of " +
                std::to_string(n_ctx));
  }
  const int64_t total = std::min(n_ctx, n_prompt + n_predict);
  const int64_t bs = model::kDefaultBlockSize;
  auto kv = m.CreateKvCache((total + bs - 1) / bs, bs);
  if (!kv.ok()) return Fail(kv.status().message());
  ThreadPool pool(threads);
  SimpleSampler sampler(so, seed);
  // The prompt goes through the detokenizer first (its text is not printed), so the first
  // generated piece keeps its leading space as a continuation of the prompt.
  tokenizer::IncrementalDetokenizer detok(**tok);
  for (int32_t id : ids) detok.Push(id);

  model::Batch batch;
  batch.seqs.resize(1);
  for (int64_t b = 0; b < (total + bs - 1) / bs; ++b) {
    batch.seqs[0].block_table.push_back(static_cast<int32_t>(b));
  }
  model::ForwardOutput out;
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  // Prefill in chunks of up to 512 tokens.
  for (int64_t start = 0; start < n_prompt; start += 512) {
    const int64_t len = std::min<int64_t>(512, n_prompt - start);
    batch.tokens.assign(ids.begin() + start, ids.begin() + start + len);
    batch.seqs[0].n_tokens = len;
    batch.seqs[0].pos_start = start;
    Status st = m.Forward(batch, kv->get(), &pool, &out);
    if (!st.ok()) return Fail(st.message());
  }
  const auto t1 = Clock::now();
  int64_t n_gen = 0;
  for (int64_t pos = n_prompt; n_gen < n_predict; ++pos) {
    const int32_t next = sampler.Sample(out.Row(0), out.n_vocab);
    if ((*tok)->IsEog(next)) break;
    ++n_gen;
    const std::string text = detok.Push(next);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    if (pos >= total) break;
    batch.tokens = {next};
    batch.seqs[0].n_tokens = 1;
    batch.seqs[0].pos_start = pos;
    if (n_gen == n_predict) break;
    Status st = m.Forward(batch, kv->get(), &pool, &out);
    if (!st.ok()) return Fail(st.message());
  }
  const std::string rest = detok.Flush();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::fputc('\n', stdout);
  const auto t2 = Clock::now();
  const double pp_s = std::chrono::duration<double>(t1 - t0).count();
  const double tg_s = std::chrono::duration<double>(t2 - t1).count();
  std::fprintf(stderr, "prompt: %lld tokens, %.2f tok/s; generated: %lld tokens, %.2f tok/s\n",
               static_cast<long long>(n_prompt), n_prompt / std::max(pp_s, 1e-9),
               static_cast<long long>(n_gen), n_gen / std::max(tg_s, 1e-9));
  return 0;
}

}  // namespace

TACHYON_COMMAND(run, "Generate text for a prompt (streams to stdout)", RunRun);

}  // namespace tachyon::cli
