// RequestStream: the per-request output channel between the engine thread and a consumer.
//
// The engine pushes outputs without ever waiting on the consumer (an unbounded queue under a
// short mutex); the consumer pops them blocking (Next), non-blocking (TryNext), or is woken by
// the optional notifier (for an event loop: the notifier runs on the engine thread right after
// each push and must return quickly without blocking).
// Thread-safety: all methods are thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>

#include "engine/output.h"

namespace tachyon::engine {

class RequestStream {
 public:
  RequestStream(uint64_t request_id, std::function<void()> notifier)
      : request_id_(request_id), notifier_(std::move(notifier)) {}
  // A stream that hands every output straight to `sink` on the engine thread instead of
  // queueing it (Next/TryNext then return nothing). The sink must not block.
  RequestStream(uint64_t request_id, std::function<void(RequestOutput)> sink)
      : request_id_(request_id), sink_(std::move(sink)) {}

  uint64_t request_id() const { return request_id_; }

  // The next output, waiting for it; nullopt once the final output has been returned.
  std::optional<RequestOutput> Next();
  // Like Next, giving up after `timeout` (nullopt then, too: check finished()).
  std::optional<RequestOutput> NextFor(std::chrono::milliseconds timeout);
  // The next output if one is ready now.
  std::optional<RequestOutput> TryNext();
  // True once the final output has been pushed (it may still be queued).
  bool finished() const;

  bool has_sink() const { return static_cast<bool>(sink_); }

  // Engine side: queues an output (never blocks on the consumer).
  void Push(RequestOutput output);

 private:
  std::optional<RequestOutput> PopLocked();

  const uint64_t request_id_;
  const std::function<void()> notifier_;
  const std::function<void(RequestOutput)> sink_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestOutput> queue_;  // GUARDED_BY(mu_)
  bool final_pushed_ = false;        // GUARDED_BY(mu_)
};

}  // namespace tachyon::engine
