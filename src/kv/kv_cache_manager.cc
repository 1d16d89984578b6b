#include "kv/kv_cache_manager.h"

#include <algorithm>

#include "util/logging.h"

namespace tachyon::kv {

KvCacheManager::KvCacheManager(const KvCacheConfig& config)
    : config_(config), pool_(config.num_blocks) {
  CHECK(config_.block_size > 0) << "block_size must be positive";
}

PrefixHit KvCacheManager::FindCachedPrefix(std::span<const int32_t> tokens,
                                           std::string_view cache_salt) const {
  PrefixHit hit;
  if (!config_.enable_prefix_caching || tokens.empty()) return hit;
  const int bs = config_.block_size;
  const size_t max_blocks = (tokens.size() - 1) / bs;  // keep the last token uncomputed
  BlockHash parent = RootHash(cache_salt);
  size_t i = 0;
  for (; i < max_blocks; ++i) {
    parent = HashBlock(parent, tokens.subspan(i * bs, bs));
    auto id = pool_.Lookup(parent);
    if (!id) break;
    hit.blocks.push_back(*id);
  }
  hit.num_tokens = static_cast<int64_t>(hit.blocks.size()) * bs;
  // Past the cached blocks: those another request is computing now (`parent` is block i's).
  for (; i < max_blocks && !in_flight_.empty(); ++i) {
    if (i > hit.blocks.size()) parent = HashBlock(parent, tokens.subspan(i * bs, bs));
    if (!in_flight_.count(parent)) break;
    hit.in_flight_tokens += bs;
  }
  return hit;
}

void KvCacheManager::MarkInFlight(int64_t id, std::span<const int32_t> tokens,
                                  std::string_view cache_salt) {
  if (!config_.enable_prefix_caching) return;
  auto it = seqs_.find(id);
  CHECK(it != seqs_.end()) << "no block table for request " << id;
  Seq& s = it->second;
  const size_t full = tokens.size() / config_.block_size;
  ExtendBlockHashes(tokens, config_.block_size, RootHash(cache_salt), full, &s.hashes);
  for (size_t i = std::max(s.num_committed, s.num_announced); i < full; ++i) {
    // A block that is cached already will be found as a hit; one announced by another request
    // stays announced by it.
    if (!pool_.Lookup(s.hashes[i])) in_flight_.emplace(s.hashes[i], id);
  }
  s.num_announced = std::max(s.num_announced, full);
}

void KvCacheManager::DropInFlight(int64_t id, Seq* s, size_t from) {
  for (size_t i = std::max(from, s->num_committed); i < s->num_announced; ++i) {
    auto f = in_flight_.find(s->hashes[i]);
    if (f != in_flight_.end() && f->second == id) in_flight_.erase(f);
  }
  s->num_announced = std::min(s->num_announced, std::max(from, s->num_committed));
}

PrefixHit KvCacheManager::SharedPrefix(int64_t src, int64_t max_tokens) const {
  PrefixHit hit;
  auto it = seqs_.find(src);
  if (it == seqs_.end() || max_tokens <= 0) return hit;
  const size_t n = std::min<size_t>(it->second.blocks.size(), max_tokens / config_.block_size);
  hit.blocks.assign(it->second.blocks.begin(), it->second.blocks.begin() + n);
  hit.num_tokens = static_cast<int64_t>(n) * config_.block_size;
  return hit;
}

void KvCacheManager::RecordPrefixQuery(int64_t queried_tokens, int64_t hit_tokens) {
  prefix_query_tokens_ += queried_tokens;
  prefix_hit_tokens_ += hit_tokens;
}

bool KvCacheManager::CanAllocate(int64_t id, int64_t num_tokens, const PrefixHit& hit) const {
  auto it = seqs_.find(id);
  const bool is_new = it == seqs_.end();
  const int64_t have = is_new ? static_cast<int64_t>(hit.blocks.size())
                              : static_cast<int64_t>(it->second.blocks.size());
  const int64_t need = std::max<int64_t>(0, BlocksFor(num_tokens) - have);
  // Hit blocks that are free (cached, unreferenced) stop being free when we reference them.
  int64_t hit_free = 0;
  if (is_new) {
    for (int32_t b : hit.blocks) hit_free += pool_.ref_count(b) == 0;
  }
  return need + hit_free <= pool_.num_free();
}

bool KvCacheManager::Allocate(int64_t id, int64_t num_tokens, const PrefixHit& hit) {
  if (!CanAllocate(id, num_tokens, hit)) return false;
  auto it = seqs_.find(id);
  const bool is_new = it == seqs_.end();
  const std::vector<int32_t>& hit_blocks = is_new ? hit.blocks : std::vector<int32_t>{};
  const int64_t have = is_new ? static_cast<int64_t>(hit_blocks.size())
                              : static_cast<int64_t>(it->second.blocks.size());
  const int64_t need = std::max<int64_t>(0, BlocksFor(num_tokens) - have);

  if (is_new) {
    it = seqs_.emplace(id, Seq{}).first;
    pool_.Ref(hit_blocks);
    it->second.blocks = hit_blocks;
    it->second.num_committed = hit_blocks.size();
  }
  const bool ok = pool_.Allocate(static_cast<int>(need), &it->second.blocks);
  CHECK(ok) << "pool lost blocks between check and allocation";
  return true;
}

void KvCacheManager::CommitComputed(int64_t id, std::span<const int32_t> tokens,
                                    int64_t num_computed, std::string_view cache_salt) {
  if (!config_.enable_prefix_caching) return;
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  Seq& s = it->second;
  const size_t full = std::min<size_t>(num_computed / config_.block_size, s.blocks.size());
  if (full <= s.num_committed) return;
  ExtendBlockHashes(tokens.first(std::min<size_t>(tokens.size(), num_computed)), config_.block_size,
                    RootHash(cache_salt), full, &s.hashes);
  for (size_t i = s.num_committed; i < full; ++i) {
    if (i < s.num_announced) {
      auto f = in_flight_.find(s.hashes[i]);
      if (f != in_flight_.end() && f->second == id) in_flight_.erase(f);
    }
    pool_.Cache(s.blocks[i], s.hashes[i]);
  }
  s.num_committed = full;
  s.num_announced = std::max(s.num_announced, full);
}

void KvCacheManager::FreeBlocksPast(int64_t id, int64_t num_tokens) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  Seq& s = it->second;
  const size_t keep = static_cast<size_t>(BlocksFor(std::max<int64_t>(num_tokens, 0)));
  if (s.blocks.size() <= keep) return;
  CHECK(keep >= s.num_committed) << "releasing committed blocks of request " << id;
  DropInFlight(id, &s, keep);
  std::vector<int32_t> tail(s.blocks.begin() + keep, s.blocks.end());
  std::reverse(tail.begin(), tail.end());  // the last block is evicted first, as in Free
  pool_.Unref(tail);
  s.blocks.resize(keep);
}

void KvCacheManager::Free(int64_t id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  DropInFlight(id, &it->second, 0);
  // Tail blocks first, so they are evicted before the (more widely shared) head blocks.
  std::vector<int32_t>& b = it->second.blocks;
  std::reverse(b.begin(), b.end());
  pool_.Unref(b);
  seqs_.erase(it);
}

const std::vector<int32_t>& KvCacheManager::BlockTable(int64_t id) const {
  auto it = seqs_.find(id);
  CHECK(it != seqs_.end()) << "no block table for request " << id;
  return it->second.blocks;
}

KvCacheStats KvCacheManager::Stats() const {
  KvCacheStats s;
  s.num_blocks = pool_.num_blocks();
  s.used_blocks = pool_.num_used();
  s.free_blocks = pool_.num_free();
  s.cached_blocks = pool_.num_cached();
  s.prefix_query_tokens = prefix_query_tokens_;
  s.prefix_hit_tokens = prefix_hit_tokens_;
  return s;
}

}  // namespace tachyon::kv
