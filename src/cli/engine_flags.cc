#include "cli/engine_flags.h"

#include <cstdint>
#include <string>

#include "cli/flags.h"
#include "spec/speculative_config.h"

namespace tachyon::cli {

EngineFlags AddEngineFlags(CLI::App& app, engine::ServingOptions* o) {
  constexpr const char* kGroup = "Engine options";
  EngineFlags f;
  f.model = app.add_option("-m,--model", o->model,
                           "model: a GGUF file, a Hugging Face folder, ORG/NAME[:FILE] or "
                           "hf://ORG/NAME (downloaded to the cache when missing; see tachyon pull)")
                ->required()
                ->group(kGroup);
  AddInt(app, "-t,--threads", &o->threads, 0, 1024, "compute threads (0: all hardware threads)")
      ->group(kGroup);
  app.add_option("--chat-template", o->chat_template_path,
                 "Jinja chat template file (or a tokenizer_config.json); default: the model's")
      ->group(kGroup);
  AddChoice(app, "--quantize", &o->quantize, QuantizeAtLoadChoices(),
            "quantize float weights at load (default: keep the stored types)")
      ->group(kGroup);
  AddKvDtype(app, "--kv-cache-dtype", &o->kv_dtype, "KV cache storage")->group(kGroup);
  AddByteSize(app, "--kv-cache-memory", &o->kv_cache_bytes, int64_t{1} << 50,
              "KV cache budget, e.g. 512M, 2G (default: enough for max-num-seqs full contexts, "
              "at most --kv-cache-memory-fraction of the memory available after the weights)")
      ->group(kGroup);
  AddNumber(app, "--kv-cache-memory-fraction", &o->kv_memory_fraction, 0.01, 1.0,
            "share of the available memory the KV cache may take by default")
      ->group(kGroup);
  AddByteSize(app, "--kv-offload-memory", &o->kv_offload_memory, int64_t{1} << 50,
              "host-memory KV tier: blocks evicted from the KV cache are kept here (LRU) and "
              "loaded back on a prefix match, e.g. 2G (default: 0, off)")
      ->group(kGroup);
  app.add_option("--kv-offload-dir", o->kv_offload_dir,
                 "disk KV tier directory: evicted blocks (and the cache at shutdown) persist "
                 "here and are served again after a restart (default: off)")
      ->group(kGroup);
  AddByteSize(app, "--kv-offload-disk", &o->kv_offload_disk, int64_t{1} << 50,
              "bound of the disk KV tier (default: 8G)")
      ->group(kGroup);
  AddInt<int64_t>(app, "--kv-blocks", &o->kv_cache_blocks, 0, int64_t{1} << 30,
                  "exactly this many KV blocks (0: sized from the memory budget)")
      ->group(kGroup);
  f.max_model_len =
      AddInt<int64_t>(app, "-c,--ctx-size,--max-model-len", &o->max_model_len, 0, 1 << 24,
                      "context length (0: the model's, lowered to what the KV cache holds)")
          ->group(kGroup);
  AddInt<int64_t>(app, "--max-num-batched-tokens,--max-batched-tokens", &o->max_num_batched_tokens,
                  1, 1 << 24, "tokens per engine step")
      ->group(kGroup);
  f.max_num_seqs =
      AddInt(app, "--max-num-seqs", &o->max_num_seqs, 1, 1 << 16, "requests generating at once")
          ->group(kGroup);
  AddInt<int64_t>(app, "--short-prefill-tokens", &o->short_prefill_tokens, 0, 1 << 24,
                  "prompt work with at most this many uncached tokens left (a mostly cached "
                  "prompt) runs ahead of longer prefills (0: off)")
      ->group(kGroup);
  AddInt<int64_t>(app, "--max-prefill-tokens-while-decoding", &o->max_prefill_tokens_while_decoding,
                  0, 1 << 24,
                  "while requests are generating, a step runs at most this many prompt tokens "
                  "(0: only --max-num-batched-tokens)")
      ->group(kGroup);
  AddNumber(app, "--burst-gather-ms", &o->burst_gather_ms, 0, 1000,
            "when requests reach an idle engine, its first step waits until none has arrived "
            "for this long, so a burst starts in one step (0: off)")
      ->group(kGroup);
  AddNumber(app, "--burst-gather-max-ms", &o->burst_gather_max_ms, 0, 10000,
            "the longest such wait")
      ->group(kGroup);
  app.add_flag_callback(
         "--no-prefix-caching", [o] { o->enable_prefix_caching = false; }, "disable prefix caching")
      ->group(kGroup);
  app.add_flag_callback(
         "--disable-hybrid-kv-cache-manager", [o] { o->hybrid_kv_cache = false; },
         "keep every layer's KV for the whole sequence (sliding-window layers otherwise hold only "
         "their window's blocks)")
      ->group(kGroup);
  app.add_option_function<std::string>(
         "--scheduling-policy",
         [o](const std::string& v) {
           if (v != "fcfs" && v != "priority") {
             throw BadValue("--scheduling-policy", v, "one of fcfs, priority");
           }
           o->priority_scheduling = v == "priority";
         },
         "fcfs, or priority: the request's `priority` (lower first) orders admission and "
         "preemption")
      ->type_name("fcfs|priority")
      ->default_str(o->priority_scheduling ? "priority" : "fcfs")
      ->group(kGroup);
  app.add_option_function<std::string>(
         "--pooling",
         [o](const std::string& v) {
           if (v != "none" && v != "mean" && v != "cls" && v != "last" && v != "rank") {
             throw BadValue("--pooling", v, "one of none, mean, cls, last, rank");
           }
           o->pooling = v;
         },
         "serve embeddings / scores pooled this way (default: as the model says; encoders "
         "pool, decoders generate); e.g. last for a decoder embedding model")
      ->type_name("none|mean|cls|last|rank")
      ->group(kGroup);
  app.add_flag_callback(
         "--no-generation-config", [o] { o->use_generation_config = false; },
         "ignore the model folder's generation_config.json (its sampling defaults and extra "
         "EOS ids)")
      ->group(kGroup);
  app.add_option_function<std::string>(
         "--speculative-config",
         [o](const std::string& v) {
           Result<spec::SpeculativeConfig> c = spec::ParseSpeculativeConfig(v);
           Status s = c.ok() ? spec::ValidateSpeculativeConfig(*c) : c.status();
           if (!s.ok()) throw CLI::ValidationError("--speculative-config: " + s.message());
           o->speculative = *c;
         },
         "speculative decoding, as JSON: {\"method\": \"ngram\", \"num_speculative_tokens\": K, "
         "\"prompt_lookup_min\": N, \"prompt_lookup_max\": M, \"disable_by_batch_size\": B, "
         "\"min_acceptance_rate\": R} (docs/speculative.md; default: off)")
      ->type_name("JSON")
      ->group(kGroup);
  return f;
}

}  // namespace tachyon::cli
