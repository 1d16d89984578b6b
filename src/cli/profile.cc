// tachyon profile -m MODEL [-p 512] [-n 128] [-t THREADS] [--kv-cache-dtype f16] [--reps 3]
//                 [--batch B]
//
// Where the time of one step goes, per op kind (model/profile.h): a prefill of P random
// tokens in one batch (pp512), and decode steps of one token at a context of N positions
// (tg128: the decode steps from N - reps to N are profiled after the context is filled).
// With --batch B, each decode step carries B sequences (batched decode, one token each).
// Runs each once to warm up, then prints a Markdown table per step kind.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "cli/command.h"
#include "model/model.h"

namespace tachyon::cli {
namespace {

constexpr const char* kUsage =
    "usage: tachyon profile -m MODEL [-p 512] [-n 128] [-t THREADS] [--reps 3]\n"
    "                       [--kv-cache-dtype f16|bf16|q8_0|f32] [--batch B]\n";

int Fail(const std::string& msg) {
  std::fprintf(stderr, "tachyon profile: %s\n", msg.c_str());
  return 1;
}

int RunProfile(int argc, char** argv) {
  std::string model_path, dtype_name = "f16";
  int64_t n_prompt = 512, n_gen = 128;
  int threads = 2, reps = 3, n_batch = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if ((a == "-m" || a == "--model") && (v = value())) {
      model_path = v;
    } else if (a == "-p" && (v = value())) {
      n_prompt = std::atoll(v);
    } else if (a == "-n" && (v = value())) {
      n_gen = std::atoll(v);
    } else if ((a == "-t" || a == "--threads") && (v = value())) {
      threads = std::atoi(v);
    } else if (a == "--reps" && (v = value())) {
      reps = std::atoi(v);
    } else if (a == "--batch" && (v = value())) {
      n_batch = std::atoi(v);
    } else if (a == "--kv-cache-dtype" && (v = value())) {
      dtype_name = v;
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else {
      std::fputs(kUsage, stderr);
      return Fail("bad or incomplete argument '" + a + "'");
    }
  }
  if (model_path.empty()) return Fail("-m MODEL is required");
  if (n_prompt < 1 || n_gen < 1 || threads < 1 || reps < 1 || reps > n_gen) {
    return Fail("-p, -n, -t must be >= 1 and --reps in [1, n]");
  }
  if (n_batch < 1 || n_batch > 1024) return Fail("--batch must be in [1, 1024]");
  auto dtype = kernels::ParseKvDtype(dtype_name);
  if (!dtype.ok()) return Fail(dtype.status().message());
  auto loaded = model::Model::Load(model_path);
  if (!loaded.ok()) return Fail(loaded.status().message());
  model::Model& m = **loaded;
  const int64_t n_vocab = m.config().n_vocab;
  const int64_t bs = model::kDefaultBlockSize;
  const int64_t max_pos = std::max(n_prompt, n_gen);
  const int64_t seq_blocks = (max_pos + bs - 1) / bs;
  auto kv = m.CreateKvCache(seq_blocks * n_batch, bs, *dtype);
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
  // Prefill: one warm-up, then `reps` profiled passes of the whole prompt in one batch.
  batch.tokens.resize(n_prompt);
  for (auto& t : batch.tokens) t = static_cast<int32_t>(rng() % n_vocab);
  batch.seqs[0].n_tokens = n_prompt;
  batch.seqs[0].pos_start = 0;
  for (int r = 0; r <= reps; ++r) {
    if (r == 1) m.ResetProfile();
    if (Status st = m.Forward(batch, kv->get(), &pool, &out); !st.ok()) return Fail(st.message());
  }
  std::printf("model %s, %d thread(s), KV %s\n\n", model_path.c_str(), threads,
              kernels::KvDtypeName(*dtype));
  std::printf("%s\n",
              model::FormatProfile(m.profile(), "prefill pp" + std::to_string(n_prompt)).c_str());
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
  for (int64_t pos = 0; pos < n_gen; ++pos) {
    if (pos == n_gen - reps) m.ResetProfile();
    batch.tokens = toks;
    for (model::SequenceSlice& seq : batch.seqs) seq.pos_start = pos;
    if (Status st = m.Forward(batch, kv->get(), &pool, &out); !st.ok()) return Fail(st.message());
    for (int64_t s = 0; s < n_batch; ++s) {
      const float* row = out.Row(s);
      toks[static_cast<size_t>(s)] = static_cast<int32_t>(std::max_element(row, row + n_vocab) - row);
    }
  }
  std::string title = "decode at context " + std::to_string(n_gen);
  if (n_batch > 1) title += ", " + std::to_string(n_batch) + " sequences per step";
  std::printf("%s", model::FormatProfile(m.profile(), title).c_str());
  return 0;
}

}  // namespace

TACHYON_COMMAND(profile, "Per-op time breakdown of one prefill and one decode step", RunProfile);

}  // namespace tachyon::cli
