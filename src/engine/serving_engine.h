// BuildServingEngine: the composition root. Every entry point that serves or runs a model
// (tachyon serve, run, bench --concurrency, and later ones) builds its engine here, so they
// agree on how a model becomes a running engine:
//
//   hub::ResolveModel(model)            file, Hugging Face folder or Hub name
//   model::Model::Load                  weights (mmapped; --quantize converts at load)
//   tokenizer::Tokenizer::FromGguf      the model's tokenizer
//   chat template                       --chat-template (Jinja or tokenizer_config.json),
//                                       else the model's own (none is not an error)
//   generation_config.json              sampling defaults + EOS ids (unless disabled)
//   EOS ids                             the tokenizer's end-of-generation ids plus those
//   SizeKvCache (kv_sizing.h)           KV blocks and the served context length
//   EngineConfig -> ModelAdapter -> EngineCore (its thread is running on return)
//   or, for pooling models (encoders, a pooling_type, --pooling): PoolingEngine instead of
//   the KV sizing and EngineCore (context = the longest input it takes)
//
// Logs one line when the context is lowered to fit the KV budget. Errors name the file,
// field or flag.
// Thread-safety: BuildServingEngine may run on any thread; the result is as EngineCore.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "engine/engine_core.h"
#include "engine/kv_sizing.h"
#include "engine/pooling_engine.h"
#include "engine/sampling_defaults.h"
#include "kv/disk_tier.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "spec/speculative_config.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::engine {

// The engine flags shared by every entry point (names as the CLI spells them).
struct ServingOptions {
  std::string model;               // -m: GGUF file, HF folder, ORG/NAME[:FILE] or hf://...
  std::string chat_template_path;  // --chat-template: Jinja file or tokenizer_config.json
  std::string served_name;         // --served-model-name; "" = the resolved model's name
  int threads = 0;                 // --threads: compute threads; <= 0: all hardware threads
  std::string quantize;            // --quantize: "" keeps the stored types; q8_0, q4_0, q4_k
  model::KvDtype kv_dtype = model::kDefaultKvDtype;  // --kv-cache-dtype
  int64_t kv_cache_bytes = 0;                        // --kv-cache-memory: > 0 sets the KV budget
  double kv_memory_fraction = kDefaultKvMemoryFraction;  // --kv-cache-memory-fraction
  int64_t kv_cache_blocks = 0;  // > 0: exactly this many KV blocks (bench --kv-blocks)
  int64_t max_model_len = 0;    // --max-model-len; 0: the model's (lowered to fit)
  // Tokens a sequence may hold beyond that context (run: 1, so that a context of N positions
  // yields up to N predicted tokens, as llama2.c: the last sampled token needs no KV).
  int64_t context_extra_tokens = 0;
  int64_t max_num_batched_tokens = 2048;  // --max-num-batched-tokens
  int max_num_seqs = 64;                  // --max-num-seqs
  bool enable_prefix_caching = true;      // --no-prefix-caching
  // Sliding-window layers (Gemma 3) keep only their window's KV blocks, in layer groups with
  // their own block tables (model/kv_cache.h); --disable-hybrid-kv-cache-manager: one table.
  bool hybrid_kv_cache = true;
  bool priority_scheduling = false;   // --scheduling-policy priority
  bool use_generation_config = true;  // --no-generation-config
  bool require_tokenizer = true;      // false: a model without one runs (no text, no stop strings)
  spec::SpeculativeConfig speculative;  // --speculative-config; method kNone: off
  // --pooling: "" serves the model as it says (encoders and models with a pooling_type pool,
  // others generate); "mean", "cls", "last" or "rank" pool with that (e.g. a decoder
  // embedding model with last-token pooling); "none" insists on generation.
  std::string pooling;
  // Scheduling for time to first token (engine/scheduler.h): --short-prefill-tokens (0: off),
  // --max-prefill-tokens-while-decoding (0: off).
  int64_t short_prefill_tokens = 256;
  int64_t max_prefill_tokens_while_decoding = 0;
  // Burst gathering (EngineConfig::burst_gather_quiet / _max): --burst-gather-ms (0: off),
  // --burst-gather-max-ms.
  double burst_gather_ms = 2;
  double burst_gather_max_ms = 20;
  // Receives the prefix cache's block events (serve: GET /v1/kv_events); null: none.
  std::shared_ptr<kv::KvEventLog> kv_events;
  // KV offload tiers (docs/kv_tiers.md): --kv-offload-memory BYTES (0: no host tier),
  // --kv-offload-dir DIR ("": no disk tier) bounded by --kv-offload-disk BYTES.
  int64_t kv_offload_memory = 0;
  std::string kv_offload_dir;
  int64_t kv_offload_disk = kv::DiskTier::kDefaultCapacityBytes;
  // Further KV stores (kv/block_store.h, e.g. blocks received from another replica), consulted
  // before the offload tiers, in this order.
  std::vector<std::shared_ptr<kv::BlockStore>> kv_stores;
};

struct ServingEngine {
  std::string name;  // served name: ServingOptions::served_name, else the resolved model's
  std::shared_ptr<model::Model> model;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;  // null only without require_tokenizer
  std::optional<chat::ChatTemplate> chat_template;        // none when the model has none
  std::string chat_template_source;
  SamplingDefaults sampling_defaults;  // from generation_config.json (OpenAI's otherwise)
  std::string generation_config_note;  // the defaults taken from it, "name=value, ..." or ""
  std::vector<int32_t> eos_token_ids;  // as given to the engine
  KvSizing kv;                         // kv.max_model_len is the context served
  model::KvLayout kv_layout;           // the KV cache's layer groups
  int64_t block_size = 0;
  int threads = 0;          // compute threads in use
  double load_seconds = 0;  // resolving + loading the model
  std::string summary;      // one line: model, context, KV pool, chat template
  std::shared_ptr<kv::KvEventLog> kv_events;  // ServingOptions::kv_events; outlives `core`
  // Exactly one of core (generation) and pooler (embeddings / scores) is set.
  std::unique_ptr<EngineCore> core;
  model::PoolingType pooling = model::PoolingType::kNone;
  std::unique_ptr<PoolingEngine> pooler;
};

Result<ServingEngine> BuildServingEngine(const ServingOptions& options);

}  // namespace tachyon::engine
