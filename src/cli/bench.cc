// tachyon bench -m MODEL [-p 512] [-n 128] [-d 0] [-t THREADS] [--reps R] [--json] [--bw-mib M]
// tachyon bench -m MODEL --concurrency 1,4,16,64 [-p 128] [-n 64] [-t THREADS] [--json]
//               [--max-batched-tokens 2048] [--kv-blocks B] [--stop STR ...]
//
// With --concurrency: the serving engine under concurrent requests (bench_concurrency.cc).
// Without it:
// Like llama-bench pp512 / tg128: prompt processing of P random tokens in one batch (chunks
// of 512), and decoding N tokens one at a time from an empty cache; medians over R reps after
// one warm-up. -d D (llama-bench's depth) puts D random tokens in the cache first (once, not
// timed), so the prompt and the decode start at position D. The machine's read bandwidth is
// measured with the same thread count right before and after the decode runs (streaming an M MiB
// buffer, on huge pages with software prefetch, and plainly: 4 KiB pages, no prefetch), and the
// decode speed is reported as a ratio to each roofline  tg_tok_s * weight_bytes / bandwidth.
// weight_bytes counts the weights one decode step reads: every tensor, except the token
// embedding when the output matrix is separate (decode reads one row of it). kv_bytes_per_token
// is the KV cache a decode step reads at the mean context of the decode; the ratio
// tg_roofline_ratio_kv counts it with the weights.
// Prefill is also reported against the int8 compute roofline measured in the same run, right
// before and after the prefill reps (kernels/peak.h: the widest int8 dot-product instruction
// on every thread; the mean of the two): pp_tok_s x 2 x the matmul multiply-adds per token /
// the peak. --concurrency reports batched decode the same way, per level.
#include <emmintrin.h>
#include <sys/mman.h>
#include <xmmintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "cli/bench_concurrency.h"
#include "cli/command.h"
#include "cli/engine_flags.h"
#include "cli/flags.h"
#include "hub/resolve.h"
#include "kernels/peak.h"
#include "model/model.h"
#include "sampling/logits_processors.h"

namespace tachyon::cli {
namespace bench_cmd {

constexpr const char* kDescription =
    "Without --concurrency: prompt processing of -p random tokens in one batch and decoding\n"
    "of -n tokens from an empty cache (medians over --reps after one warm-up), reported\n"
    "against the memory-bandwidth and int8 compute rooflines measured in the same run (of\n"
    "the engine options, only -m, -t, --quantize and --kv-cache-dtype apply).\n"
    "With --concurrency 1,4,16,64: the serving engine under N concurrent random-prompt\n"
    "requests per level: aggregate / per-request decode tok/s, TTFT and TPOT percentiles.";

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Best-of-5 read bandwidth in GB/s (1e9 bytes/s), every pool thread streaming its share of a
// buffer. The main probe: transparent huge pages (as the repacked weights are) with software
// prefetch 4 KiB ahead, the fastest way this machine streams memory, so the decode ratio is an
// honest one. The plain probe (`prefetch` false, a buffer on 4 KiB pages): the same loop
// without software prefetch, a plain streaming read (~20-25% slower on the dev VM).
double MeasureReadBandwidth(ThreadPool& pool, const __m128i* buf, size_t n_vec,
                            bool prefetch = true) {
  double best = 0;
  std::vector<long long> sink(pool.num_threads());
  constexpr size_t kAhead = 4096 / sizeof(__m128i);
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = Clock::now();
    pool.Run([&](int tid, int nt) {
      const size_t begin = n_vec * tid / nt, end = n_vec * (tid + 1) / nt;
      __m128i a0 = _mm_setzero_si128(), a1 = a0, a2 = a0, a3 = a0;
      size_t i = begin;
      for (; i + 4 <= end; i += 4) {
        if (prefetch) _mm_prefetch(reinterpret_cast<const char*>(buf + i + kAhead), _MM_HINT_T0);
        a0 = _mm_add_epi64(a0, _mm_load_si128(buf + i));
        a1 = _mm_add_epi64(a1, _mm_load_si128(buf + i + 1));
        a2 = _mm_add_epi64(a2, _mm_load_si128(buf + i + 2));
        a3 = _mm_add_epi64(a3, _mm_load_si128(buf + i + 3));
      }
      const __m128i s = _mm_add_epi64(_mm_add_epi64(a0, a1), _mm_add_epi64(a2, a3));
      sink[tid] = _mm_cvtsi128_si64(s);
    });
    const double t = Seconds(t0, Clock::now());
    best = std::max(best, static_cast<double>(n_vec * sizeof(__m128i)) / t / 1e9);
  }
  if (sink[0] == 42) std::fprintf(stderr, " ");  // keep the loads alive
  return best;
}

int Fail(const std::string& msg) {
  std::fprintf(stderr, "tachyon bench: error: %s\n", msg.c_str());
  return 1;
}

struct Options {
  engine::ServingOptions engine;  // -m, -t, --kv-cache-dtype, --quantize, --concurrency's engine
  int64_t n_prompt = 512, n_gen = 128, depth = 0;
  int reps = 5;
  bool json = false;
  int64_t bw_mib = 1024;
  std::vector<int> concurrency;  // empty: the pp/tg benchmark
  std::vector<std::string> stop;
};

int RunBench(int argc, char** argv) {
  Options o;
  // --concurrency: the largest level unless --max-num-seqs says otherwise.
  o.engine.max_num_seqs = 0;
  auto app = NewCommandApp("bench", kDescription);
  EngineFlags engine_flags = AddEngineFlags(*app, &o.engine);
  engine_flags.max_num_seqs->default_str("the largest --concurrency level");
  engine_flags.max_model_len->default_str("-p + -n");
  CLI::Option* prompt_flag = AddInt<int64_t>(*app, "-p,--n-prompt", &o.n_prompt, 0, 1 << 24,
                                             "prompt tokens (--concurrency: per request, "
                                             "default 128, at least 1)");
  CLI::Option* gen_flag = AddInt<int64_t>(*app, "-n,--n-gen", &o.n_gen, 0, 1 << 24,
                                          "generated tokens (--concurrency: per request, "
                                          "default 64, at least 1)");
  AddInt<int64_t>(*app, "-d,--n-depth", &o.depth, 0, 1 << 24,
                  "tokens in the KV cache before the prompt and the decode (not with "
                  "--concurrency)");
  AddInt(*app, "-r,--reps", &o.reps, 1, 1000, "measured repetitions");
  AddInt<int64_t>(*app, "--bw-mib", &o.bw_mib, 1, 16384, "bandwidth probe buffer (MiB)");
  app->add_flag("--json", o.json, "print one JSON object (--concurrency: a list)");
  AddIntList(*app, "--concurrency", &o.concurrency, 1, 4096,
             "concurrency levels, run in this order");
  app->add_option("--stop", o.stop,
                  "--concurrency: stop string given to every request (may be repeated)")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  if (std::optional<int> rc = ParseFlags(*app, argc, argv)) return *rc;
  if (!o.concurrency.empty()) {
    if (o.depth > 0) return Fail("-d/--n-depth does not apply to --concurrency");
    ConcurrencyBenchOptions co;
    co.levels = o.concurrency;
    co.engine = o.engine;
    co.n_prompt = prompt_flag->count() ? o.n_prompt : 128;
    co.n_gen = gen_flag->count() ? o.n_gen : 64;
    co.json = o.json;
    co.stop = o.stop;
    return RunConcurrencyBench(co);
  }
  const auto tl0 = Clock::now();
  auto resolved = hub::ResolveModel(o.engine.model);  // file, HF folder or hub name
  if (!resolved.ok()) return Fail(resolved.status().message());
  auto loaded = model::Model::Load(
      resolved->model_path,
      model::LoadOptions{.quantize = o.engine.quantize, .threads = o.engine.threads});
  if (!loaded.ok()) return Fail(loaded.status().message());
  const double load_s = Seconds(tl0, Clock::now());
  model::Model& m = **loaded;
  const model::ModelConfig& c = m.config();
  uint64_t weight_bytes = m.weight_bytes();
  if (!c.tied_output) {
    weight_bytes -= static_cast<uint64_t>(m.weights().token_embd.row_bytes) * c.n_vocab;
  }
  const int64_t bs = model::kDefaultBlockSize;
  const int64_t max_pos = o.depth + std::max(o.n_prompt, o.n_gen);
  auto kv = m.CreateKvCache(std::max<int64_t>(1, (max_pos + bs - 1) / bs), bs, o.engine.kv_dtype);
  if (!kv.ok()) return Fail(kv.status().message());
  ThreadPool pool(o.engine.threads);
  std::mt19937 rng(1234);
  std::vector<int32_t> context(o.depth + o.n_prompt);  // the depth's tokens, then the prompt's
  for (auto& t : context) t = static_cast<int32_t>(rng() % c.n_vocab);
  model::Batch batch;
  batch.seqs.resize(1);
  for (int64_t b = 0; b < (max_pos + bs - 1) / bs; ++b) {
    batch.seqs[0].block_table.push_back(static_cast<int32_t>(b));
  }
  model::ForwardOutput out;
  // Positions [from, to) of `context`, in chunks of 512.
  auto run_context = [&](int64_t from, int64_t to) -> Status {
    for (int64_t start = from; start < to; start += 512) {
      const int64_t len = std::min<int64_t>(512, to - start);
      batch.tokens.assign(context.begin() + start, context.begin() + start + len);
      batch.seqs[0].n_tokens = len;
      batch.seqs[0].pos_start = start;
      RETURN_IF_ERROR(m.Forward(batch, kv->get(), &pool, &out));
    }
    return OkStatus();
  };
  auto run_prompt = [&] { return run_context(o.depth, o.depth + o.n_prompt); };
  if (Status st = run_context(0, o.depth); !st.ok()) return Fail(st.message());
  auto run_decode = [&]() -> Status {
    int32_t tok = context.empty() ? 1 % static_cast<int32_t>(c.n_vocab) : context[0];
    for (int64_t i = 0; i < o.n_gen; ++i) {
      batch.tokens = {tok};
      batch.seqs[0].n_tokens = 1;
      batch.seqs[0].pos_start = o.depth + i;
      RETURN_IF_ERROR(m.Forward(batch, kv->get(), &pool, &out));
      tok = sampling::Argmax(std::span<const float>(out.Row(0), c.n_vocab));  // greedy, as served
    }
    return OkStatus();
  };
  std::vector<double> pp, tg;
  // The int8 compute roofline of the prefill runs, measured right before and right after them
  // (the VM's compute rate moves between minutes, like its bandwidth).
  kernels::ComputePeak peak_before, peak_after;
  if (o.n_prompt > 0) {
    peak_before = kernels::MeasureComputePeak(&pool);
    for (int r = 0; r <= o.reps; ++r) {  // rep 0 is the warm-up
      const auto t0 = Clock::now();
      if (Status st = run_prompt(); !st.ok()) return Fail(st.message());
      if (r > 0) pp.push_back(o.n_prompt / Seconds(t0, Clock::now()));
    }
    peak_after = kernels::MeasureComputePeak(&pool);
  }
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t bw_bytes =
      ((static_cast<size_t>(o.bw_mib) << 20) + kHugePage - 1) & ~(kHugePage - 1);
  std::unique_ptr<void, decltype(&std::free)> bw_mem(std::aligned_alloc(kHugePage, bw_bytes),
                                                     &std::free);
  auto* bw_buf = static_cast<__m128i*>(bw_mem.get());
  if (!bw_buf) return Fail("cannot allocate the bandwidth buffer");
  madvise(bw_buf, bw_bytes, MADV_HUGEPAGE);  // advisory: ignored where THP is off
  std::fill_n(reinterpret_cast<char*>(bw_buf), bw_bytes, 1);
  const size_t n_vec = bw_bytes / sizeof(__m128i);
  // The plain probe's buffer: 4 KiB pages (MADV_NOHUGEPAGE), read without software prefetch.
  std::unique_ptr<void, decltype(&std::free)> plain_mem(std::aligned_alloc(kHugePage, bw_bytes),
                                                        &std::free);
  auto* plain_buf = static_cast<__m128i*>(plain_mem.get());
  if (!plain_buf) return Fail("cannot allocate the bandwidth buffer");
  madvise(plain_buf, bw_bytes, MADV_NOHUGEPAGE);
  std::fill_n(reinterpret_cast<char*>(plain_buf), bw_bytes, 1);
  double bw_before = 0, bw_after = 0, plain_before = 0, plain_after = 0;
  if (o.n_gen > 0) {
    bw_before = MeasureReadBandwidth(pool, bw_buf, n_vec);
    plain_before = MeasureReadBandwidth(pool, plain_buf, n_vec, /*prefetch=*/false);
    for (int r = 0; r <= o.reps; ++r) {
      const auto t0 = Clock::now();
      if (Status st = run_decode(); !st.ok()) return Fail(st.message());
      if (r > 0) tg.push_back(o.n_gen / Seconds(t0, Clock::now()));
    }
    bw_after = MeasureReadBandwidth(pool, bw_buf, n_vec);
    plain_after = MeasureReadBandwidth(pool, plain_buf, n_vec, /*prefetch=*/false);
  }
  const double pp_tok_s = Median(pp), tg_tok_s = Median(tg);
  const double bw = 0.5 * (bw_before + bw_after), plain = 0.5 * (plain_before + plain_after);
  const double ratio = bw > 0 ? tg_tok_s * weight_bytes / (bw * 1e9) : 0;
  const double ratio_plain = plain > 0 ? tg_tok_s * weight_bytes / (plain * 1e9) : 0;
  // Decode step i attends to depth + i + 1 positions: the mean over the decode.
  const double kv_bytes_per_token =
      static_cast<double>(m.KvBytesPerBlock(1, o.engine.kv_dtype)) *
      (static_cast<double>(o.depth) + 0.5 * static_cast<double>(o.n_gen + 1));
  const double ratio_kv =
      bw > 0 ? tg_tok_s * (static_cast<double>(weight_bytes) + kv_bytes_per_token) / (bw * 1e9) : 0;
  // Prefill against the int8 compute roofline (the mean of the two probes, on the same
  // threads): 2 ops per matmul multiply-add of every prompt token.
  kernels::ComputePeak peak = peak_before;
  peak.int8_gops = 0.5 * (peak_before.int8_gops + peak_after.int8_gops);
  const uint64_t macs = m.matmul_macs_per_token();
  const double pp_peak_ratio =
      peak.int8_gops > 0 ? pp_tok_s * 2.0 * static_cast<double>(macs) / (peak.int8_gops * 1e9) : 0;
  if (o.json) {
    nlohmann::json j = {{"model", o.engine.model},
                        {"arch", c.arch},
                        {"threads", pool.num_threads()},
                        {"n_prompt", o.n_prompt},
                        {"n_gen", o.n_gen},
                        {"n_depth", o.depth},
                        {"reps", o.reps},
                        {"pp_tok_s", pp_tok_s},
                        {"tg_tok_s", tg_tok_s},
                        {"load_s", load_s},
                        {"weight_bytes", weight_bytes},
                        {"bandwidth_gbs", bw},
                        {"bandwidth_before_gbs", bw_before},
                        {"bandwidth_after_gbs", bw_after},
                        {"tg_roofline_ratio", ratio},
                        {"bandwidth_plain_gbs", plain},
                        {"bandwidth_plain_before_gbs", plain_before},
                        {"bandwidth_plain_after_gbs", plain_after},
                        {"tg_roofline_ratio_plain", ratio_plain},
                        {"kv_bytes_per_token", kv_bytes_per_token},
                        {"tg_roofline_ratio_kv", ratio_kv},
                        {"int8_peak_gops", peak.int8_gops},
                        {"int8_peak_before_gops", peak_before.int8_gops},
                        {"int8_peak_after_gops", peak_after.int8_gops},
                        {"int8_peak_instr", peak.int8_instr},
                        {"matmul_macs_per_token", macs},
                        {"pp_int8_peak_ratio", pp_peak_ratio}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("model %s (%s), %d threads, load %.3f s, weights %.3f GB\n", o.engine.model.c_str(),
                c.arch.c_str(), pool.num_threads(), load_s, weight_bytes / 1e9);
    const std::string at = o.depth > 0 ? " @ d" + std::to_string(o.depth) : "";
    if (o.n_prompt > 0) {
      std::printf("pp%lld%s: %8.2f tok/s (median of %d); %.3f of the int8 peak %.1f G-op/s (%s)\n",
                  static_cast<long long>(o.n_prompt), at.c_str(), pp_tok_s, o.reps, pp_peak_ratio,
                  peak.int8_gops, peak.int8_instr.c_str());
    }
    if (o.n_gen > 0) {
      std::printf("tg%lld%s: %8.2f tok/s (median of %d)\n", static_cast<long long>(o.n_gen),
                  at.c_str(), tg_tok_s, o.reps);
      std::printf("read bandwidth %.1f GB/s (before %.1f, after %.1f); tg roofline ratio %.3f\n",
                  bw, bw_before, bw_after, ratio);
      std::printf(
          "plain read (4 KiB pages, no prefetch) %.1f GB/s (before %.1f, after %.1f); "
          "tg ratio to it %.3f\n",
          plain, plain_before, plain_after, ratio_plain);
      std::printf(
          "KV cache read %.1f MB per token (mean context); tg ratio to the bandwidth "
          "counting it with the weights %.3f\n",
          kv_bytes_per_token / 1e6, ratio_kv);
    }
  }
  return 0;
}

TACHYON_COMMAND(bench, "Benchmark prompt processing and decoding (tok/s, roofline ratio)",
                RunBench);

}  // namespace bench_cmd

}  // namespace tachyon::cli
