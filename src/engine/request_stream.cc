#include "engine/request_stream.h"

#include <utility>

namespace tachyon::engine {

std::optional<RequestOutput> RequestStream::PopLocked() {
  if (queue_.empty()) return std::nullopt;
  RequestOutput o = std::move(queue_.front());
  queue_.pop_front();
  return o;
}

std::optional<RequestOutput> RequestStream::Next() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !queue_.empty() || final_pushed_; });
  return PopLocked();
}

std::optional<RequestOutput> RequestStream::NextFor(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !queue_.empty() || final_pushed_; });
  return PopLocked();
}

std::optional<RequestOutput> RequestStream::TryNext() {
  std::lock_guard<std::mutex> lock(mu_);
  return PopLocked();
}

bool RequestStream::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return final_pushed_;
}

void RequestStream::Push(RequestOutput output) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (final_pushed_) return;  // nothing follows the final output
    if (output.finished) final_pushed_ = true;
    if (!sink_) queue_.push_back(std::move(output));
  }
  if (sink_) {
    sink_(std::move(output));
    cv_.notify_all();
    return;
  }
  cv_.notify_all();
  if (notifier_) notifier_();
}

}  // namespace tachyon::engine
