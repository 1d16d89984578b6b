#include "kv/kv_events.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "util/logging.h"

namespace tachyon::kv {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string BlockHashHex(const BlockHash& hash) {
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(hash.hi),
                static_cast<unsigned long long>(hash.lo));
  return std::string(buf, 32);
}

std::optional<BlockHash> ParseBlockHashHex(std::string_view hex) {
  if (hex.size() != 32) return std::nullopt;
  uint64_t words[2] = {0, 0};
  for (size_t i = 0; i < 32; ++i) {
    const int d = HexDigit(hex[i]);
    if (d < 0) return std::nullopt;
    words[i / 16] = (words[i / 16] << 4) | static_cast<uint64_t>(d);
  }
  return BlockHash{words[1], words[0]};
}

KvEventLog::KvEventLog(size_t capacity) : capacity_(capacity) {
  CHECK(capacity_ >= 1);
}

void KvEventLog::Record(KvEvent::Kind kind, const BlockHash& hash) {
  const int64_t now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  std::lock_guard<std::mutex> lock(mu_);
  if (kind == KvEvent::Kind::kStored) {
    cached_.insert(hash);
  } else {
    cached_.erase(hash);
  }
  if (events_.size() >= capacity_) events_.pop_front();
  events_.push_back(KvEvent{++seq_, now_us, kind, hash});
}

void KvEventLog::BlockStored(const BlockHash& hash) {
  Record(KvEvent::Kind::kStored, hash);
}

void KvEventLog::BlockRemoved(const BlockHash& hash) {
  Record(KvEvent::Kind::kRemoved, hash);
}

KvEventLog::Snapshot KvEventLog::TakeSnapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  Snapshot s;
  s.seq = seq_;
  s.blocks.assign(cached_.begin(), cached_.end());
  return s;
}

std::optional<std::vector<KvEvent>> KvEventLog::ReadAfter(uint64_t after_seq,
                                                          size_t max_events) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<KvEvent> out;
  if (after_seq >= seq_) return out;
  // events_ holds seqs [seq_ - size + 1, seq_].
  const uint64_t oldest = seq_ - events_.size() + 1;
  if (after_seq + 1 < oldest) return std::nullopt;
  const size_t first = static_cast<size_t>(after_seq + 1 - oldest);
  const size_t n = std::min(max_events, events_.size() - first);
  out.assign(events_.begin() + static_cast<std::ptrdiff_t>(first),
             events_.begin() + static_cast<std::ptrdiff_t>(first + n));
  return out;
}

uint64_t KvEventLog::last_seq() const {
  std::lock_guard<std::mutex> lock(mu_);
  return seq_;
}

size_t KvEventLog::cached_blocks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_.size();
}

}  // namespace tachyon::kv
