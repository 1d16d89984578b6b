// Engine: the single-threaded engine loop. Add() requests, call Step() repeatedly; each step
// schedules, runs one flat batch, samples, applies stop conditions and returns the outputs
// produced. EngineCore (engine_core.h) runs this on its own thread behind a thread-safe API;
// tests drive it directly for exact control.
//
// Thread-safety: none, except Validate() (reads only the immutable config).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/constrained_decoding.h"
#include "engine/detokenizer.h"
#include "engine/kv_offload.h"
#include "engine/model_executor.h"
#include "engine/model_runner.h"
#include "engine/output.h"
#include "engine/pd_export.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/speculative_step.h"
#include "grammar/grammar.h"
#include "kv/kv_cache_manager.h"
#include "sampling/sampling_params.h"
#include "spec/acceptance.h"
#include "spec/speculative_config.h"

namespace tachyon::engine {

struct EngineConfig {
  SchedulerConfig scheduler;
  // Burst gathering (EngineCore's loop): when requests reach an idle engine, its first step
  // waits until none has arrived for burst_gather_quiet, and at most burst_gather_max after it
  // woke, so requests sent together start in one step (a prompt prefix they share is computed
  // once, and each of them samples its first token in that step) rather than the first one
  // alone and the others after its whole prefill. A request reaching an idle engine alone
  // waits burst_gather_quiet; a busy engine never waits. quiet 0: off.
  std::chrono::microseconds burst_gather_quiet{0};
  std::chrono::microseconds burst_gather_max{0};
  kv::KvCacheConfig kv;                            // num_blocks: see kv::NumBlocksForBudget
  int64_t max_model_len = 2048;                    // context length: prompt + generated tokens
  std::vector<int32_t> eos_token_ids;              // end generation (unless ignore_eos)
  std::shared_ptr<const Detokenizer> detokenizer;  // null: no text, stop strings rejected
  spec::SpeculativeConfig speculative;             // method kNone: no speculative decoding
  // KV stores outside the pool (kv/block_store.h), fastest first: evicted blocks go to the
  // first that accepts them, a waiting request's next blocks are loaded from them (see
  // engine/kv_offload.h). Empty: none.
  std::vector<std::shared_ptr<kv::BlockStore>> kv_stores;
  // Method draft_model: blocks of the draft model's KV pool (its executor's storage holds
  // them; block_size and prefix caching as kv's; no KV events). 0: kv.num_blocks.
  int draft_num_blocks = 0;
  std::vector<int64_t> draft_group_windows = {};  // the draft's layer groups (empty: one full)
};

struct EngineRequest {
  std::vector<int32_t> prompt_tokens;
  sampling::SamplingParams params;
  int priority = 0;        // lower runs first under SchedulePolicy::kPriority
  std::string cache_salt;  // prefix-cache namespace: only equal salts share blocks
  // Output constraint, compiled for this engine's vocabulary (null: unconstrained). Each
  // choice gets its own matcher; the output follows the grammar, EOS only where it may end,
  // and the choice finishes (kStop) once nothing but EOS can follow.
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  // Length-aware grammar masks (TokenMatcher::SetTokenLimit with the choice's max_tokens): the
  // output then reaches an end of the grammar within max_tokens wherever its shortest
  // completion fits.
  bool grammar_within_max_tokens = false;
  // When the caller handed it in (EngineCore sets it); the default means "at Engine::Add".
  // Queueing time and the TTFT breakdown count from here.
  std::chrono::steady_clock::time_point arrival{};
  // Prefill/decode disaggregation: receives the prompt's KV blocks as they are computed
  // (engine/pd_export.h); null: none.
  std::shared_ptr<KvExportSink> kv_export;
};

struct EngineMetrics {
  int num_running = 0;  // sequences (choices)
  int num_waiting = 0;
  kv::KvCacheStats kv;
  int64_t num_preemptions = 0;
  int64_t num_steps = 0;
  int64_t prompt_tokens_received = 0;  // prompt tokens of the requests added (once per request)
  int64_t prompt_tokens_computed = 0;  // tokens run that did not produce a sample
  int64_t generation_tokens = 0;       // tokens sampled
  int64_t requests_finished = 0;       // user requests, all finish reasons
  int64_t requests_aborted = 0;
  // Engine-thread time, cumulative (seconds): the model's forward passes; sampling (logits
  // processors + sampler); detokenization and stop-string matching of the outputs.
  double forward_seconds = 0;
  double sample_seconds = 0;
  double detokenize_seconds = 0;
  spec::SpecStats spec;       // speculative decoding: drafts, drafted and accepted tokens
  KvOffloadStats kv_offload;  // KV tiers (empty tiers: none configured)
};

class Engine {
 public:
  // Errors: InvalidArgument for an unusable config (Unimplemented for a speculative method not
  // built yet). `executor` is not owned and must outlive the engine; its KV storage must hold
  // config.kv.num_blocks blocks. `drafter`, when given, replaces the speculative config's own
  // (tests); it is used only when config.speculative is enabled. `draft_executor`: the draft
  // model of method draft_model (not owned, outlives the engine; KV storage for
  // draft_num_blocks blocks), required by that method.
  static Result<std::unique_ptr<Engine>> Create(const EngineConfig& config, ModelExecutor* executor,
                                                std::unique_ptr<spec::Drafter> drafter = nullptr,
                                                ModelExecutor* draft_executor = nullptr);

  // Whether the request could ever run: InvalidArgument (with the reason) if not. A
  // continuation's resumed tokens are replayed as Add does (see there).
  Status Validate(const EngineRequest& req) const;
  // Queues a request under a caller-chosen unique id. A continuation (params.output_offset = k
  // > 0: the prompt ends with k output tokens its choice already delivered) starts each choice
  // where the original stream was after them: the output constraint, the decoder and the stop
  // strings have taken them in (their text is not sent again), the penalties count them as
  // output, and sampling draws from position k on. Errors: as Validate, a duplicate id, or
  // resumed tokens that the constraint refuses or that complete it or a stop string; on an
  // error the request's kv_export sink, if any, is ended with it (OnEnd).
  Status Add(uint64_t request_id, EngineRequest req);
  // Finishes every choice of the request with FinishReason::kAbort and frees its blocks; the
  // final outputs come with the next Step() / TakeOutputs(). Unknown ids are ignored.
  void Abort(uint64_t request_id);
  void AbortAll();

  // Runs one step (if there is work); returns every output produced since the last call.
  std::vector<RequestOutput> Step();
  // Outputs produced outside Step() (aborts), without running a step.
  std::vector<RequestOutput> TakeOutputs() { return std::exchange(outputs_, {}); }

  // Requests to run, or KV loads to finish (their blocks go back to the pool in a step).
  bool HasWork() const {
    return scheduler_.HasWork() || (offload_ && offload_->loading()) || exporter_.holding();
  }
  bool HasRequest(uint64_t request_id) const { return groups_.count(request_id) > 0; }
  EngineMetrics Metrics() const;
  const EngineConfig& config() const { return config_; }
  const kv::KvCacheManager& kv() const { return kv_; }
  // Shutdown: offers the pool's cached blocks to the KV stores and flushes them (the disk tier
  // then holds them for the next start). No-op without stores.
  void FlushKvStores();
  const Speculator* speculator() const { return speculator_.get(); }  // null: off

 private:
  struct Group {
    std::vector<std::unique_ptr<Request>> choices;
    int num_unfinished = 0;
  };
  Engine(const EngineConfig& config, ModelExecutor* executor);
  int64_t TokenLimit() const;
  int64_t MaxChunk() const;  // the most tokens one request computes in a step
  Status AddChoices(uint64_t request_id, EngineRequest req);  // Add, its sink left to the caller
  Status CheckLimits(const EngineRequest& req) const;         // Validate but for the resumed tokens
  // A choice's output state, after a continuation's resumed tokens: InvalidArgument when its
  // constraint refuses them or they complete it or a stop string.
  struct ChoiceStart {
    std::unique_ptr<grammar::TokenMatcher> matcher;
    std::unique_ptr<TextDecoder> decoder;
    StopStringMatcher stop{{}};
    std::string text;  // what the original sent for the resumed tokens
  };
  Result<ChoiceStart> StartChoice(const EngineRequest& req, int64_t max_tokens) const;
  int64_t ChoiceMaxTokens(const EngineRequest& req) const;  // params.max_tokens, or what fits
  RequestOutput NewOutput(const Request& r) const;
  // Appends a sampled token to r and to its output `o`, with the stop checks (text flushed on a
  // finish). Returns the finish reason (kNone: r goes on); the caller then calls Finish.
  FinishReason AppendToken(Request* r, const sampling::SampleResult& s, RequestOutput* o);
  // Samples s's logits rows of this step (1 + s.num_draft_tokens: its last known token's, then
  // one per draft it verifies) and emits the tokens. `mask`: the grammar mask of the first row
  // (MaskWorker; later rows' masks are filled here, after the tokens before them).
  void ProcessSampled(const ScheduledSeq& s, std::span<float> rows, std::span<const uint32_t> mask);
  void Finish(Request* r, FinishReason reason, RequestOutput* out);
  void FailStep(const SchedulerOutput& out, const Status& error);

  EngineConfig config_;
  ModelExecutor* executor_;
  kv::KvCacheManager kv_;
  Scheduler scheduler_;
  ModelRunner runner_;
  MaskWorker masks_;                     // grammar masks, computed during the forward pass
  KvExporter exporter_;                  // KV export: layer by layer, pins of ended exports
  std::vector<uint32_t> draft_mask_;     // a grammar mask after accepted drafts
  std::unique_ptr<Speculator> speculator_;  // null: speculative decoding off
  std::unordered_map<uint64_t, Group> groups_;
  std::vector<uint64_t> finished_groups_;  // erased at the end of Step
  std::vector<RequestOutput> outputs_;
  int64_t next_seq_id_ = 0;
  uint64_t next_arrival_ = 0;
  std::mt19937_64 seed_rng_{std::random_device{}()};
  EngineMetrics counters_;
  std::unique_ptr<KvOffload> offload_;  // null: no KV stores; destroyed before kv_
};

}  // namespace tachyon::engine
