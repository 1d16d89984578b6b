#include "server/response_store.h"

#include <cstdint>

#include "server/json_limits.h"

namespace tachyon::server {

ResponseStore::ResponseStore(size_t max_entries, size_t max_bytes)
    : max_entries_(max_entries), max_bytes_(max_bytes) {}

bool ResponseStore::Put(const std::string& id, const nlohmann::ordered_json& messages) {
  Entry e{id, messages.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace)};
  const size_t size = e.bytes();
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(id); it != index_.end()) {
    bytes_ -= it->second->bytes();
    lru_.erase(it->second);
    index_.erase(it);
  }
  if (size > max_bytes_ || max_entries_ == 0) return false;
  lru_.push_front(std::move(e));
  index_[id] = lru_.begin();
  bytes_ += size;
  EvictLocked();
  return true;
}

std::optional<nlohmann::ordered_json> ResponseStore::Get(const std::string& id) {
  std::string text;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(id);
    if (it == index_.end()) return std::nullopt;
    lru_.splice(lru_.begin(), lru_, it->second);
    text = it->second->messages;
  }
  // Its own dump of a value that was parsed within the limits of depth (any count of values).
  JsonLimits limits;
  limits.max_values = SIZE_MAX;
  limits.max_bytes = SIZE_MAX;
  return ParseBoundedOrderedJson(text, limits);
}

void ResponseStore::EvictLocked() {
  while (!lru_.empty() && (lru_.size() > max_entries_ || bytes_ > max_bytes_)) {
    bytes_ -= lru_.back().bytes();
    index_.erase(lru_.back().id);
    lru_.pop_back();
  }
}

size_t ResponseStore::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

size_t ResponseStore::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

}  // namespace tachyon::server
