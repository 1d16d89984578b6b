// tachyon run -m MODEL -p PROMPT [-n N] [sampling options] [-t THREADS] [-c CTX]
// Generates text for one prompt through the serving engine (engine::BuildServingEngine, as
// `tachyon serve`: the same scheduler, sampler, stop checks, EOS ids and incremental
// detokenizer, with one sequence) and streams it to
// stdout as it is produced; stops after N tokens, at an end-of-generation token (unless
// --ignore-eos), at a --stop string or at the end of the context. Greedy when --temp 0.
// Timing goes to stderr.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.h"
#include "engine/serving_engine.h"
#include "kernels/attention.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::cli {
namespace {

constexpr const char* kUsage =
    "usage: tachyon run -m MODEL -p PROMPT [options]\n"
    "  -n, --n-predict N        tokens to generate (default 128; -1: until the context is full)\n"
    "  -t, --threads N          compute threads (default: all hardware threads)\n"
    "  -c, --ctx-size N         context length (default: the model's)\n"
    "  --temp T                 temperature (default 0.8; 0: greedy)\n"
    "  --top-k K                keep the K most likely tokens (default 40; 0: off)\n"
    "  --top-p P                nucleus sampling (default 0.95; 1: off)\n"
    "  --min-p P                drop tokens below P x the top probability (default 0: off)\n"
    "  --repeat-penalty F       penalize tokens of the prompt and output (default 1: off)\n"
    "  --presence-penalty F     OpenAI presence penalty in [-2, 2] (default 0)\n"
    "  --frequency-penalty F    OpenAI frequency penalty in [-2, 2] (default 0)\n"
    "  --seed S                 random seed (default: random)\n"
    "  --ignore-eos             do not stop at end-of-generation tokens\n"
    "  --stop STR               stop before STR (may be repeated)\n"
    "  --kv-cache-dtype TYPE    KV cache storage: f16 (default), bf16, q8_0 or f32\n"
    "  --quantize TYPE          quantize float weights at load: q8_0, q4_0 or q4_k\n";

int Fail(const std::string& msg) {
  std::fprintf(stderr, "tachyon run: error: %s\n", msg.c_str());
  return 1;
}

bool ParseInt(const char* s, int64_t* out) {
  char* end = nullptr;
  const long long v = std::strtoll(s, &end, 10);
  if (end == s || *end != '\0') return false;
  *out = v;
  return true;
}

bool ParseFloat(const char* s, float* out) {
  char* end = nullptr;
  const float v = std::strtof(s, &end);
  if (end == s || *end != '\0') return false;
  *out = v;
  return true;
}

struct RunOptions {
  RunOptions() {
    // One sequence; prefill in chunks of 512 tokens; the KV pool sized as for serving. A
    // context of N positions yields up to N predicted tokens: the token sampled from the last
    // position needs no KV of its own, so a sequence may hold N + 1 tokens (as llama2.c).
    engine.max_num_batched_tokens = 512;
    engine.max_num_seqs = 1;
    engine.context_extra_tokens = 1;
  }
  engine::ServingOptions engine;
  std::string prompt;
  bool have_prompt = false;
  int64_t n_predict = 128;
  sampling::SamplingParams params;
};

// Returns 0 when the options are complete, -1 after --help, else the exit code.
int ParseArgs(int argc, char** argv, RunOptions* o) {
  sampling::SamplingParams& p = o->params;
  p.temperature = 0.8f;
  p.top_k = 40;
  p.top_p = 0.95f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return -1;
    }
    if (a == "--ignore-eos") {
      p.ignore_eos = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fputs(kUsage, stderr);
      return Fail("bad or incomplete argument '" + a + "'");
    }
    const char* v = argv[++i];
    int64_t n = 0;
    float f = 0;
    const bool is_int = ParseInt(v, &n), is_float = ParseFloat(v, &f);
    auto bad = [&](const char* what) { return Fail(a + ": '" + v + "' is not " + what); };
    if (a == "-m" || a == "--model") {
      o->engine.model = v;
    } else if (a == "-p" || a == "--prompt") {
      o->prompt = v;
      o->have_prompt = true;
    } else if (a == "--kv-cache-dtype") {
      auto dtype = kernels::ParseKvDtype(v);
      if (!dtype.ok()) return bad("f16, bf16, q8_0 or f32");
      o->engine.kv_dtype = *dtype;
    } else if (a == "--quantize") {
      if (std::string q = v; q != "q8_0" && q != "q4_0" && q != "q4_k")
        return bad("q8_0, q4_0 or q4_k");
      o->engine.quantize = v;
    } else if (a == "--stop") {
      p.stop.emplace_back(v);
    } else if (a == "-n" || a == "--n-predict") {
      if (!is_int || n < -1 || n > (1 << 30)) return bad("a token count (or -1)");
      o->n_predict = n;
    } else if (a == "-t" || a == "--threads") {
      if (!is_int || n < 0 || n > 1024) return bad("a thread count");
      o->engine.threads = static_cast<int>(n);
    } else if (a == "-c" || a == "--ctx-size") {
      if (!is_int || n < 0 || n > (1 << 24)) return bad("a context length");
      o->engine.max_model_len = n;  // 0: the model's, lowered to fit the KV budget
    } else if (a == "--top-k") {
      if (!is_int || n > (1 << 30)) return bad("an integer");
      p.top_k = static_cast<int>(n);
    } else if (a == "--seed") {
      char* end = nullptr;
      const unsigned long long s = std::strtoull(v, &end, 10);
      if (end == v || *end != '\0' || *v == '-') return bad("a non-negative integer");
      p.seed = s;
    } else if (!is_float &&
               (a == "--temp" || a == "--top-p" || a == "--min-p" || a == "--repeat-penalty" ||
                a == "--presence-penalty" || a == "--frequency-penalty")) {
      return bad("a number");
    } else if (a == "--temp") {
      p.temperature = std::max(f, 0.0f);  // like llama.cpp: a negative temperature is greedy
    } else if (a == "--top-p") {
      p.top_p = f;
    } else if (a == "--min-p") {
      p.min_p = f;
    } else if (a == "--repeat-penalty") {
      p.repetition_penalty = f;
    } else if (a == "--presence-penalty") {
      p.presence_penalty = f;
    } else if (a == "--frequency-penalty") {
      p.frequency_penalty = f;
    } else {
      std::fputs(kUsage, stderr);
      return Fail("unknown argument '" + a + "'");
    }
  }
  if (o->engine.model.empty() || !o->have_prompt) {
    std::fputs(kUsage, stderr);
    return Fail("-m and -p are required");
  }
  return 0;
}

int RunRun(int argc, char** argv) {
  RunOptions o;
  if (int rc = ParseArgs(argc, argv, &o); rc != 0) return rc < 0 ? 0 : rc;

  auto built = engine::BuildServingEngine(o.engine);
  if (!built.ok()) return Fail(built.status().message());
  engine::ServingEngine& se = *built;
  const tokenizer::Tokenizer& tok = *se.tokenizer;

  std::vector<int32_t> ids = tok.Encode(o.prompt);
  if (ids.empty()) ids.push_back(std::max<int32_t>(0, tok.bos_id()));
  const int64_t max_len = se.kv.max_model_len;  // the context + 1
  const int64_t n_ctx = max_len - 1;
  const int64_t n_prompt = static_cast<int64_t>(ids.size());
  if (n_prompt >= n_ctx) {
    return Fail("prompt of " + std::to_string(n_prompt) + " tokens does not fit the context of " +
                std::to_string(n_ctx));
  }
  if (o.n_predict == 0) {  // nothing to generate
    std::fputc('\n', stdout);
    return 0;
  }
  const int64_t room = max_len - n_prompt;
  o.params.max_tokens =
      static_cast<int>(o.n_predict < 0 ? room : std::min<int64_t>(o.n_predict, room));
  engine::EngineCore* core = se.core.get();

  engine::EngineRequest req;
  req.prompt_tokens = ids;
  req.params = o.params;
  using Clock = std::chrono::steady_clock;
  // The first output carries the first token: its time (taken on the engine thread by the
  // stream's notifier) ends the prompt phase.
  std::atomic<int64_t> first_ns{-1};
  const auto t0 = Clock::now();
  auto stream = core->AddRequest(std::move(req), [&first_ns, t0] {
    if (first_ns.load(std::memory_order_relaxed) < 0) {
      first_ns.store((Clock::now() - t0).count(), std::memory_order_relaxed);
    }
  });
  if (!stream.ok()) return Fail(stream.status().message());
  int64_t n_gen = 0;
  int32_t last_token = -1;
  engine::FinishReason reason = engine::FinishReason::kNone;
  Status error;
  while (auto out = (*stream)->Next()) {
    n_gen += static_cast<int64_t>(out->token_ids.size());
    if (!out->token_ids.empty()) last_token = out->token_ids.back();
    std::fwrite(out->text.data(), 1, out->text.size(), stdout);
    std::fflush(stdout);
    if (out->finish_reason != engine::FinishReason::kNone) reason = out->finish_reason;
    if (!out->error.ok()) error = out->error;
  }
  std::fputc('\n', stdout);
  const auto t2 = Clock::now();
  core->Stop();  // joins the engine thread: its notifier calls are done
  const Clock::time_point t_first =
      first_ns.load() < 0 ? t2 : t0 + Clock::duration(first_ns.load());
  if (reason == engine::FinishReason::kError) return Fail(error.message());
  // An end-of-generation token is not part of the output; count only the printed tokens.
  if (reason == engine::FinishReason::kStop && !o.params.ignore_eos && tok.IsEog(last_token)) {
    --n_gen;
  }
  const double pp_s = std::chrono::duration<double>(t_first - t0).count();
  const double tg_s = std::chrono::duration<double>(t2 - t_first).count();
  // The first token comes with the prompt; the decode rate counts the ones after it.
  const int64_t n_decoded = std::max<int64_t>(n_gen - 1, 0);
  std::fprintf(stderr,
               "prompt: %lld tokens, %.2f tok/s; generated: %lld tokens, %.2f tok/s "
               "(finish: %s)\n",
               static_cast<long long>(n_prompt), n_prompt / std::max(pp_s, 1e-9),
               static_cast<long long>(n_gen), n_decoded / std::max(tg_s, 1e-9),
               std::string(engine::FinishReasonName(reason)).c_str());
  return 0;
}

}  // namespace

TACHYON_COMMAND(run, "Generate text for a prompt (streams to stdout)", RunRun);

}  // namespace tachyon::cli
