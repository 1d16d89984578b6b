// `tachyon bench --concurrency 1,4,16,64`: the serving engine (EngineCore) under N concurrent
// synthetic requests per level. See bench_concurrency.cc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/serving_engine.h"

namespace tachyon::cli {

struct ConcurrencyBenchOptions {
  // The engine, built as `tachyon serve` builds it. RunConcurrencyBench sets require_tokenizer
  // (false), max_model_len when it is 0 (n_prompt + n_gen; a smaller one is an error) and
  // max_num_seqs when it is 0 (the largest level); kv_cache_blocks > 0 gives the pool exactly
  // that many blocks.
  engine::ServingOptions engine;
  std::vector<int> levels;        // concurrency levels, run in this order
  int64_t n_prompt = 128;         // prompt tokens per request (random ids)
  int64_t n_gen = 64;             // generated tokens per request (ignore_eos)
  std::vector<std::string> stop;  // stop strings given to every request (their matching cost
                                  // shows in detokenize_s)
  bool json = false;
};

// Runs every level and prints the table (or a JSON list); returns the exit code.
int RunConcurrencyBench(const ConcurrencyBenchOptions& o);

}  // namespace tachyon::cli
