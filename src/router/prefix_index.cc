#include "router/prefix_index.h"

#include "util/logging.h"

namespace tachyon::router {

PrefixIndex::PrefixIndex(size_t max_blocks) : max_blocks_(max_blocks < 1 ? 1 : max_blocks) {}

void PrefixIndex::Touch(Entry& e) {
  lru_.splice(lru_.end(), lru_, e.lru);
}

void PrefixIndex::Erase(
    std::unordered_map<kv::BlockHash, Entry, kv::BlockHashHasher>::iterator it) {
  lru_.erase(it->second.lru);
  entries_.erase(it);
}

void PrefixIndex::Insert(int replica, std::span<const kv::BlockHash> hashes) {
  CHECK(replica >= 0 && replica < kMaxReplicas);
  const uint64_t bit = uint64_t{1} << replica;
  for (const kv::BlockHash& h : hashes) {
    auto it = entries_.find(h);
    if (it != entries_.end()) {
      it->second.holders |= bit;
      Touch(it->second);
      continue;
    }
    if (entries_.size() >= max_blocks_) Erase(entries_.find(lru_.front()));
    lru_.push_back(h);
    entries_.emplace(h, Entry{bit, std::prev(lru_.end())});
  }
}

void PrefixIndex::Remove(int replica, const kv::BlockHash& hash) {
  if (replica < 0 || replica >= kMaxReplicas) return;
  auto it = entries_.find(hash);
  if (it == entries_.end()) return;
  it->second.holders &= ~(uint64_t{1} << replica);
  if (it->second.holders == 0) Erase(it);
}

void PrefixIndex::RemoveReplica(int replica) {
  if (replica < 0 || replica >= kMaxReplicas) return;
  const uint64_t mask = ~(uint64_t{1} << replica);
  for (auto it = entries_.begin(); it != entries_.end();) {
    it->second.holders &= mask;
    if (it->second.holders == 0) {
      lru_.erase(it->second.lru);
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

std::vector<int> PrefixIndex::MatchLeadingBlocks(std::span<const kv::BlockHash> hashes,
                                                 int num_replicas) {
  std::vector<int> matched(static_cast<size_t>(num_replicas), 0);
  uint64_t alive = num_replicas >= kMaxReplicas ? ~uint64_t{0} : (uint64_t{1} << num_replicas) - 1;
  for (size_t i = 0; i < hashes.size() && alive != 0; ++i) {
    auto it = entries_.find(hashes[i]);
    if (it == entries_.end()) break;
    Touch(it->second);
    alive &= it->second.holders;
    for (uint64_t m = alive; m != 0; m &= m - 1) {
      matched[static_cast<size_t>(__builtin_ctzll(m))] = static_cast<int>(i + 1);
    }
  }
  return matched;
}

}  // namespace tachyon::router
