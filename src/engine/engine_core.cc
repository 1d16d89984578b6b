#include "engine/engine_core.h"

#include <algorithm>
#include <chrono>

#include "util/logging.h"

namespace tachyon::engine {
namespace {
// Stamps the request's arrival (queueing and the TTFT breakdown count from here).
void StampArrival(EngineRequest& r) {
  if (r.arrival == std::chrono::steady_clock::time_point{}) {
    r.arrival = std::chrono::steady_clock::now();
  }
}
}  // namespace

Result<std::unique_ptr<EngineCore>> EngineCore::Create(
    const EngineConfig& config, std::unique_ptr<ModelExecutor> executor,
    std::unique_ptr<ModelExecutor> draft_executor) {
  if (!executor) return InvalidArgument("engine: no model executor");
  if (config.burst_gather_quiet.count() < 0 || config.burst_gather_max.count() < 0) {
    return InvalidArgument("engine: negative burst_gather_quiet or burst_gather_max");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                   Engine::Create(config, executor.get(), nullptr, draft_executor.get()));
  std::unique_ptr<EngineCore> core(
      new EngineCore(std::move(executor), std::move(draft_executor), std::move(engine)));
  core->thread_ = std::thread([c = core.get()] { c->Loop(); });
  return core;
}

EngineCore::EngineCore(std::unique_ptr<ModelExecutor> executor,
                       std::unique_ptr<ModelExecutor> draft_executor,
                       std::unique_ptr<Engine> engine)
    : executor_(std::move(executor)),
      draft_executor_(std::move(draft_executor)),
      engine_(std::move(engine)) {
  metrics_ = engine_->Metrics();
}

EngineCore::~EngineCore() {
  Stop();
}

Status EngineCore::Enqueue(uint64_t id, EngineRequest request,
                           std::shared_ptr<RequestStream> stream) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Unavailable("the engine is shutting down");
    inbox_.push_back({id, std::move(request), std::move(stream)});
  }
  cv_.notify_one();
  return OkStatus();
}

Result<std::shared_ptr<RequestStream>> EngineCore::AddRequest(EngineRequest request,
                                                              std::function<void()> notifier) {
  StampArrival(request);
  RETURN_IF_ERROR(engine_->Validate(request));
  const uint64_t id = next_id_.fetch_add(1);
  auto stream = std::make_shared<RequestStream>(id, std::move(notifier));
  RETURN_IF_ERROR(Enqueue(id, std::move(request), stream));
  return stream;
}

Result<uint64_t> EngineCore::AddRequestWithCallback(EngineRequest request,
                                                    std::function<void(RequestOutput)> on_output) {
  StampArrival(request);
  RETURN_IF_ERROR(engine_->Validate(request));
  const uint64_t id = next_id_.fetch_add(1);
  auto stream = std::make_shared<RequestStream>(id, std::move(on_output));
  RETURN_IF_ERROR(Enqueue(id, std::move(request), std::move(stream)));
  return id;
}

Result<std::vector<uint64_t>> EngineCore::AddRequestsWithCallbacks(
    std::vector<std::pair<EngineRequest, std::function<void(RequestOutput)>>> requests) {
  for (size_t i = 0; i < requests.size(); ++i) {
    StampArrival(requests[i].first);
    Status s = engine_->Validate(requests[i].first);
    if (!s.ok()) return s.WithContext("request " + std::to_string(i));
  }
  std::vector<uint64_t> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Unavailable("the engine is shutting down");
    for (auto& [request, on_output] : requests) {
      const uint64_t id = next_id_.fetch_add(1);
      inbox_.push_back(
          {id, std::move(request), std::make_shared<RequestStream>(id, std::move(on_output))});
      ids.push_back(id);
    }
  }
  cv_.notify_one();
  return ids;
}

void EngineCore::Abort(uint64_t request_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborts_.push_back(request_id);
  }
  cv_.notify_one();
}

void EngineCore::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

EngineMetrics EngineCore::Metrics() const {
  std::lock_guard<std::mutex> lock(mu_);
  return metrics_;
}

void EngineCore::Deliver(std::vector<RequestOutput> outputs) {
  for (RequestOutput& o : outputs) {
    auto it = streams_.find(o.request_id);
    if (it == streams_.end()) continue;
    if (!it->second->has_sink() && it->second.use_count() == 1) {
      // Nobody can read this stream any more (the consumer dropped it): stop the work.
      engine_->Abort(o.request_id);
      streams_.erase(it);
      continue;
    }
    const bool done = o.finished;
    it->second->Push(std::move(o));
    if (done) streams_.erase(it);
  }
}

void EngineCore::GatherBurst(std::unique_lock<std::mutex>& lock) {
  const EngineConfig& c = engine_->config();
  if (c.burst_gather_quiet.count() <= 0 || inbox_.empty() || engine_->HasWork()) return;
  const auto deadline = std::chrono::steady_clock::now() + c.burst_gather_max;
  while (!stopping_ && aborts_.empty() && std::chrono::steady_clock::now() < deadline) {
    const size_t n = inbox_.size();
    const auto until = std::min(deadline, std::chrono::steady_clock::now() + c.burst_gather_quiet);
    if (!cv_.wait_until(lock, until,
                        [&] { return stopping_ || !aborts_.empty() || inbox_.size() != n; })) {
      return;  // quiet for burst_gather_quiet, or the deadline
    }
  }
}

void EngineCore::Loop() {
  while (true) {
    std::vector<Pending> inbox;
    std::vector<uint64_t> aborts;
    bool stopping = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        return stopping_ || !inbox_.empty() || !aborts_.empty() || engine_->HasWork();
      });
      GatherBurst(lock);
      inbox.swap(inbox_);
      aborts.swap(aborts_);
      stopping = stopping_;
    }
    for (Pending& p : inbox) {
      streams_[p.id] = p.stream;
      Status s = engine_->Add(p.id, std::move(p.request));
      if (!s.ok()) {  // validated already; only a duplicate id or a broken invariant gets here
        RequestOutput o;
        o.request_id = p.id;
        o.finish_reason = FinishReason::kError;
        o.finished = true;
        o.error = s;
        Deliver({std::move(o)});
      }
    }
    for (uint64_t id : aborts) engine_->Abort(id);
    if (stopping) engine_->AbortAll();
    Deliver(engine_->TakeOutputs());
    if (!stopping) {
      std::vector<RequestOutput> outputs = engine_->Step();
      {
        // Before the outputs go out: whoever has a step's output sees that step counted.
        std::lock_guard<std::mutex> lock(mu_);
        metrics_ = engine_->Metrics();
      }
      Deliver(std::move(outputs));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      metrics_ = engine_->Metrics();  // after Deliver's aborts of abandoned streams
    }
    if (stopping) {
      engine_->FlushKvStores();  // the disk tier keeps the pool's prefixes for the next start
      break;
    }
  }
}

}  // namespace tachyon::engine
