// The engine flags of `tachyon serve`, `tachyon run` and `tachyon bench --concurrency`,
// declared once and bound to engine::ServingOptions (the composition root's options, see
// engine/serving_engine.h), so that the three entry points take the same flags with the same
// names, types, ranges and help:
//
//   -m/--model  -t/--threads  --chat-template  --quantize  --kv-cache-dtype
//   --kv-cache-memory  --kv-cache-memory-fraction  --kv-blocks  -c/--ctx-size/--max-model-len
//   --max-num-batched-tokens/--max-batched-tokens  --max-num-seqs  --no-prefix-caching
//   --scheduling-policy  --no-generation-config  --speculative-config
//   --kv-offload-memory  --kv-offload-dir  --kv-offload-disk
//
// The help shows each flag's default as the ServingOptions holds it when the flags are
// declared (run, for one, serves one sequence).
#pragma once

#include <CLI/CLI.hpp>

#include "engine/serving_engine.h"

namespace tachyon::cli {

// The declared options a command may inspect after parsing (Option::count() > 0: given).
struct EngineFlags {
  CLI::Option* model = nullptr;
  CLI::Option* max_model_len = nullptr;
  CLI::Option* max_num_seqs = nullptr;
};

// Declares the engine flags on `app` (in the help group "Engine options"), writing into
// `*options` as they parse. -m/--model is required. `options` must outlive the parse.
EngineFlags AddEngineFlags(CLI::App& app, engine::ServingOptions* options);

}  // namespace tachyon::cli
