#include "kv/kv_cache_manager.h"

#include <algorithm>

#include "util/logging.h"

namespace tachyon::kv {

KvCacheManager::KvCacheManager(const KvCacheConfig& config)
    : config_(config), pool_(config.num_blocks) {
  CHECK(config_.block_size > 0) << "block_size must be positive";
  windows_ = config_.group_windows.empty() ? std::vector<int64_t>{0} : config_.group_windows;
  for (int64_t w : windows_) {
    CHECK(w >= 0) << "a KV group's window must be >= 0";
    has_sliding_ |= w > 0;
  }
  pool_.set_event_sink(config_.event_sink);
}

PrefixHit KvCacheManager::FindCachedPrefix(std::span<const int32_t> tokens,
                                           std::string_view cache_salt) const {
  PrefixHit hit;
  if (!config_.enable_prefix_caching || tokens.empty()) return hit;
  const int bs = config_.block_size;
  const size_t max_blocks = (tokens.size() - 1) / bs;  // keep the last token uncomputed
  BlockHash parent = RootHash(cache_salt);
  if (num_groups() == 1 && !sliding()) {
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
  // Layer groups: the chain as far as every full group has its block cached, each group's
  // cached block ids along it (-1: not cached).
  const int groups = num_groups();
  std::vector<std::vector<int32_t>> ids(groups);
  std::vector<BlockHash> chain;  // group 0's keys of the blocks looked at
  for (size_t i = 0; i < max_blocks; ++i) {
    parent = HashBlock(parent, tokens.subspan(i * bs, bs));
    chain.push_back(parent);
    bool full_ok = true;
    for (int g = 0; g < groups; ++g) {
      std::optional<int32_t> id = pool_.Lookup(GroupBlockHash(parent, g));
      if (windows_[g] == 0 && !id) full_ok = false;
      ids[g].push_back(id.value_or(-1));
    }
    if (!full_ok) {
      for (auto& v : ids) v.pop_back();
      break;
    }
  }
  // The longest k whose sliding groups hold every block of the window before k * bs: a run of
  // cached blocks ending at block k - 1 at least as long as that window's blocks.
  int64_t k = static_cast<int64_t>(ids[0].size());
  std::vector<std::vector<int64_t>> run(groups);
  for (int g = 0; g < groups; ++g) {
    if (windows_[g] == 0) continue;
    run[g].resize(ids[g].size());
    for (size_t i = 0; i < ids[g].size(); ++i) {
      run[g][i] = ids[g][i] < 0 ? 0 : (i > 0 ? run[g][i - 1] : 0) + 1;
    }
  }
  for (; k > 0; --k) {
    bool ok = true;
    for (int g = 0; g < groups && ok; ++g) {
      if (windows_[g] > 0) ok = run[g][k - 1] >= k - LiveFrom(g, k);
    }
    if (ok) break;
  }
  for (int g = 0; g < groups; ++g) {
    const int64_t live = LiveFrom(g, k);
    for (int64_t i = 0; i < k; ++i) hit.blocks.push_back(i < live ? -1 : ids[g][i]);
  }
  hit.num_tokens = k * bs;
  // Past the hit: blocks another request computes (group 0's key) or a store loads (any
  // group's). The hit may stop short of group 0's cached pages (a sliding group lacks its
  // window), so the walk goes on over blocks whose group 0 page is cached, up to the last block
  // with a page in flight.
  for (size_t i = static_cast<size_t>(k); i < max_blocks && !in_flight_.empty(); ++i) {
    if (i >= chain.size()) {
      chain.push_back(HashBlock(i == 0 ? RootHash(cache_salt) : chain[i - 1],
                                tokens.subspan(i * bs, bs)));
    }
    bool announced = in_flight_.count(chain[i]) > 0;
    for (int g = 1; g < groups && !announced; ++g) {
      announced = in_flight_.count(GroupBlockHash(chain[i], g)) > 0;
    }
    if (announced) {
      hit.in_flight_tokens = static_cast<int64_t>(i + 1 - k) * bs;
    } else if (!pool_.Lookup(chain[i])) {
      break;
    }
  }
  return hit;
}

PrefixHit KvCacheManager::AttachInFlight(PrefixHit hit, std::span<const int32_t> tokens,
                                         std::string_view cache_salt,
                                         const std::function<int64_t(int64_t)>& covered) const {
  if (hit.in_flight_tokens == 0 || num_groups() != 1 || sliding()) return hit;
  const int bs = config_.block_size;
  const size_t max_blocks = (tokens.size() - 1) / bs;  // as FindCachedPrefix
  BlockHash parent = RootHash(cache_salt);
  bool attaching = true;
  hit.in_flight_tokens = 0;
  for (size_t i = 0; i < max_blocks; ++i) {
    parent = HashBlock(parent, tokens.subspan(i * bs, bs));
    if (i < hit.blocks.size()) continue;
    auto f = in_flight_.find(parent);
    if (f == in_flight_.end()) break;
    if (attaching && f->second != kExternalOwner) {
      auto owner = seqs_.find(f->second);
      if (owner != seqs_.end() && owner->second.blocks.size() > i &&
          covered(f->second) >= static_cast<int64_t>(i + 1) * bs) {
        hit.blocks.push_back(owner->second.blocks[i]);
        continue;
      }
    }
    attaching = false;
    hit.in_flight_tokens += bs;
  }
  hit.num_tokens = static_cast<int64_t>(hit.blocks.size()) * bs;
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
  const Seq& s = it->second;
  int64_t n =
      std::min<int64_t>(static_cast<int64_t>(s.blocks.size()), max_tokens / config_.block_size);
  // A sliding group may have released blocks the follower's window still needs: share less.
  auto window_held = [&](int64_t k) {
    for (int g = 0; g < num_groups(); ++g) {
      const std::vector<int32_t>& t = s.table(g);
      for (int64_t i = LiveFrom(g, k); i < k; ++i) {
        if (t[i] < 0) return false;
      }
    }
    return true;
  };
  if (sliding()) {
    while (n > 0 && !window_held(n)) --n;
  }
  for (int g = 0; g < num_groups(); ++g) {
    const std::vector<int32_t>& t = s.table(g);
    const int64_t live = LiveFrom(g, n);
    for (int64_t i = 0; i < n; ++i) hit.blocks.push_back(i < live ? -1 : t[i]);
  }
  hit.num_tokens = n * config_.block_size;
  return hit;
}

void KvCacheManager::RecordPrefixQuery(int64_t queried_tokens, int64_t hit_tokens) {
  prefix_query_tokens_ += queried_tokens;
  prefix_hit_tokens_ += hit_tokens;
}

bool KvCacheManager::CanAllocate(int64_t id, int64_t num_tokens, const PrefixHit& hit) const {
  auto it = seqs_.find(id);
  const bool is_new = it == seqs_.end();
  const int groups = num_groups();
  const int64_t have = is_new ? static_cast<int64_t>(hit.blocks.size()) / groups
                              : static_cast<int64_t>(it->second.blocks.size());
  const int64_t need = std::max<int64_t>(0, BlocksFor(num_tokens) - have);
  // Hit blocks that are free (cached, unreferenced) stop being free when we reference them.
  int64_t hit_free = 0;
  if (is_new) {
    for (int32_t b : hit.blocks) hit_free += b >= 0 && pool_.ref_count(b) == 0;
  }
  return need * groups + hit_free <= pool_.num_free();
}

bool KvCacheManager::Allocate(int64_t id, int64_t num_tokens, const PrefixHit& hit) {
  if (!CanAllocate(id, num_tokens, hit)) return false;
  auto it = seqs_.find(id);
  const bool is_new = it == seqs_.end();
  const int groups = num_groups();
  const std::vector<int32_t>& hit_blocks = is_new ? hit.blocks : std::vector<int32_t>{};
  const int64_t hit_len = static_cast<int64_t>(hit_blocks.size()) / groups;
  const int64_t have = is_new ? hit_len : static_cast<int64_t>(it->second.blocks.size());
  const int64_t need = std::max<int64_t>(0, BlocksFor(num_tokens) - have);

  if (is_new) {
    it = seqs_.emplace(id, Seq{}).first;
    Seq& s = it->second;
    if (groups == 1 && !sliding()) {
      pool_.Ref(hit_blocks);
      s.blocks = hit_blocks;
    } else {
      std::vector<int32_t> held;
      for (int32_t b : hit_blocks) {
        if (b >= 0) held.push_back(b);
      }
      pool_.Ref(held);
      s.groups.resize(groups - 1);
      s.first_live.resize(groups);
      for (int g = 0; g < groups; ++g) {
        s.table(g).assign(hit_blocks.begin() + g * hit_len, hit_blocks.begin() + (g + 1) * hit_len);
        s.first_live[g] = LiveFrom(g, hit_len);
      }
    }
    s.num_committed = static_cast<size_t>(hit_len);
  }
  Seq& s = it->second;
  for (int g = 0; g < groups; ++g) {
    const bool ok = pool_.Allocate(static_cast<int>(need), &s.table(g));
    CHECK(ok) << "pool lost blocks between check and allocation";
  }
  s.flat_stale = true;
  return true;
}

void KvCacheManager::CommitComputed(int64_t id, std::span<const int32_t> tokens,
                                    int64_t num_computed, std::string_view cache_salt) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  Seq& s = it->second;
  const size_t full = std::min<size_t>(num_computed / config_.block_size, s.blocks.size());
  if (config_.enable_prefix_caching && full > s.num_committed) {
    ExtendBlockHashes(tokens.first(std::min<size_t>(tokens.size(), num_computed)),
                      config_.block_size, RootHash(cache_salt), full, &s.hashes);
    for (size_t i = s.num_committed; i < std::min(full, s.num_announced); ++i) {
      auto f = in_flight_.find(s.hashes[i]);
      if (f != in_flight_.end() && f->second == id) in_flight_.erase(f);
    }
    for (int g = 0; g < num_groups(); ++g) {
      const std::vector<int32_t>& t = s.table(g);
      for (size_t i = s.num_committed; i < full; ++i) {
        // Group 0's keys are the chain hashes a router computes (kv_events.h); the other
        // groups' keys are published nowhere.
        if (t[i] >= 0) pool_.Cache(t[i], GroupBlockHash(s.hashes[i], g), /*publish=*/g == 0);
      }
    }
    s.num_committed = full;
    s.num_announced = std::max(s.num_announced, full);
  }
  if (sliding()) ReleaseOutsideWindow(&s, num_computed);
}

void KvCacheManager::ReleaseOutsideWindow(Seq* s, int64_t next_pos) {
  std::vector<int32_t> released;  // oldest first: evicted first from the free list
  for (int g = 0; g < num_groups(); ++g) {
    if (windows_[g] == 0) continue;
    std::vector<int32_t>& t = s->table(g);
    const int64_t to = std::min<int64_t>(FirstLiveBlock(windows_[g], next_pos, config_.block_size),
                                         static_cast<int64_t>(t.size()));
    for (int64_t i = s->first_live[g]; i < to; ++i) {
      if (t[i] >= 0) released.push_back(t[i]);
      t[i] = -1;
    }
    s->first_live[g] = std::max(s->first_live[g], to);
  }
  if (released.empty()) return;
  pool_.Unref(released);
  s->flat_stale = true;
}

void KvCacheManager::FreeBlocksPast(int64_t id, int64_t num_tokens) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  Seq& s = it->second;
  const size_t keep = static_cast<size_t>(BlocksFor(std::max<int64_t>(num_tokens, 0)));
  if (s.blocks.size() <= keep) return;
  CHECK(keep >= s.num_committed) << "releasing committed blocks of request " << id;
  DropInFlight(id, &s, keep);
  std::vector<int32_t> tail;  // the last block is evicted first, as in Free
  for (size_t i = s.blocks.size(); i-- > keep;) {
    for (int g = 0; g < num_groups(); ++g) {
      if (s.table(g)[i] >= 0) tail.push_back(s.table(g)[i]);
    }
  }
  pool_.Unref(tail);
  for (int g = 0; g < num_groups(); ++g) s.table(g).resize(keep);
  for (int64_t& f : s.first_live) f = std::min<int64_t>(f, static_cast<int64_t>(keep));
  s.flat_stale = true;
}

void KvCacheManager::Free(int64_t id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  DropInFlight(id, &it->second, 0);
  // Tail blocks first, so they are evicted before the (more widely shared) head blocks.
  Seq& s = it->second;
  if (num_groups() == 1 && !sliding()) {
    std::reverse(s.blocks.begin(), s.blocks.end());
    pool_.Unref(s.blocks);
  } else {
    std::vector<int32_t> all;
    for (size_t i = s.blocks.size(); i-- > 0;) {
      for (int g = 0; g < num_groups(); ++g) {
        if (s.table(g)[i] >= 0) all.push_back(s.table(g)[i]);
      }
    }
    pool_.Unref(all);
  }
  seqs_.erase(it);
}

bool KvCacheManager::AllocateExternal(std::span<const BlockHash> keys, std::vector<int32_t>* ids,
                                      std::span<const int32_t> keep) {
  CHECK(config_.enable_prefix_caching) << "external KV blocks need prefix caching";
  const size_t first = ids->size();
  pool_.Ref(keep);
  const bool ok = pool_.Allocate(static_cast<int>(keys.size()), ids);
  std::vector<int32_t> keep_order(keep.rbegin(), keep.rend());  // head blocks end up newest
  pool_.Unref(keep_order);
  if (!ok) return false;
  CHECK(ids->size() - first == keys.size()) << "pool allocated the wrong number of blocks";
  for (const BlockHash& k : keys) in_flight_.emplace(k, kExternalOwner);
  return true;
}

void KvCacheManager::CommitExternal(std::span<const int32_t> ids, std::span<const BlockHash> keys,
                                    std::span<const uint8_t> published) {
  CHECK(ids.size() == keys.size()) << "one key per external block";
  CHECK(published.empty() || published.size() == keys.size()) << "one flag per external block";
  for (size_t i = 0; i < ids.size(); ++i) {
    auto f = in_flight_.find(keys[i]);
    if (f != in_flight_.end() && f->second == kExternalOwner) in_flight_.erase(f);
    // false (cached meanwhile): the block is simply released
    pool_.Cache(ids[i], keys[i], published.empty() || published[i] != 0);
  }
  // Reversed: the last block of a prefix is evicted first (as Free does).
  std::vector<int32_t> order(ids.rbegin(), ids.rend());
  pool_.Unref(order);
}

void KvCacheManager::ReleaseExternal(std::span<const int32_t> ids,
                                     std::span<const BlockHash> keys) {
  for (const BlockHash& k : keys) {
    auto f = in_flight_.find(k);
    if (f != in_flight_.end() && f->second == kExternalOwner) in_flight_.erase(f);
  }
  pool_.Unref(ids);
}

const std::vector<int32_t>& KvCacheManager::BlockTable(int64_t id) const {
  auto it = seqs_.find(id);
  CHECK(it != seqs_.end()) << "no block table for request " << id;
  const Seq& s = it->second;
  if (num_groups() == 1) return s.blocks;
  if (s.flat_stale) {
    s.flat.clear();
    for (int g = 0; g < num_groups(); ++g)
      s.flat.insert(s.flat.end(), s.table(g).begin(), s.table(g).end());
    s.flat_stale = false;
  }
  return s.flat;
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
