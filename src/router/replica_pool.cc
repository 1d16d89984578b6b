#include "router/replica_pool.h"

#include "util/logging.h"

namespace tachyon::router {

ReplicaPool::ReplicaPool(std::vector<Endpoint> replicas, const PoolOptions& options)
    : endpoints_(std::move(replicas)),
      options_(options),
      index_(options.index_blocks),
      picker_(options.picker) {
  CHECK(!endpoints_.empty() && endpoints_.size() <= static_cast<size_t>(kMaxReplicas));
  states_.resize(endpoints_.size());
  for (size_t i = 0; i < endpoints_.size(); ++i) states_[i].url = endpoints_[i].url;
}

std::variant<Placement, PlaceError> ReplicaPool::Place(std::span<const kv::BlockHash> hashes,
                                                       int prompt_tokens, uint64_t excluded) {
  const auto start = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  const int n = size();
  std::vector<Candidate> candidates(static_cast<size_t>(n));
  bool any_up = false;
  for (int i = 0; i < n; ++i) {
    const ReplicaState& s = states_[i];
    const bool usable = s.up && !(excluded & (uint64_t{1} << i));
    any_up |= usable;
    candidates[i].eligible = usable && s.in_flight < options_.max_in_flight;
    candidates[i].in_flight = s.in_flight;
  }
  if (!any_up) return PlaceError::kNoReplica;
  if (options_.picker.policy == Policy::kKv && !hashes.empty()) {
    const std::vector<int> matched = index_.MatchLeadingBlocks(hashes, n);
    for (int i = 0; i < n; ++i) candidates[i].matched_blocks = matched[i];
  }
  const std::optional<int> pick = picker_.Pick(candidates, prompt_tokens);
  if (!pick) return PlaceError::kSaturated;
  Placement p;
  p.replica = *pick;
  p.predicted_cached_tokens = candidates[*pick].matched_blocks * options_.picker.block_size;
  states_[*pick].in_flight++;
  if (!hashes.empty()) index_.Insert(*pick, hashes);
  p.decision_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return p;
}

void ReplicaPool::Release(int replica) {
  std::lock_guard<std::mutex> lock(mu_);
  CHECK(states_[replica].in_flight > 0);
  states_[replica].in_flight--;
}

void ReplicaPool::TakeDownLocked(int replica, const std::string& why) {
  states_[replica].up = false;
  states_[replica].last_error = why;
  index_.RemoveReplica(replica);
}

bool ReplicaPool::MarkFailed(int replica, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!states_[replica].up) return false;
  TakeDownLocked(replica, why);
  return true;
}

bool ReplicaPool::SetProbeResult(int replica, bool ready, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (states_[replica].up == ready) return false;
  if (ready) {
    states_[replica].up = true;
  } else {
    TakeDownLocked(replica, why);
  }
  return true;
}

bool ReplicaPool::AnyUp() const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const ReplicaState& s : states_) {
    if (s.up) return true;
  }
  return false;
}

std::vector<ReplicaState> ReplicaPool::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return states_;
}

size_t ReplicaPool::IndexedBlocks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return index_.size();
}

}  // namespace tachyon::router
