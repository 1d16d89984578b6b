// PoolingEngine: runs embedding and reranking requests (model::Model::Pool) on its own thread.
// Each request is prefill only: its whole input runs in one step, no KV is kept afterwards
// (the KV pool is scratch, reused by every step) and nothing is sampled. Waiting requests are
// batched first come, first served under a token budget (max_batch_tokens; a request alone
// may use all of it) and a sequence limit, so concurrent requests share one forward pass.
//
//   auto pe = PoolingEngine::Create(model, {.pooling = PoolingType::kMean});
//   pe->Submit({ids, {}}, [](PoolingResult r) { ... r.values ... });  // callback on its thread
//
// Thread-safety: Submit, Metrics and Stop may be called from any thread. Callbacks run on the
// engine thread and must not block. The model must not run anything else meanwhile.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "model/model.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace tachyon::engine {

struct PoolingRequest {
  std::vector<int32_t> tokens;       // the whole input (special tokens included), non-empty
  std::vector<int32_t> token_types;  // empty (all 0) or one per token (cross-encoder pairs)
};

struct PoolingResult {
  Status status;              // ok, or why the request failed (Unavailable when stopped)
  std::vector<float> values;  // model::PoolOutput's row: the embedding, or the head's logits
  int64_t n_tokens = 0;
  double queue_seconds = 0;  // from Submit to the start of its step
};

using PoolingCallback = std::function<void(PoolingResult)>;

struct PoolingEngineConfig {
  model::PoolingType pooling = model::PoolingType::kNone;  // REQUIRES: not kNone
  int64_t max_batch_tokens = 2048;  // token budget of one step (>= max_tokens)
  int max_batch_seqs = 64;          // sequences in one step
  int64_t max_tokens = 0;           // longest input; <= 0: the model's max_pool_tokens
  int max_queue = 8192;             // waiting inputs beyond which Submit refuses
  int threads = 0;                  // compute threads; <= 0: all hardware threads
  model::KvDtype kv_dtype = model::KvDtype::kF32;
};

class PoolingEngine {
 public:
  // Errors: InvalidArgument for kNone, rank pooling on a model without a classification
  // head, a budget smaller than max_tokens.
  static Result<std::unique_ptr<PoolingEngine>> Create(std::shared_ptr<model::Model> model,
                                                       PoolingEngineConfig config);
  ~PoolingEngine();  // Stop()

  // Queues a request. Errors (callback never called): InvalidArgument for empty input, more
  // than max_tokens tokens, ids outside the vocabulary, bad token types; ResourceExhausted
  // when max_queue requests wait; Unavailable after Stop.
  Status Submit(PoolingRequest request, PoolingCallback callback);
  // Fails waiting requests with Unavailable and joins the thread.
  void Stop();

  const PoolingEngineConfig& config() const { return config_; }
  int64_t dim() const;  // floats per result
  // num_waiting, num_running (in the current step), num_steps, prompt tokens,
  // requests_finished and forward_seconds.
  EngineMetrics Metrics() const;

 private:
  struct Pending {
    PoolingRequest request;
    PoolingCallback callback;
    std::chrono::steady_clock::time_point arrival;
  };
  PoolingEngine(std::shared_ptr<model::Model> model, PoolingEngineConfig config);
  void Loop();
  void RunStep(std::vector<Pending>& step);

  std::shared_ptr<model::Model> model_;
  PoolingEngineConfig config_;
  std::unique_ptr<model::KvCache> kv_;
  std::unique_ptr<ThreadPool> pool_;
  model::PoolOutput out_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;  // GUARDED_BY(mu_)
  bool stopping_ = false;      // GUARDED_BY(mu_)
  EngineMetrics metrics_;      // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace tachyon::engine
