// Helpers shared by the engine tests: an Engine over FakeModelExecutor, run to completion,
// with outputs collected per (request, choice). Header-only; for tests.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/testing/fake_executor.h"

namespace tachyon::engine::testing {

struct Completion {
  std::vector<int32_t> tokens;
  std::string text;
  std::vector<TokenLogprobs> logprobs;
  FinishReason finish = FinishReason::kNone;
  int num_outputs = 0;
  TtftBreakdown ttft;  // from the output with the first token
};

struct HarnessOptions {
  int n_vocab = 64;
  int num_blocks = 256;
  int block_size = 4;
  int64_t max_batched_tokens = 32;
  int max_num_seqs = 16;
  int64_t max_model_len = 512;
  bool prefix_caching = true;
  // KV layer groups (kv/kv_groups.h), given to the engine and the fake; empty: one group.
  std::vector<int64_t> kv_group_windows = {};
  std::vector<int32_t> eos = {};
  std::shared_ptr<const Detokenizer> detokenizer;
  SchedulePolicy policy = SchedulePolicy::kFcfs;
  int64_t long_prefill_token_threshold = 0;
  int64_t short_prefill_tokens = 0;
  int64_t max_prefill_tokens_while_decoding = 0;
  spec::SpeculativeConfig speculative;  // off unless its method is set
  // KV stores outside the pool (EngineConfig::kv_stores), fastest first.
  std::vector<std::shared_ptr<kv::BlockStore>> kv_stores = {};
  // Replaces the speculative config's drafter (built over the harness's executor).
  std::function<std::unique_ptr<spec::Drafter>(const FakeModelExecutor&)> drafter;
  // Method draft_model: the draft model (not owned; storage for draft_num_blocks blocks, 0:
  // num_blocks).
  ModelExecutor* draft_executor = nullptr;
  int draft_num_blocks = 0;
  std::vector<int64_t> draft_group_windows;  // the draft's KV layer groups (empty: one)
};

class Harness {
 public:
  explicit Harness(const HarnessOptions& o = {})
      : exec_(o.n_vocab, o.num_blocks, o.block_size, o.kv_group_windows) {
    EngineConfig c;
    c.kv.num_blocks = o.num_blocks;
    c.kv.block_size = o.block_size;
    c.kv.enable_prefix_caching = o.prefix_caching;
    c.kv.group_windows = o.kv_group_windows;
    c.scheduler.max_num_batched_tokens = o.max_batched_tokens;
    c.scheduler.max_num_seqs = o.max_num_seqs;
    c.scheduler.policy = o.policy;
    c.scheduler.long_prefill_token_threshold = o.long_prefill_token_threshold;
    c.scheduler.short_prefill_tokens = o.short_prefill_tokens;
    c.scheduler.max_prefill_tokens_while_decoding = o.max_prefill_tokens_while_decoding;
    c.max_model_len = o.max_model_len;
    c.eos_token_ids = o.eos;
    c.detokenizer = o.detokenizer;
    c.speculative = o.speculative;
    c.kv_stores = o.kv_stores;
    c.draft_num_blocks = o.draft_num_blocks;
    c.draft_group_windows = o.draft_group_windows;
    auto engine =
        Engine::Create(c, &exec_, o.drafter ? o.drafter(exec_) : nullptr, o.draft_executor);
    if (!engine.ok()) {
      ADD_FAILURE() << engine.status().ToString();
      return;
    }
    engine_ = std::move(engine).value();
  }

  Status Add(uint64_t id, EngineRequest r) { return engine_->Add(id, std::move(r)); }

  // Collects outputs of one step.
  void Collect(const std::vector<RequestOutput>& outs) {
    for (const RequestOutput& o : outs) {
      Completion& c = results_[o.request_id][o.index];
      if (c.tokens.empty() && !o.token_ids.empty()) c.ttft = o.ttft;
      c.tokens.insert(c.tokens.end(), o.token_ids.begin(), o.token_ids.end());
      c.text += o.text;
      c.logprobs.insert(c.logprobs.end(), o.logprobs.begin(), o.logprobs.end());
      if (o.finish_reason != FinishReason::kNone) c.finish = o.finish_reason;
      ++c.num_outputs;
      if (o.finished) finished_[o.request_id] = o.usage;
    }
  }
  void Step() { Collect(engine_->Step()); }
  // Steps until no work is left (bounded, so a scheduling bug fails instead of hanging).
  void RunToCompletion(int max_steps = 100000) {
    for (int i = 0; i < max_steps && engine_->HasWork(); ++i) Step();
    Collect(engine_->TakeOutputs());
  }

  Engine& engine() { return *engine_; }
  FakeModelExecutor& exec() { return exec_; }
  const Completion& result(uint64_t id, int index = 0) { return results_[id][index]; }
  bool finished(uint64_t id) const { return finished_.count(id) > 0; }
  const Usage& usage(uint64_t id) { return finished_.at(id); }

 private:
  FakeModelExecutor exec_;
  std::unique_ptr<Engine> engine_;
  std::map<uint64_t, std::map<int, Completion>> results_;
  std::map<uint64_t, Usage> finished_;
};

inline EngineRequest Greedy(std::vector<int32_t> prompt, int max_tokens) {
  EngineRequest r;
  r.prompt_tokens = std::move(prompt);
  r.params.temperature = 0;
  r.params.max_tokens = max_tokens;
  return r;
}

// What greedy decoding must produce, computed from the fake's logits directly (no engine).
inline std::vector<int32_t> OracleGreedy(const FakeModelExecutor& exec,
                                         std::vector<int32_t> history, int max_tokens) {
  std::vector<int32_t> out;
  std::vector<float> logits(exec.n_vocab());
  for (int i = 0; i < max_tokens; ++i) {
    exec.LogitsFor(history, logits);
    int32_t best = 0;
    for (int32_t v = 1; v < exec.n_vocab(); ++v) {
      if (logits[v] > logits[best]) best = v;
    }
    out.push_back(best);
    history.push_back(best);
  }
  return out;
}

// A deterministic prompt of `len` tokens in [0, n_vocab).
inline std::vector<int32_t> MakePrompt(int len, int salt, int n_vocab = 64) {
  std::vector<int32_t> p(len);
  for (int i = 0; i < len; ++i) p[i] = (i * 7 + salt * 13 + (i * salt) % 5) % n_vocab;
  return p;
}

}  // namespace tachyon::engine::testing
