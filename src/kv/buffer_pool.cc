#include "kv/buffer_pool.h"

#include <utility>

namespace tachyon::kv {

std::vector<uint8_t> BufferPool::Take() {
  std::lock_guard<std::mutex> lock(mu_);
  if (free_.empty()) return {};
  std::vector<uint8_t> b = std::move(free_.back());
  free_.pop_back();
  bytes_ -= static_cast<int64_t>(b.capacity());
  return b;
}

void BufferPool::Give(std::vector<uint8_t> b) {
  const int64_t n = static_cast<int64_t>(b.capacity());
  if (n == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes_ + n > max_bytes_) return;  // freed here, outside the pool
  bytes_ += n;
  free_.push_back(std::move(b));
}

int64_t BufferPool::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

}  // namespace tachyon::kv
