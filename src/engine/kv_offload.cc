#include "engine/kv_offload.h"

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <optional>

#include "util/logging.h"

namespace tachyon::engine {
namespace {
// CPU seconds the calling thread has used (not the time it waited to run).
double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
}  // namespace

std::unique_ptr<KvOffload> KvOffload::Create(std::vector<std::shared_ptr<kv::BlockStore>> stores,
                                             kv::KvCacheManager* kv, kv::BlockBytes* bytes) {
  std::erase(stores, nullptr);
  if (stores.empty()) return nullptr;
  if (bytes == nullptr || bytes->num_chunks() <= 0) {
    TLOG(WARN) << "KV offload: the model executor exposes no KV bytes; tiers unused";
    return nullptr;
  }
  if (!kv->prefix_caching()) {
    TLOG(WARN) << "KV offload: prefix caching is off; tiers unused";
    return nullptr;
  }
  return std::unique_ptr<KvOffload>(new KvOffload(std::move(stores), kv, bytes));
}

KvOffload::KvOffload(std::vector<std::shared_ptr<kv::BlockStore>> stores, kv::KvCacheManager* kv,
                     kv::BlockBytes* bytes)
    : stores_(std::move(stores)), kv_(kv), bytes_(bytes) {
  for (const auto& s : stores_) {
    if (s->accepts_evictions()) {
      evict_to_ = s.get();
      break;
    }
  }
  kv_->set_eviction_hook(this);
  loader_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "kv-load");
    LoaderLoop();
  });
}

KvOffload::~KvOffload() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  loader_.join();
  kv_->set_eviction_hook(nullptr);
  // Jobs never started and jobs done but not polled: their blocks go back uncached / cached.
  for (Job& j : todo_) j.ok = 0;
  for (Job& j : todo_) Finish(j);
  for (Job& j : done_) Finish(j);
}

void KvOffload::LoaderLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !todo_.empty(); });
    if (stop_) return;
    Job job = std::move(todo_.front());
    todo_.pop_front();
    lock.unlock();
    job.ok = 0;
    while (job.ok < job.ids.size()) {
      Status s = job.from[job.ok]->Load(job.keys[job.ok], job.chunks[job.ok]);
      if (!s.ok()) {
        TLOG(WARN) << "KV offload: " << s.ToString() << "; computing the rest instead";
        break;
      }
      ++job.ok;
    }
    lock.lock();
    done_.push_back(std::move(job));
    cv_.notify_all();
  }
}

void KvOffload::Finish(Job& job) {
  const std::span<const int32_t> ids(job.ids);
  const std::span<const kv::BlockHash> keys(job.keys);
  if (job.ok > 0) {
    const std::span<const uint8_t> published(job.published);
    kv_->CommitExternal(ids.first(job.ok), keys.first(job.ok),
                        published.empty() ? published : published.first(job.ok));
  }
  if (job.ok < ids.size()) kv_->ReleaseExternal(ids.subspan(job.ok), keys.subspan(job.ok));
  if (job.ok < ids.size()) failed_.insert(job.seq_id);
  counters_.loaded_blocks += static_cast<int64_t>(job.ok);
  counters_.failed_blocks += static_cast<int64_t>(ids.size() - job.ok);
}

void KvOffload::Poll() {
  std::deque<Job> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done.swap(done_);
  }
  for (Job& j : done) {
    Finish(j);
    --jobs_out_;
  }
}

void KvOffload::WaitForLoad(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !done_.empty(); });
}

bool KvOffload::CheapEnough(const kv::BlockStore& s) const {
  if (prefill_s_per_token_ <= 0) return true;  // nothing measured yet
  return s.LoadSecondsPerBlock() < prefill_s_per_token_ * kv_->block_size();
}

void KvOffload::ObserveStep(int64_t num_tokens, double seconds) {
  if (num_tokens < 2 * kv_->block_size() || seconds <= 0) return;
  const double per = seconds / static_cast<double>(num_tokens);
  prefill_s_per_token_ = prefill_s_per_token_ == 0 ? per : 0.8 * prefill_s_per_token_ + 0.2 * per;
}

// Single group: the keys of the blocks after the hit k, as far as the stores hold a run of them
// (fastest store first) and the cost rule allows; a block the pool still holds ends the run (it
// is a hit once the blocks before it are).
void KvOffload::PlanRun(std::span<const kv::BlockHash> chain, int64_t k, Job* job) {
  const std::span<const kv::BlockHash> rest = chain.subspan(static_cast<size_t>(k));
  size_t pos = 0;
  while (pos < rest.size()) {
    size_t got = 0;
    kv::BlockStore* from = nullptr;
    for (const auto& s : stores_) {
      got = s->Lookup(rest.subspan(pos));
      if (got > 0) {
        from = s.get();
        break;
      }
    }
    if (from == nullptr) break;
    if (!CheapEnough(*from)) {
      ++counters_.skipped_by_cost;
      break;
    }
    for (size_t i = pos; i < pos + got; ++i) {
      job->keys.push_back(rest[i]);
      job->from.push_back(from);
    }
    pos += got;
  }
  for (size_t i = 0; i < job->keys.size(); ++i) {
    if (kv_->pool().Lookup(job->keys[i])) {
      job->keys.resize(i);
      job->from.resize(i);
      break;
    }
  }
}

// Layer groups: the longest hit k2 > k whose blocks (every full group's [0, k2), each sliding
// group's window before k2 * block_size) the pool or a store holds; the keys of those the pool
// lacks, block by block, groups in order within a block; the pool's pages of that hit past
// the request's own hit into *keep (the loads must not evict them).
void KvOffload::PlanGroups(std::span<const kv::BlockHash> chain, int64_t k, Job* job,
                           std::vector<int32_t>* keep) {
  const int groups = kv_->num_groups();
  const int64_t bs = kv_->block_size();
  const int64_t n = static_cast<int64_t>(chain.size());
  // Per (block, group): 0 not looked up yet, 1 in the pool, 2 in a store (source[] says
  // which), 3 nowhere.
  std::vector<uint8_t> where(static_cast<size_t>(n * groups), 0);
  std::vector<kv::BlockStore*> source(where.size(), nullptr);
  std::vector<int32_t> page(where.size(), -1);  // the pool's page, where 1
  auto at = [&](int64_t i, int g) { return static_cast<size_t>(i * groups + g); };
  auto find = [&](int64_t i, int g) -> uint8_t {
    uint8_t& w = where[at(i, g)];
    if (w != 0) return w;
    const kv::BlockHash key = kv::GroupBlockHash(chain[i], g);
    if (const std::optional<int32_t> id = kv_->pool().Lookup(key)) {
      page[at(i, g)] = *id;
      return w = 1;
    }
    for (const auto& s : stores_) {
      if (s->Lookup(std::span(&key, 1)) == 1) {
        source[at(i, g)] = s.get();
        return w = 2;
      }
    }
    return w = 3;
  };
  auto live_from = [&](int g, int64_t k2) {
    return kv::FirstLiveBlock(kv_->group_window(g), k2 * bs, bs);
  };
  int64_t best = k;
  for (int64_t k2 = k + 1; k2 <= n; ++k2) {
    bool full_ok = true;
    for (int g = 0; g < groups && full_ok; ++g) {
      if (kv_->group_window(g) == 0) full_ok = find(k2 - 1, g) != 3;
    }
    if (!full_ok) break;
    bool ok = true;
    for (int g = 0; g < groups && ok; ++g) {
      if (kv_->group_window(g) == 0) continue;
      for (int64_t i = live_from(g, k2); i < k2 && ok; ++i) ok = find(i, g) != 3;
    }
    if (ok) best = k2;
  }
  if (best == k) return;
  std::vector<std::pair<int64_t, int>> load;  // (block, group), in block order
  for (int64_t i = 0; i < best; ++i) {
    for (int g = 0; g < groups; ++g) {
      if (i < live_from(g, best)) continue;
      if (where[at(i, g)] == 1) keep->push_back(page[at(i, g)]);
      if (where[at(i, g)] != 2) continue;
      if (!CheapEnough(*source[at(i, g)])) {
        ++counters_.skipped_by_cost;
        return;
      }
      load.emplace_back(i, g);
    }
  }
  for (const auto& [i, g] : load) {
    job->keys.push_back(kv::GroupBlockHash(chain[i], g));
    job->from.push_back(source[at(i, g)]);
  }
  // Only group 0's keys (the chain a router computes) reach the KV event stream.
  job->published.resize(job->keys.size());
  for (size_t j = 0; j < load.size(); ++j) job->published[j] = load[j].second == 0;
}

void KvOffload::Prefetch(std::span<Request* const> waiting) {
  std::unordered_map<int64_t, std::pair<size_t, int64_t>> probed;
  const int bs = kv_->block_size();
  std::unordered_set<int64_t> failed;
  // Only the head of the queue: those admitted soon (bounds the per-step cost).
  constexpr size_t kMaxProbed = 16;
  if (waiting.size() > kMaxProbed) waiting = waiting.first(kMaxProbed);
  for (Request* r : waiting) {
    if (failed_.count(r->seq_id)) {
      failed.insert(r->seq_id);
      continue;
    }
    if (r->tokens.empty()) continue;
    const kv::PrefixHit hit = kv_->FindCachedPrefix(r->tokens, r->cache_salt);
    if (hit.in_flight_tokens > 0) continue;  // someone computes or loads the next blocks
    const int64_t k = hit.num_tokens / bs;
    const int64_t max_blocks = static_cast<int64_t>(r->tokens.size() - 1) / bs;
    if (k >= max_blocks) continue;
    const std::pair<size_t, int64_t> state{r->tokens.size(), k};
    auto seen = probed_.find(r->seq_id);
    if (seen != probed_.end() && seen->second == state) {
      probed.emplace(r->seq_id, state);
      continue;
    }
    // The request's blocks past the hit, and then its uncomputed rest, must fit the pool
    // beside its hit (free hit blocks count as free now). With layer groups: the blocks it
    // holds at once (every group's) when computing a block at a time, less those of its hit.
    const int64_t n = static_cast<int64_t>(r->tokens.size());
    int64_t hit_free = 0, hit_held = 0;
    for (int32_t b : hit.blocks) {
      if (b < 0) continue;
      ++hit_held;
      hit_free += kv_->pool().ref_count(b) == 0;
    }
    const int64_t need =
        kv_->num_groups() == 1 ? kv_->BlocksFor(n) - k : kv_->PeakBlocks(n, bs) - hit_held;
    if (need + hit_free > kv_->NumFreeBlocks()) continue;
    std::vector<kv::BlockHash> chain;
    kv::ExtendBlockHashes(r->tokens, bs, kv::RootHash(r->cache_salt),
                          static_cast<size_t>(max_blocks), &chain);
    Job job;
    job.seq_id = r->seq_id;
    std::vector<int32_t> keep = hit.blocks;  // without layer groups' released (-1) entries
    std::erase(keep, -1);
    if (kv_->num_groups() == 1) {
      PlanRun(chain, k, &job);
    } else {
      PlanGroups(chain, k, &job, &keep);
    }
    if (job.keys.empty()) {
      probed.emplace(r->seq_id, state);
      continue;
    }
    if (!kv_->AllocateExternal(job.keys, &job.ids, keep)) continue;
    for (int32_t id : job.ids) job.chunks.push_back(bytes_->Chunks(id));
    {
      std::lock_guard<std::mutex> lock(mu_);
      todo_.push_back(std::move(job));
    }
    ++jobs_out_;
    cv_.notify_all();
  }
  probed_.swap(probed);
  failed_.swap(failed);
}

void KvOffload::OnEvict(int32_t id, const kv::BlockHash& hash) {
  if (evict_to_ == nullptr) return;
  const double t = ThreadCpuSeconds();
  const std::vector<std::span<uint8_t>> chunks = bytes_->Chunks(id);
  evict_to_->Store(hash, chunks);
  ++counters_.offered_blocks;
  counters_.offer_seconds += ThreadCpuSeconds() - t;
}

void KvOffload::FlushAll() {
  while (jobs_out_ > 0) {
    WaitForLoad(std::chrono::milliseconds(100));
    Poll();
  }
  if (evict_to_ != nullptr) {
    int64_t n = 0;
    kv_->pool().ForEachCached([&](int32_t id, const kv::BlockHash& hash) {
      evict_to_->Store(hash, bytes_->Chunks(id));
      // Now and then let the slower tiers catch up with what the first one spills to them, so
      // their bounded write queues decline nothing.
      if (++n % 128 == 0) {
        for (const auto& s : stores_) {
          if (s.get() != evict_to_) s->Flush();
        }
      }
    });
  }
  for (const auto& s : stores_) s->Flush();
}

KvOffloadStats KvOffload::Stats() const {
  KvOffloadStats s = counters_;
  s.prefill_seconds_per_token = prefill_s_per_token_;
  for (const auto& st : stores_) s.tiers.push_back({std::string(st->name()), st->Stats()});
  return s;
}

}  // namespace tachyon::engine
