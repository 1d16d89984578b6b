// tachyon bench -m MODEL --concurrency 1,4,16,64 [-p 128] [-n 64] [-t T] [--json]
//
// Drives EngineCore directly (no HTTP) the way a burst of clients would: for each level N,
// N requests are added at once (they reach the same engine step), each with its own random
// prompt of P token ids (distinct content, so the prefix cache cannot short-cut them; the
// cached-token count is reported to prove it) and ignore_eos, generating exactly G tokens
// greedily (unless a --stop string matches), with streaming detokenization on as when serving.
// Per level:
//  - aggregate_tok_s: all generated tokens / wall time of the level (first add to last finish;
//    prefill included);
//  - decode_tok_s: the sum of the requests' decode rates (tokens after the first / time from
//    their first to their last token): batched decode throughput without the prefill;
//  - per-request decode tok/s (median), TTFT (add to first token, queueing included) and TPOT
//    (mean gap between a request's later tokens) percentiles;
//  - engine steps, preemptions, and where the engine thread's time went (forward passes,
//    sampling, detokenization + stop strings).
// With TACHYON_PROFILE=1, each level's per-op profile of the forward passes goes to stderr.
#include "cli/bench_concurrency.h"
#include "kernels/peak.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <utility>

#include "engine/serving_engine.h"
#include "model/model.h"
#include "util/thread_pool.h"

namespace tachyon::cli {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Linear interpolation between closest ranks; 0 for an empty set.
double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

int Fail(const std::string& msg) {
  std::fprintf(stderr, "tachyon bench: error: %s\n", msg.c_str());
  return 1;
}

struct RequestTiming {
  Clock::time_point added, first, last;
  int64_t tokens = 0;
  int64_t cached_prompt_tokens = 0;
  engine::FinishReason reason = engine::FinishReason::kNone;
  std::string error;
};

struct LevelResult {
  int concurrency = 0;
  int64_t generated_tokens = 0, cached_prompt_tokens = 0;
  double wall_s = 0, aggregate_tok_s = 0, decode_tok_s = 0, per_request_tok_s_p50 = 0;
  double ttft_p50_ms = 0, ttft_p99_ms = 0, tpot_p50_ms = 0, tpot_p99_ms = 0;
  int64_t steps = 0, preemptions = 0;
  int64_t spec_draft_tokens = 0, spec_accepted_tokens = 0;  // speculative decoding
  double forward_s = 0, sample_s = 0, detokenize_s = 0;
};

class Runner {
 public:
  Runner(engine::EngineCore* core, const ConcurrencyBenchOptions& o, int32_t n_vocab,
         bool has_detokenizer)
      : core_(core), o_(o), n_vocab_(n_vocab), ec_has_detokenizer_(has_detokenizer) {}

  // Runs `n` requests at once generating `n_gen` tokens each; waits for all of them.
  Result<LevelResult> Level(int n, int64_t n_gen) {
    const engine::EngineMetrics before = core_->Metrics();
    std::vector<RequestTiming> t(static_cast<size_t>(n));
    int done = 0;
    std::vector<std::pair<engine::EngineRequest, std::function<void(engine::RequestOutput)>>> batch;
    for (int i = 0; i < n; ++i) {
      engine::EngineRequest req;
      req.prompt_tokens.resize(static_cast<size_t>(o_.n_prompt));
      for (int32_t& id : req.prompt_tokens) id = static_cast<int32_t>(rng_() % n_vocab_);
      req.params.temperature = 0;
      req.params.ignore_eos = true;
      req.params.max_tokens = static_cast<int>(n_gen);
      if (ec_has_detokenizer_) req.params.stop = o_.stop;
      RequestTiming* rt = &t[static_cast<size_t>(i)];
      batch.emplace_back(std::move(req), [this, rt, &done](engine::RequestOutput out) {
        const auto now = Clock::now();  // engine thread: record and return
        if (!out.token_ids.empty()) {
          if (rt->tokens == 0) rt->first = now;
          rt->last = now;
          rt->tokens += static_cast<int64_t>(out.token_ids.size());
        }
        if (out.finish_reason != engine::FinishReason::kNone) rt->reason = out.finish_reason;
        if (!out.error.ok()) rt->error = out.error.message();
        if (out.finished) {
          rt->cached_prompt_tokens = out.usage.cached_prompt_tokens;
          std::lock_guard<std::mutex> lock(mu_);
          ++done;
          cv_.notify_all();
        }
      });
    }
    // All requests arrive together, before the same engine step.
    const auto t0 = Clock::now();
    for (RequestTiming& x : t) x.added = t0;
    auto ids = core_->AddRequestsWithCallbacks(std::move(batch));
    if (!ids.ok()) return ids.status();
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return done == n; });
    }
    const auto t1 = Clock::now();
    // The metrics snapshot is taken right after the step that delivered the last output.
    engine::EngineMetrics after = core_->Metrics();
    while (after.requests_finished < before.requests_finished + n) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      after = core_->Metrics();
    }

    LevelResult r;
    r.concurrency = n;
    r.wall_s = Seconds(t0, t1);
    std::vector<double> ttft, tpot, req_tok_s;
    for (const RequestTiming& x : t) {
      if (!x.error.empty()) return Internal("a request failed: " + x.error);
      r.generated_tokens += x.tokens;
      r.cached_prompt_tokens += x.cached_prompt_tokens;
      if (x.tokens > 0) ttft.push_back(1e3 * Seconds(x.added, x.first));
      if (x.tokens > 1) {
        const double decode_s = Seconds(x.first, x.last);
        tpot.push_back(1e3 * decode_s / static_cast<double>(x.tokens - 1));
        req_tok_s.push_back(decode_s > 0 ? static_cast<double>(x.tokens - 1) / decode_s : 0);
      }
    }
    r.aggregate_tok_s = static_cast<double>(r.generated_tokens) / std::max(r.wall_s, 1e-9);
    for (double x : req_tok_s) r.decode_tok_s += x;
    r.per_request_tok_s_p50 = Percentile(req_tok_s, 0.5);
    r.ttft_p50_ms = Percentile(ttft, 0.5);
    r.ttft_p99_ms = Percentile(ttft, 0.99);
    r.tpot_p50_ms = Percentile(tpot, 0.5);
    r.tpot_p99_ms = Percentile(tpot, 0.99);
    r.steps = after.num_steps - before.num_steps;
    r.preemptions = after.num_preemptions - before.num_preemptions;
    r.spec_draft_tokens = after.spec.num_draft_tokens - before.spec.num_draft_tokens;
    r.spec_accepted_tokens = after.spec.num_accepted_tokens - before.spec.num_accepted_tokens;
    r.forward_s = after.forward_seconds - before.forward_seconds;
    r.sample_s = after.sample_seconds - before.sample_seconds;
    r.detokenize_s = after.detokenize_seconds - before.detokenize_seconds;
    return r;
  }

 private:
  engine::EngineCore* core_;
  const ConcurrencyBenchOptions& o_;
  int32_t n_vocab_;
  bool ec_has_detokenizer_;
  std::mt19937_64 rng_{20260601};
  std::mutex mu_;
  std::condition_variable cv_;
};

// Fraction of the int8 compute roofline: 2 ops per matmul multiply-add of every token.
double PeakRatio(double tok_s, uint64_t macs_per_token, const kernels::ComputePeak& peak) {
  return peak.int8_gops > 0
             ? tok_s * 2.0 * static_cast<double>(macs_per_token) / (peak.int8_gops * 1e9)
             : 0;
}

nlohmann::json ToJson(const LevelResult& r, const ConcurrencyBenchOptions& o,
                      uint64_t macs_per_token, const kernels::ComputePeak& peak) {
  return {{"concurrency", r.concurrency},
          {"int8_peak_gops", peak.int8_gops},
          {"int8_peak_instr", peak.int8_instr},
          {"matmul_macs_per_token", macs_per_token},
          {"decode_int8_peak_ratio", PeakRatio(r.decode_tok_s, macs_per_token, peak)},
          {"prompt_tokens", o.n_prompt},
          {"gen_tokens", o.n_gen},
          {"generated_tokens", r.generated_tokens},
          {"cached_prompt_tokens", r.cached_prompt_tokens},
          {"wall_s", r.wall_s},
          {"aggregate_tok_s", r.aggregate_tok_s},
          {"decode_tok_s", r.decode_tok_s},
          {"per_request_tok_s_p50", r.per_request_tok_s_p50},
          {"ttft_p50_ms", r.ttft_p50_ms},
          {"ttft_p99_ms", r.ttft_p99_ms},
          {"tpot_p50_ms", r.tpot_p50_ms},
          {"tpot_p99_ms", r.tpot_p99_ms},
          {"steps", r.steps},
          {"spec_draft_tokens", r.spec_draft_tokens},
          {"spec_accepted_tokens", r.spec_accepted_tokens},
          {"preemptions", r.preemptions},
          {"forward_s", r.forward_s},
          {"sample_s", r.sample_s},
          {"detokenize_s", r.detokenize_s}};
}

}  // namespace

int RunConcurrencyBench(const ConcurrencyBenchOptions& o) {
  if (o.n_prompt < 1 || o.n_gen < 1) {
    return Fail("with --concurrency, -p and -n must be at least 1");
  }
  const int max_level = *std::max_element(o.levels.begin(), o.levels.end());
  // The engine as `tachyon serve` builds it: every request's context fits, and the KV pool
  // holds the largest level at once (unless kv_cache_blocks says how many blocks).
  engine::ServingOptions so = o.engine;
  const int64_t needed = o.n_prompt + o.n_gen;
  if (so.max_model_len > 0 && so.max_model_len < needed) {
    return Fail("--max-model-len " + std::to_string(so.max_model_len) + " is less than -p + -n (" +
                std::to_string(needed) + ")");
  }
  if (so.max_model_len <= 0) so.max_model_len = needed;
  if (so.max_num_seqs <= 0) so.max_num_seqs = max_level;
  so.require_tokenizer = false;  // random token ids need none; outputs are then not detokenized
  auto built = engine::BuildServingEngine(so);
  if (!built.ok()) return Fail(built.status().message());
  engine::ServingEngine& se = *built;
  const double load_s = se.load_seconds;
  model::Model* model = se.model.get();
  const model::ModelConfig& c = model->config();
  engine::EngineCore* core = se.core.get();
  if (core == nullptr)
    return Fail(c.name + " is a pooling (embedding / score) model; serve it with tachyon serve");
  const int64_t num_blocks = se.kv.num_blocks, bs = se.block_size;
  const int threads = se.threads;
  // The int8 compute roofline, on as many threads as the engine gets, measured right before
  // and after each level (the mean of the two is the level's peak; the VM's compute rate
  // moves between minutes); one level's "after" is the next one's "before". Its pool sleeps
  // while the engine runs, and the engine's while it measures.
  ThreadPool peak_pool(threads);
  const uint64_t macs_per_token = model->matmul_macs_per_token();
  const double kv_mib = static_cast<double>(se.kv.budget_bytes) / 1048576;

  Runner runner(core, o, static_cast<int32_t>(c.n_vocab), se.tokenizer != nullptr);
  // Warm-up (pages the weights in, sizes the buffers); not reported.
  if (auto w = runner.Level(1, std::min<int64_t>(o.n_gen, 4)); !w.ok()) {
    return Fail(w.status().message());
  }
  kernels::ComputePeak before = kernels::MeasureComputePeak(&peak_pool);
  if (!o.json) {
    std::printf(
        "model %s (%s), %d threads, load %.3f s; KV pool %lld blocks of %lld (%.0f MiB);"
        " %lld prompt + %lld generated tokens per request, token budget %lld\n",
        o.engine.model.c_str(), c.arch.c_str(), threads, load_s, static_cast<long long>(num_blocks),
        static_cast<long long>(bs), kv_mib, static_cast<long long>(o.n_prompt),
        static_cast<long long>(o.n_gen), static_cast<long long>(so.max_num_batched_tokens));
    std::printf(
        "int8 compute peak %.1f G-op/s at the start (%s, %d threads; re-measured around each "
        "level for dec/peak); %.2f M multiply-adds per token\n",
        before.int8_gops, before.int8_instr.c_str(), threads,
        static_cast<double>(macs_per_token) / 1e6);
    std::printf("%5s %10s %10s %8s %10s %9s %9s %9s %9s %6s %7s %6s %6s %6s\n", "conc", "agg tok/s",
                "dec tok/s", "dec/peak", "req tok/s", "TTFT p50", "TTFT p99", "TPOT p50",
                "TPOT p99", "steps", "preempt", "fwd%", "samp%", "detok%");
    std::fflush(stdout);
  }
  nlohmann::json all = nlohmann::json::array();
  const bool profile = model::ProfilingEnabled();
  for (int level : o.levels) {
    // The engine thread is idle between levels: the profile is ours to reset and read.
    if (profile) model->ResetProfile();
    auto r = runner.Level(level, o.n_gen);
    if (!r.ok()) return Fail(r.status().message());
    const kernels::ComputePeak after = kernels::MeasureComputePeak(&peak_pool);
    kernels::ComputePeak peak = before;
    peak.int8_gops = 0.5 * (before.int8_gops + after.int8_gops);
    if (profile) {
      const std::string title = "concurrency " + std::to_string(level) + " (whole level)";
      std::fprintf(stderr, "%s", model::FormatProfile(model->profile(), title).c_str());
    }
    if (o.json) {
      all.push_back(ToJson(*r, o, macs_per_token, peak));
      all.back()["int8_peak_before_gops"] = before.int8_gops;
      all.back()["int8_peak_after_gops"] = after.int8_gops;
    } else {
      const double wall = std::max(r->wall_s, 1e-9);
      std::printf(
          "%5d %10.2f %10.2f %8.3f %10.2f %9.1f %9.1f %9.1f %9.1f %6lld %7lld %6.1f %6.2f %6.2f\n",
          r->concurrency, r->aggregate_tok_s, r->decode_tok_s,
          PeakRatio(r->decode_tok_s, macs_per_token, peak), r->per_request_tok_s_p50,
          r->ttft_p50_ms, r->ttft_p99_ms, r->tpot_p50_ms, r->tpot_p99_ms,
          static_cast<long long>(r->steps), static_cast<long long>(r->preemptions),
          100 * r->forward_s / wall, 100 * r->sample_s / wall, 100 * r->detokenize_s / wall);
      std::fflush(stdout);
    }
    before = after;  // nothing runs in between
  }
  if (o.json)
    std::printf("%s\n", all.dump().c_str());
  else
    std::printf(
        "(ms for TTFT/TPOT; dec/peak: decode tok/s x 2 x multiply-adds per token over the int8 "
        "peak; fwd/samp/detok: share of the wall time spent by the engine thread in forward "
        "passes, sampling, detokenization + stop strings)\n");
  core->Stop();
  return 0;
}

}  // namespace tachyon::cli
