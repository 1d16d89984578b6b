// tachyon logits -m MODEL --ids 1,2,3 --out FILE [-t THREADS] [--chunk N] [--quantize Q]
// Writes float32 little-endian logits for every position: [n_ids, n_vocab], row i = the
// prediction after ids[0..i]. Long inputs run in chunks over the paged KV cache.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/flags.h"
#include "hub/resolve.h"
#include "model/model.h"

namespace tachyon::cli {
namespace logits_cmd {

constexpr const char* kDescription =
    "Writes float32 little-endian logits for every position: [n_ids, n_vocab], row i = the\n"
    "prediction after ids[0..i].";

// "1,2,3": non-negative int32 ids, at least one.
bool ParseIds(const std::string& s, std::vector<int32_t>* ids) {
  size_t i = 0;
  while (i <= s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    const std::optional<int32_t> v = ParseInteger<int32_t>(std::string_view(s).substr(i, j - i));
    if (!v || *v < 0) return false;
    ids->push_back(*v);
    i = j + 1;
  }
  return !ids->empty();
}

int Fail(const std::string& msg) {
  std::fprintf(stderr, "tachyon logits: error: %s\n", msg.c_str());
  return 1;
}

int RunLogits(int argc, char** argv) {
  std::string model_path, out_path;
  std::vector<int32_t> ids;
  int threads = 0;
  int64_t chunk = 512;
  model::LoadOptions load;
  auto app = NewCommandApp("logits", kDescription);
  app->add_option("-m,--model", model_path, "GGUF file, Hugging Face folder or ORG/NAME[:FILE]")
      ->required();
  app->add_option_function<std::string>(
         "--ids",
         [&ids](const std::string& v) {
           ids.clear();
           if (!ParseIds(v, &ids)) throw BadValue("--ids", v, "a list of token ids like 1,2,3");
         },
         "comma-separated token ids")
      ->type_name("ID,ID,...")
      ->required();
  app->add_option("-o,--out", out_path, "output file")->required();
  AddInt(*app, "-t,--threads", &threads, 0, 1024, "threads (0: all hardware threads)");
  AddInt<int64_t>(*app, "--chunk", &chunk, 1, 1 << 20,
                  "positions per forward pass (long inputs run in chunks)");
  AddChoice(*app, "--quantize", &load.quantize, QuantizeAtLoadChoices(),
            "quantize float weights at load");
  if (std::optional<int> rc = ParseFlags(*app, argc, argv)) return *rc;
  auto resolved = hub::ResolveModel(model_path);
  if (!resolved.ok()) return Fail(resolved.status().message());
  load.threads = threads;
  auto model = model::Model::Load(resolved->model_path, load);
  if (!model.ok()) return Fail(model.status().message());
  const int64_t n_vocab = (*model)->config().n_vocab;
  for (int32_t id : ids) {
    if (id >= n_vocab) {
      return Fail("token id " + std::to_string(id) + " is outside the vocabulary of " +
                  std::to_string(n_vocab));
    }
  }
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t bs = model::kDefaultBlockSize;
  // f32 KV: this command exists to compare logits with outside references.
  auto kv = (*model)->CreateKvCache((n + bs - 1) / bs, bs, model::KvDtype::kF32);
  if (!kv.ok()) return Fail(kv.status().message());
  ThreadPool pool(threads);
  model::Batch batch;
  batch.seqs.resize(1);
  for (int64_t b = 0; b < (n + bs - 1) / bs; ++b) {
    batch.seqs[0].block_table.push_back(static_cast<int32_t>(b));
  }
  FILE* out = std::fopen(out_path.c_str(), "wb");
  if (out == nullptr) return Fail("cannot open " + out_path + ": " + std::strerror(errno));
  model::ForwardOutput logits;
  for (int64_t start = 0; start < n; start += chunk) {
    const int64_t len = std::min(chunk, n - start);
    batch.tokens.assign(ids.begin() + start, ids.begin() + start + len);
    batch.seqs[0].n_tokens = len;
    batch.seqs[0].num_logits = len;
    batch.seqs[0].pos_start = start;
    Status st = (*model)->Forward(batch, kv->get(), &pool, &logits);
    if (!st.ok()) {
      std::fclose(out);
      return Fail(st.message());
    }
    // x86-64 is little-endian: the floats are written as they lie in memory.
    const size_t count = static_cast<size_t>(len * n_vocab);
    if (std::fwrite(logits.logits.data(), sizeof(float), count, out) != count) {
      std::fclose(out);
      return Fail("write to " + out_path + " failed");
    }
  }
  if (std::fclose(out) != 0) return Fail("write to " + out_path + " failed");
  return 0;
}

TACHYON_COMMAND(logits, "Write float32 logits of every position for given token ids", RunLogits);

}  // namespace logits_cmd

}  // namespace tachyon::cli
