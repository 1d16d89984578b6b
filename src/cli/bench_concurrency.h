// `tachyon bench --concurrency 1,4,16,64`: the serving engine (EngineCore) under N concurrent
// synthetic requests per level. See bench_concurrency.cc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model.h"

namespace tachyon::cli {

struct ConcurrencyBenchOptions {
  std::string model_path;
  std::vector<int> levels;                // concurrency levels, run in this order
  int64_t n_prompt = 128;                 // prompt tokens per request (random ids)
  int64_t n_gen = 64;                     // generated tokens per request (ignore_eos)
  int threads = 0;                        // <= 0: all hardware threads
  int64_t max_num_batched_tokens = 2048;  // engine token budget per step
  int64_t kv_blocks = 0;                  // <= 0: enough for the largest level at once
  std::vector<std::string> stop;          // stop strings given to every request (their
                                          // matching cost shows in detokenize_s)
  bool json = false;
  model::KvDtype kv_dtype = model::kDefaultKvDtype;
  std::string quantize;  // quantize float weights at load ("" keeps them)
};

// Runs every level and prints the table (or a JSON list); returns the exit code.
int RunConcurrencyBench(const ConcurrencyBenchOptions& o);

// Parses "1,4,16,64" (positive, at most 4096 each). False on anything else.
bool ParseConcurrencyList(const std::string& s, std::vector<int>* out);

}  // namespace tachyon::cli
