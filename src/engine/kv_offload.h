// KvOffload: the engine's side of the external KV stores (kv/block_store.h): blocks the pool
// evicts go to the stores, and a waiting request's next blocks come back from them instead of
// being recomputed.
//
//  - Eviction (OnEvict, from the pool's Allocate): the block's chunks are copied into the first
//    store that accepts_evictions() (the host tier: a memcpy on the engine thread; its own
//    spills to the disk tier are written by the disk tier's thread).
//  - Prefetch (before each schedule): for each waiting request whose prefix-cache hit ends at
//    block k (and whose next blocks nobody computes or loads yet), the stores are asked, fastest
//    first, for blocks k, k+1, ... (their pool keys: the chain hashes of the request's tokens
//    under its cache salt). Each run a store holds is loaded when the cost rule says so; the
//    blocks are taken from the pool (KvCacheManager::AllocateExternal, announced in flight: the
//    request waits in the scheduler's queue, the batch goes on without it) and the loader thread
//    copies the bytes in. Nothing is loaded when the pool could not hold the rest of the request.
//  - Poll (at the start of each step): finished loads are registered in the prefix cache
//    (CommitExternal); the request then starts from the longer hit. A block whose Load failed
//    is released uncached (ReleaseExternal) with every block after it in its run: those are
//    computed, and nothing more is loaded for that request. Every allocated block is committed or
//    released exactly once, also when the request was aborted or preempted meanwhile (the blocks
//    then just stay cached).
// Cost rule: a run from store S is loaded when S.LoadSecondsPerBlock() (its measured mean load
// time, or its probe before any load) is below block_size x the engine's prefill time per
// token (an exponential average of forward seconds per token over steps of at least
// 2 x block_size tokens; before any such step, loading is assumed cheaper). Runs skipped by the
// rule are counted (skipped_by_cost).
// Layer groups (kv/kv_groups.h): every group's page of a block is stored under its group key,
// and a waiting request loads the pages the pool lacks for the longest hit the pool and the
// stores together make (every full group's blocks up to it, each sliding group's window
// before it); a sliding page outside that window is never loaded.
// Thread-safety: engine thread only, except the loader thread it owns (named "kv-load").
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/request.h"
#include "kv/block_store.h"
#include "kv/kv_cache_manager.h"

namespace tachyon::engine {

struct KvTierStats {
  std::string name;
  kv::BlockStoreStats store;
};

struct KvOffloadStats {
  std::vector<KvTierStats> tiers;  // fastest first
  int64_t offered_blocks = 0;      // pool evictions copied into a store
  double offer_seconds = 0;        // engine-thread CPU time spent in those copies (Store calls)
  int64_t loaded_blocks = 0;       // registered in the prefix cache after a load
  int64_t failed_blocks = 0;       // released after a failed load (or after one in its run)
  int64_t skipped_by_cost = 0;     // runs not loaded because recomputing was estimated cheaper
  double prefill_seconds_per_token = 0;  // the cost rule's estimate (0: none yet)
};

class KvOffload : public kv::BlockEvictionHook {
 public:
  // Null when there is nothing to do (no stores, no block bytes, prefix caching off). `kv` and
  // `bytes` are not owned and must outlive the result.
  static std::unique_ptr<KvOffload> Create(std::vector<std::shared_ptr<kv::BlockStore>> stores,
                                           kv::KvCacheManager* kv, kv::BlockBytes* bytes);
  ~KvOffload() override;  // finishes the running load, releases every unfinished job's blocks
  KvOffload(const KvOffload&) = delete;
  KvOffload& operator=(const KvOffload&) = delete;

  void Poll();
  void Prefetch(std::span<Request* const> waiting);
  // One forward pass of `num_tokens` tokens took `seconds` (the cost rule's prefill timing).
  void ObserveStep(int64_t num_tokens, double seconds);
  bool loading() const { return jobs_out_ > 0; }
  // Waits until a load finishes or `timeout` passes (the engine has nothing to run).
  void WaitForLoad(std::chrono::milliseconds timeout);
  // Shutdown: finishes the loads, offers every cached pool block to the stores, flushes them.
  void FlushAll();
  KvOffloadStats Stats() const;

  void OnEvict(int32_t id, const kv::BlockHash& hash) override;

 private:
  KvOffload(std::vector<std::shared_ptr<kv::BlockStore>> stores, kv::KvCacheManager* kv,
            kv::BlockBytes* bytes);
  struct Job {
    int64_t seq_id = 0;  // the request it was started for
    std::vector<int32_t> ids;
    std::vector<kv::BlockHash> keys;
    std::vector<uint8_t> published;     // per key, or empty: all (KvCacheManager::CommitExternal)
    std::vector<kv::BlockStore*> from;  // per block
    std::vector<std::vector<std::span<uint8_t>>> chunks;  // per block
    size_t ok = 0;  // leading blocks loaded (set by the loader)
  };
  void LoaderLoop();
  void Finish(Job& job);
  // The keys to load after a hit of k blocks (chain: group 0's keys of the request's blocks),
  // and their stores, into job->keys / job->from: one group, or layer groups (which adds the
  // pool pages it counts on to *keep).
  void PlanRun(std::span<const kv::BlockHash> chain, int64_t k, Job* job);
  void PlanGroups(std::span<const kv::BlockHash> chain, int64_t k, Job* job,
                  std::vector<int32_t>* keep);
  bool CheapEnough(const kv::BlockStore& s) const;

  std::vector<std::shared_ptr<kv::BlockStore>> stores_;
  kv::BlockStore* evict_to_ = nullptr;
  kv::KvCacheManager* kv_;
  kv::BlockBytes* bytes_;
  // seq_id -> (tokens, hit blocks) when last probed with nothing loaded: not probed again
  // until either changes.
  std::unordered_map<int64_t, std::pair<size_t, int64_t>> probed_;
  // Waiting requests one of whose loads failed: not loaded for again (they compute the rest).
  std::unordered_set<int64_t> failed_;
  int64_t jobs_out_ = 0;  // submitted, not finished by Poll
  double prefill_s_per_token_ = 0;
  KvOffloadStats counters_;

  std::mutex mu_;
  std::condition_variable cv_;  // the loader waits for jobs, WaitForLoad for results
  std::deque<Job> todo_;        // GUARDED_BY(mu_)
  std::deque<Job> done_;        // GUARDED_BY(mu_)
  bool stop_ = false;           // GUARDED_BY(mu_)
  std::thread loader_;
};

}  // namespace tachyon::engine
