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
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/engine_flags.h"
#include "cli/flags.h"
#include "engine/serving_engine.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::cli {
namespace run_cmd {

int Fail(const std::string& msg) {
  std::fprintf(stderr, "tachyon run: error: %s\n", msg.c_str());
  return 1;
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
  int64_t n_predict = 128;
  sampling::SamplingParams params;
};

// Returns std::nullopt when the options are complete, else the exit code (0 after --help).
std::optional<int> ParseArgs(int argc, char** argv, RunOptions* o) {
  sampling::SamplingParams& p = o->params;
  p.temperature = 0.8f;
  p.top_k = 40;
  p.top_p = 0.95f;
  auto app = NewCommandApp(
      "run",
      "Generates text for one prompt through the serving engine and streams it to stdout;\n"
      "stops after -n tokens, at an end-of-generation token (unless --ignore-eos), at a --stop\n"
      "string or at the end of the context. Timing goes to stderr.");
  AddEngineFlags(*app, &o->engine);
  app->add_option("-p,--prompt", o->prompt, "the prompt")->required();
  AddInt<int64_t>(*app, "-n,--n-predict", &o->n_predict, -1, 1 << 30,
                  "tokens to generate (-1: until the context is full)");
  constexpr const char* kSampling = "Sampling options";
  AddNumber(*app, "--temp", &p.temperature, -1e6, 1e6, "temperature (0 or below: greedy)")
      ->group(kSampling);
  AddInt(*app, "--top-k", &p.top_k, 0, 1 << 30, "keep the K most likely tokens (0: off)")
      ->group(kSampling);
  AddNumber(*app, "--top-p", &p.top_p, 0, 1, "nucleus sampling (1: off)")->group(kSampling);
  AddNumber(*app, "--min-p", &p.min_p, 0, 1, "drop tokens below P x the top probability (0: off)")
      ->group(kSampling);
  AddNumber(*app, "--repeat-penalty", &p.repetition_penalty, 0, 1e6,
            "penalize tokens of the prompt and output (1: off)")
      ->group(kSampling);
  AddNumber(*app, "--presence-penalty", &p.presence_penalty, -2, 2, "OpenAI presence penalty")
      ->group(kSampling);
  AddNumber(*app, "--frequency-penalty", &p.frequency_penalty, -2, 2, "OpenAI frequency penalty")
      ->group(kSampling);
  app->add_option_function<std::string>(
         "--seed",
         [&p](const std::string& v) {
           const std::optional<uint64_t> seed = ParseInteger<uint64_t>(v);
           if (!seed) throw BadValue("--seed", v, "a non-negative integer");
           p.seed = *seed;
         },
         "random seed (default: random)")
      ->type_name("INT")
      ->group(kSampling);
  app->add_flag("--ignore-eos", p.ignore_eos, "do not stop at end-of-generation tokens")
      ->group(kSampling);
  app->add_option("--stop", p.stop, "stop before this string (may be repeated)")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->group(kSampling);
  if (std::optional<int> rc = ParseFlags(*app, argc, argv)) return rc;
  p.temperature = std::max(p.temperature, 0.0f);  // like llama.cpp: a negative one is greedy
  return std::nullopt;
}

int RunRun(int argc, char** argv) {
  RunOptions o;
  if (std::optional<int> rc = ParseArgs(argc, argv, &o)) return *rc;

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
  if (core == nullptr)
    return Fail(se.model->config().name +
                " is a pooling (embedding / score) model; serve it with tachyon serve");

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
  if (o.engine.speculative.enabled()) {
    const spec::SpecStats s = core->Metrics().spec;
    std::fprintf(stderr, "speculative: %lld drafts, %lld of %lld drafted tokens accepted",
                 static_cast<long long>(s.num_drafts),
                 static_cast<long long>(s.num_accepted_tokens),
                 static_cast<long long>(s.num_draft_tokens));
    // Drafts whose token i was accepted, i = 1, 2, ...; the draft model's share of the time.
    if (!s.accepted_per_position.empty()) std::fprintf(stderr, "; by position:");
    for (int64_t a : s.accepted_per_position)
      std::fprintf(stderr, " %lld", static_cast<long long>(a));
    if (s.num_draft_forwards > 0) {
      std::fprintf(stderr, "; draft model: %lld forwards, %.2f s (target: %.2f s)",
                   static_cast<long long>(s.num_draft_forwards), s.draft_seconds,
                   core->Metrics().forward_seconds);
    }
    std::fputc('\n', stderr);
    // What the cost rule measured last (lower medians of the newest): the target's step by its
    // rows, the draft model's one-row forward.
    std::fprintf(stderr, "speculative step ms by rows:");
    for (size_t r = 0; r < s.step_seconds.size(); ++r) {
      if (s.step_seconds[r] > 0) std::fprintf(stderr, " %zu:%.2f", r + 1, 1e3 * s.step_seconds[r]);
    }
    if (s.draft_forward_seconds > 0) {
      std::fprintf(stderr, "; draft model one-row forward %.2f ms", 1e3 * s.draft_forward_seconds);
    }
    std::fputc('\n', stderr);
  }
  return 0;
}

TACHYON_COMMAND(run, "Generate text for a prompt (streams to stdout)", RunRun);

}  // namespace run_cmd

}  // namespace tachyon::cli
