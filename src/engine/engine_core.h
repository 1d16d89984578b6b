// EngineCore: the thread-safe engine. It owns the model executor and runs the Engine step
// loop (engine.h) on its own thread; any thread may add or abort requests and read metrics.
//
//   auto core = EngineCore::Create(config, std::move(executor)).value();
//   auto stream = core->AddRequest(std::move(req)).value();   // or an InvalidArgument
//   while (auto out = stream->Next()) { ... out->text ...; }  // ends after out->finished
//   core->Abort(stream->request_id());
//
// Requests are validated on the caller's thread (clear errors, nothing queued); accepted ones
// reach the engine thread before its next step. Outputs are pushed to each request's stream
// as they are produced; the engine never waits on a consumer. An abort takes effect (blocks
// freed, final output with FinishReason::kAbort) at the start of the next step; dropping every
// reference to a request's stream aborts it too (at its next output). Stop() (or
// the destructor) ends the loop: in-flight requests get FinishReason::kAbort, later
// AddRequest calls fail with Unavailable.
// Thread-safety: every public method is thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "engine/request_stream.h"

namespace tachyon::engine {

class EngineCore {
 public:
  // Starts the engine thread. Errors: InvalidArgument for an unusable config.
  // `draft_executor`: the draft model of speculative method draft_model (else null).
  static Result<std::unique_ptr<EngineCore>> Create(
      const EngineConfig& config, std::unique_ptr<ModelExecutor> executor,
      std::unique_ptr<ModelExecutor> draft_executor = nullptr);
  ~EngineCore();  // Stop()
  EngineCore(const EngineCore&) = delete;
  EngineCore& operator=(const EngineCore&) = delete;

  // Queues a request. `notifier` (optional) runs on the engine thread after each output is
  // pushed to the stream; it must not block. Errors: InvalidArgument (the request can never
  // run, with the reason), Unavailable after Stop().
  Result<std::shared_ptr<RequestStream>> AddRequest(EngineRequest request,
                                                    std::function<void()> notifier = nullptr);
  // Like AddRequest, but every output goes to `on_output`, called on the engine thread (it
  // must be cheap and never block); the last call has RequestOutput::finished set. Returns the
  // request id (for Abort).
  Result<uint64_t> AddRequestWithCallback(EngineRequest request,
                                          std::function<void(RequestOutput)> on_output);
  // Adds several requests at once, each with its callback (as AddRequestWithCallback): all of
  // them reach the engine before the same step (a burst), or none is added if one is invalid
  // (the error names its index). Returns their ids in order.
  Result<std::vector<uint64_t>> AddRequestsWithCallbacks(
      std::vector<std::pair<EngineRequest, std::function<void(RequestOutput)>>> requests);
  // Aborts a request (no-op for unknown or finished ids).
  void Abort(uint64_t request_id);
  // Ends the loop and joins the thread; idempotent.
  void Stop();

  // A snapshot taken after the last step, before its outputs were delivered: a consumer that
  // has an output finds the step that made it counted.
  EngineMetrics Metrics() const;
  const EngineConfig& config() const { return engine_->config(); }
  int32_t n_vocab() const { return executor_->n_vocab(); }

 private:
  EngineCore(std::unique_ptr<ModelExecutor> executor, std::unique_ptr<ModelExecutor> draft_executor,
             std::unique_ptr<Engine> engine);
  Status Enqueue(uint64_t id, EngineRequest request, std::shared_ptr<RequestStream> stream);
  void Loop();
  // Engine thread, holding `lock` (on mu_) after a wake-up: if the engine is idle and
  // requests arrived, waits for more of their burst (EngineConfig::burst_gather_quiet / _max),
  // or until an abort or Stop().
  void GatherBurst(std::unique_lock<std::mutex>& lock);
  void Deliver(std::vector<RequestOutput> outputs);

  std::unique_ptr<ModelExecutor> executor_;
  std::unique_ptr<ModelExecutor> draft_executor_;  // null unless speculating with a draft model
  std::unique_ptr<Engine> engine_;  // engine thread only (Validate/config: any thread)
  std::unordered_map<uint64_t, std::shared_ptr<RequestStream>> streams_;  // engine thread

  struct Pending {
    uint64_t id;
    EngineRequest request;
    std::shared_ptr<RequestStream> stream;
  };
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Pending> inbox_;    // GUARDED_BY(mu_)
  std::vector<uint64_t> aborts_;  // GUARDED_BY(mu_)
  bool stopping_ = false;         // GUARDED_BY(mu_)
  EngineMetrics metrics_;         // GUARDED_BY(mu_)
  std::atomic<uint64_t> next_id_{1};
  std::thread thread_;
};

}  // namespace tachyon::engine
