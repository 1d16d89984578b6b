#include "kv/host_tier.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "kv/kv_events.h"
#include "util/logging.h"

namespace tachyon::kv {
namespace {
using Clock = std::chrono::steady_clock;

// Seconds per byte of a memcpy of 4 MiB (the best of three), the load estimate before any
// load is measured.
double ProbeMemcpy() {
  constexpr size_t kBytes = 4u << 20;
  std::vector<uint8_t> a(kBytes, 1), b(kBytes);
  double best = 1e9;
  for (int i = 0; i < 3; ++i) {
    const auto t = Clock::now();
    std::memcpy(b.data(), a.data(), kBytes);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t).count());
    a[i] = b[kBytes - 1 - i];  // keeps the copies observable
  }
  return best / kBytes;
}

}  // namespace

HostTier::HostTier(int64_t capacity_bytes, std::shared_ptr<BlockStore> next)
    : capacity_(capacity_bytes),
      free_max_(std::min(capacity_bytes / 16, int64_t{64} << 20)),
      next_(std::move(next)),
      buffers_(std::make_shared<BufferPool>(free_max_)) {
  CHECK(capacity_ > 0) << "host KV tier: capacity must be positive";
  if (next_) next_->ShareBuffers(buffers_);
  probe_seconds_per_byte_ = ProbeMemcpy();
  stats_.capacity_bytes = capacity_;
}

size_t HostTier::Lookup(std::span<const BlockHash> keys) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  while (n < keys.size() && index_.count(keys[n])) ++n;
  if (n < keys.size()) ++stats_.misses;
  return n;
}

Status HostTier::Load(const BlockHash& key, BlockChunks dst) {
  const auto t = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) {
    ++stats_.load_failures;
    return NotFound("host KV tier: block " + BlockHashHex(key) + " is not held");
  }
  const std::vector<uint8_t>& bytes = it->second->bytes;
  if (TotalBytes(dst) != bytes.size()) {
    ++stats_.load_failures;
    return InvalidArgument("host KV tier: block of " + std::to_string(bytes.size()) +
                           " bytes loaded into " + std::to_string(TotalBytes(dst)));
  }
  size_t off = 0;
  for (const auto& c : dst) {
    std::memcpy(c.data(), bytes.data() + off, c.size());
    off += c.size();
  }
  lru_.splice(lru_.begin(), lru_, it->second);
  const double s = std::chrono::duration<double>(Clock::now() - t).count();
  ++stats_.hits;
  stats_.load_seconds += s;
  load_ema_ = load_ema_ == 0 ? s : 0.8 * load_ema_ + 0.2 * s;
  return OkStatus();
}

std::vector<HostTier::Entry> HostTier::MakeRoom(size_t bytes) {
  std::vector<Entry> out;
  while (!lru_.empty() && bytes_ + static_cast<int64_t>(bytes) > capacity_ - free_max_) {
    Entry& e = lru_.back();
    bytes_ -= static_cast<int64_t>(e.bytes.size());
    index_.erase(e.key);
    ++stats_.evictions;
    out.push_back(std::move(e));
    lru_.pop_back();
  }
  return out;
}

void HostTier::Spill(std::vector<Entry> out) {
  for (Entry& e : out) {
    if (next_) {
      next_->StoreOwned(e.key, std::move(e.bytes));
    } else {
      buffers_->Give(std::move(e.bytes));
    }
  }
}

void HostTier::Insert(const BlockHash& key, std::vector<uint8_t> bytes) {
  std::vector<Entry> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    const bool held = it != index_.end();
    if (held) lru_.splice(lru_.begin(), lru_, it->second);
    if (held || static_cast<int64_t>(bytes.size()) > capacity_ - free_max_) {
      if (!held) ++stats_.declined;
      buffers_->Give(std::move(bytes));
      return;
    }
    out = MakeRoom(bytes.size());
    last_block_bytes_ = bytes.size();
    bytes_ += static_cast<int64_t>(bytes.size());
    lru_.push_front(Entry{key, std::move(bytes)});
    index_.emplace(key, lru_.begin());
    ++stats_.stores;
  }
  Spill(std::move(out));
}

void HostTier::Store(const BlockHash& key, BlockChunks src) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {  // held: refresh only, no copy
      lru_.splice(lru_.begin(), lru_, it->second);
      return;
    }
    if (static_cast<int64_t>(TotalBytes(src)) > capacity_ - free_max_) {
      ++stats_.declined;
      return;
    }
  }
  std::vector<uint8_t> bytes = buffers_->Take();
  CopyChunksInto(src, &bytes);
  Insert(key, std::move(bytes));
}

void HostTier::StoreOwned(const BlockHash& key, std::vector<uint8_t> bytes) {
  Insert(key, std::move(bytes));
}

void HostTier::Flush() {
  std::vector<Entry> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!next_) return;
    while (!lru_.empty()) {  // oldest first
      out.push_back(std::move(lru_.back()));
      lru_.pop_back();
    }
    index_.clear();
    bytes_ = 0;
  }
  // In batches, waiting for the next tier between them (its write queue is bounded).
  constexpr size_t kBatchBytes = size_t{64} << 20;
  std::vector<Entry> batch;
  size_t bytes = 0;
  for (Entry& e : out) {
    bytes += e.bytes.size();
    batch.push_back(std::move(e));
    if (bytes >= kBatchBytes) {
      Spill(std::exchange(batch, {}));
      next_->Flush();
      bytes = 0;
    }
  }
  Spill(std::move(batch));
}

double HostTier::LoadSecondsPerBlock() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (load_ema_ > 0) return load_ema_;
  return probe_seconds_per_byte_ * static_cast<double>(last_block_bytes_);
}

BlockStoreStats HostTier::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  BlockStoreStats s = stats_;
  s.blocks = static_cast<int64_t>(index_.size());
  s.bytes = bytes_;
  return s;
}

}  // namespace tachyon::kv
