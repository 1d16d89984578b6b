// tachyon profile -m MODEL [-p 512] [-n 128] [-t THREADS] [--kv-cache-dtype f16] [--reps 3]
//                 [--batch B]
//
// Where the time of one step goes, per op kind (model/profile.h): a prefill of P random
// tokens in one batch (pp512), and decode steps of one token at a context of N positions
// (tg128: the decode steps from N - reps to N are profiled after the context is filled).
// With --batch B, each decode step carries B sequences (batched decode, one token each).
// Runs each once to warm up, then prints a Markdown table per step kind.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/flags.h"
#include "model/model.h"
#include "sampling/logits_processors.h"

namespace tachyon::cli {
namespace profile_cmd {

constexpr const char* kDescription =
    "Per-op time of one prefill of P random tokens and of decode steps at a context of N.";

// The pool's share of the profiled forwards (ThreadPool::Stats), per forward.
void PrintPoolStats(const ThreadPool& pool, const model::OpProfile& p) {
  if (pool.num_threads() < 2 || p.forwards == 0) return;
  const ThreadPool::Stats s = pool.stats();
  const double n = static_cast<double>(p.forwards), ms = 1e3 / n;
  std::printf(
      "pool: %.1f parallel passes per forward, %.3f ms in them (%.1f us each): caller running "
      "parts %.3f ms, waiting for the join %.3f ms; workers running parts %.3f ms, first part "
      "%.2f us after the start; %.3f ms per forward outside the passes (one thread)\n",
      static_cast<double>(s.runs) / n, s.run_s * ms, s.runs ? 1e6 * s.run_s / s.runs : 0.0,
      s.caller_work_s * ms, s.join_wait_s * ms, s.worker_work_s * ms,
      s.worker_runs ? 1e6 * s.worker_start_s / s.worker_runs : 0.0,
      (p.total_seconds - s.run_s) * ms);
}

int Fail(const std::string& msg) {
  std::fprintf(stderr, "tachyon profile: error: %s\n", msg.c_str());
  return 1;
}

int RunProfile(int argc, char** argv) {
  std::string model_path;
  int64_t n_prompt = 512, n_gen = 128;
  int threads = 2, reps = 3, n_batch = 1;
  model::KvDtype dtype = model::kDefaultKvDtype;
  auto app = NewCommandApp("profile", kDescription);
  app->add_option("-m,--model", model_path, "GGUF file or Hugging Face folder")->required();
  AddInt<int64_t>(*app, "-p", &n_prompt, 1, 1 << 20, "prompt tokens of the prefill");
  AddInt<int64_t>(*app, "-n", &n_gen, 1, 1 << 20, "context of the profiled decode steps");
  AddInt(*app, "-t,--threads", &threads, 1, 1024, "threads");
  AddInt(*app, "--reps", &reps, 1, 1 << 20, "profiled passes (at most -n)");
  AddInt(*app, "--batch", &n_batch, 1, 1024, "sequences per decode step");
  AddKvDtype(*app, "--kv-cache-dtype", &dtype, "KV cache storage");
  if (std::optional<int> rc = ParseFlags(*app, argc, argv)) return *rc;
  if (reps > n_gen) {
    std::fprintf(stderr, "tachyon profile: error: --reps %d is more than -n %lld\n", reps,
                 static_cast<long long>(n_gen));
    return 2;
  }
  auto loaded = model::Model::Load(model_path);
  if (!loaded.ok()) return Fail(loaded.status().message());
  model::Model& m = **loaded;
  const int64_t n_vocab = m.config().n_vocab;
  const int64_t bs = model::kDefaultBlockSize;
  const int64_t max_pos = std::max(n_prompt, n_gen);
  const int64_t seq_blocks = (max_pos + bs - 1) / bs;
  auto kv = m.CreateKvCache(seq_blocks * n_batch, bs, dtype);
  if (!kv.ok()) return Fail(kv.status().message());
  ThreadPool pool(threads);
  std::mt19937 rng(1234);
  model::Batch batch;
  batch.seqs.resize(1);
  for (int64_t b = 0; b < (max_pos + bs - 1) / bs; ++b) {
    batch.seqs[0].block_table.push_back(static_cast<int32_t>(b));
  }
  model::ForwardOutput out;
  m.SetProfiling(true);
  pool.SetStatsEnabled(true);
  // Prefill: one warm-up, then `reps` profiled passes of the whole prompt in one batch.
  batch.tokens.resize(n_prompt);
  for (auto& t : batch.tokens) t = static_cast<int32_t>(rng() % n_vocab);
  batch.seqs[0].n_tokens = n_prompt;
  batch.seqs[0].pos_start = 0;
  for (int r = 0; r <= reps; ++r) {
    if (r == 1) {
      m.ResetProfile();
      pool.ResetStats();
    }
    if (Status st = m.Forward(batch, kv->get(), &pool, &out); !st.ok()) return Fail(st.message());
  }
  std::printf("model %s, %d thread(s), KV %s\n\n", model_path.c_str(), threads,
              kernels::KvDtypeName(dtype));
  std::printf("%s",
              model::FormatProfile(m.profile(), "prefill pp" + std::to_string(n_prompt)).c_str());
  PrintPoolStats(pool, m.profile());
  std::printf("\n");
  // Decode: fill positions [0, n_gen - reps) token by token (all `n_batch` sequences in each
  // step, each in its own blocks), then profile the last `reps` steps.
  batch.seqs.resize(static_cast<size_t>(n_batch));
  for (int64_t s = 0; s < n_batch; ++s) {
    model::SequenceSlice& seq = batch.seqs[static_cast<size_t>(s)];
    seq = model::SequenceSlice{};
    for (int64_t b = 0; b < seq_blocks; ++b) {
      seq.block_table.push_back(static_cast<int32_t>(s * seq_blocks + b));
    }
    seq.token_start = s;
    seq.n_tokens = 1;
  }
  std::vector<int32_t> toks(static_cast<size_t>(n_batch));
  for (int64_t s = 0; s < n_batch; ++s) {
    toks[static_cast<size_t>(s)] = static_cast<int32_t>((1 + s) % n_vocab);
  }
  std::vector<double> step_ms;  // wall time of each profiled decode step
  for (int64_t pos = 0; pos < n_gen; ++pos) {
    if (pos == n_gen - reps) {
      m.ResetProfile();
      pool.ResetStats();
    }
    batch.tokens = toks;
    for (model::SequenceSlice& seq : batch.seqs) seq.pos_start = pos;
    const auto t0 = std::chrono::steady_clock::now();
    if (Status st = m.Forward(batch, kv->get(), &pool, &out); !st.ok()) return Fail(st.message());
    if (pos >= n_gen - reps) {
      step_ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    for (int64_t s = 0; s < n_batch; ++s) {
      toks[static_cast<size_t>(s)] = sampling::Argmax(std::span<const float>(out.Row(s), n_vocab));
    }
  }
  std::string title = "decode at context " + std::to_string(n_gen);
  if (n_batch > 1) title += ", " + std::to_string(n_batch) + " sequences per step";
  std::printf("%s", model::FormatProfile(m.profile(), title).c_str());
  PrintPoolStats(pool, m.profile());
  // The quietest steps say what the step costs without the machine's other load.
  std::sort(step_ms.begin(), step_ms.end());
  const size_t ns = step_ms.size();
  std::printf("decode step ms: min %.3f, 10th percentile %.3f, median %.3f\n", step_ms[0],
              step_ms[ns / 10], step_ms[ns / 2]);
  return 0;
}

TACHYON_COMMAND(profile, "Per-op time breakdown of one prefill and one decode step", RunProfile);

}  // namespace profile_cmd

}  // namespace tachyon::cli
