#include "router/replica_pool.h"

#include <algorithm>
#include <array>
#include <cstdlib>

#include "util/logging.h"

namespace tachyon::router {

Result<LabelWeight> ParseLabelWeight(std::string_view text) {
  const size_t eq = text.find('=');
  const size_t colon = text.rfind(':');
  if (eq == std::string_view::npos || eq == 0 || colon == std::string_view::npos || colon < eq) {
    return InvalidArgument("'" + std::string(text) + "' is not KEY=VALUE:PERCENT");
  }
  LabelWeight w;
  w.key = std::string(text.substr(0, eq));
  w.value = std::string(text.substr(eq + 1, colon - eq - 1));
  const std::string pct(text.substr(colon + 1));
  char* end = nullptr;
  w.percent = std::strtod(pct.c_str(), &end);
  if (pct.empty() || end != pct.c_str() + pct.size() || !(w.percent >= 0 && w.percent <= 100)) {
    return InvalidArgument("'" + std::string(text) + "': the percent is not a number in [0, 100]");
  }
  return w;
}

namespace {

// Keeps the canary point independent of the keyed tie ranks, which use the seed itself.
constexpr uint64_t kCanarySeedSalt = 0x9e3779b97f4a7c15ULL;

}  // namespace

ReplicaPool::ReplicaPool(std::vector<Endpoint> replicas, const PoolOptions& options)
    : options_(options),
      endpoints_(std::move(replicas)),
      index_(options.index_blocks),
      picker_(options.picker),
      weight_rng_(options.picker.seed ^ kCanarySeedSalt) {
  CHECK(endpoints_.size() <= static_cast<size_t>(kMaxReplicas));
  states_.resize(endpoints_.size());
  left_at_.resize(endpoints_.size());
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    states_[i].url = endpoints_[i].url;
    states_[i].generation = 1;
  }
}

int ReplicaPool::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(endpoints_.size());
}

Endpoint ReplicaPool::endpoint(int replica) const {
  std::lock_guard<std::mutex> lock(mu_);
  return endpoints_[replica];
}

MembershipChange ReplicaPool::SetMembers(const std::vector<DiscoveredReplica>& set) {
  std::lock_guard<std::mutex> lock(mu_);
  ++changes_;
  MembershipChange change;
  std::map<std::string, const DiscoveredReplica*> wanted;
  for (const DiscoveredReplica& r : set) wanted.emplace(r.endpoint.url, &r);  // first wins
  const int n = static_cast<int>(states_.size());
  for (int i = 0; i < n; ++i) {
    ReplicaState& s = states_[i];
    if (!s.member || wanted.count(s.url)) continue;
    s.member = false;
    s.generation++;
    s.events_synced = false;
    s.reported = ReplicaLoad{};
    s.others = 0;
    s.up = false;
    s.last_error = "left the replica set";
    index_.RemoveReplica(i);
    left_at_[i] = changes_;
    change.left.push_back(s.url);
  }
  for (const DiscoveredReplica& member : set) {  // in the set's order: the first gets slot 0
    const std::string& url = member.endpoint.url;
    const DiscoveredReplica* r = wanted[url];
    if (r != &member) continue;  // a URL twice: its first entry counts
    int slot = -1;
    for (int i = 0; i < static_cast<int>(states_.size()) && slot < 0; ++i) {
      if (states_[i].url == url) slot = i;
    }
    if (slot >= 0 && states_[slot].member) {
      continue;  // already a member
    }
    if (slot < 0 && states_.size() < static_cast<size_t>(kMaxReplicas)) {
      slot = static_cast<int>(states_.size());
      states_.emplace_back();
      endpoints_.emplace_back();
      left_at_.push_back(0);
    }
    if (slot < 0) {
      // The slot that left longest ago with nothing in flight: no request can still name it.
      for (int i = 0; i < static_cast<int>(states_.size()); ++i) {
        const ReplicaState& s = states_[i];
        if (!s.member && s.in_flight == 0 && (slot < 0 || left_at_[i] < left_at_[slot])) slot = i;
      }
    }
    if (slot < 0) {
      change.refused.push_back(url);
      continue;
    }
    ReplicaState& s = states_[slot];
    const uint64_t generation = s.generation + 1;
    const int in_flight = s.url == url ? s.in_flight : 0;
    const int64_t pending_prefill = s.url == url ? s.pending_prefill_tokens : 0;
    const int pending_requests = s.url == url ? s.pending_prefill_requests : 0;
    s = ReplicaState{};
    s.url = url;
    s.generation = generation;
    s.in_flight = in_flight;
    s.pending_prefill_tokens = pending_prefill;
    s.pending_prefill_requests = pending_requests;
    s.labels = r->labels;
    endpoints_[slot] = r->endpoint;
    index_.RemoveReplica(slot);
    change.joined.push_back(MemberRef{slot, generation, r->endpoint});
  }
  return change;
}

std::vector<MemberRef> ReplicaPool::Members() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<MemberRef> out;
  for (int i = 0; i < static_cast<int>(states_.size()); ++i) {
    if (states_[i].member) out.push_back(MemberRef{i, states_[i].generation, endpoints_[i]});
  }
  return out;
}

bool ReplicaPool::IsCurrent(int replica, uint64_t generation) const {
  std::lock_guard<std::mutex> lock(mu_);
  return replica >= 0 && replica < static_cast<int>(states_.size()) && states_[replica].member &&
         states_[replica].generation == generation;
}

std::variant<Placement, PlaceError> ReplicaPool::Place(std::span<const kv::BlockHash> hashes,
                                                       int prompt_tokens, uint64_t excluded,
                                                       std::optional<uint64_t> key) {
  if (!key && !hashes.empty()) key = BlockKey(hashes.back());
  const auto start = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  const int n = static_cast<int>(states_.size());
  std::array<Candidate, kMaxReplicas> storage;  // no allocation per decision
  const std::span<Candidate> candidates(storage.data(), static_cast<size_t>(n));
  bool any_up = false;
  for (int i = 0; i < n; ++i) {
    const ReplicaState& s = states_[i];
    const bool usable = s.member && s.up && !(excluded & (uint64_t{1} << i));
    any_up |= usable;
    candidates[i].eligible = usable && s.in_flight < options_.max_in_flight;
    candidates[i].in_flight = s.in_flight + s.others;
    candidates[i].pending_prefill_tokens = s.pending_prefill_tokens;
    candidates[i].pending_prefill_requests = s.pending_prefill_requests;
  }
  if (!any_up) return PlaceError::kNoReplica;
  std::string group;
  if (!options_.weights.empty()) {
    // The share this request belongs to; its replicas only, unless none of them is usable.
    // The point in [0, 100) comes from the request's key mixed with the seed, so every router
    // puts the same prompt in the same share; without a key, from the seeded RNG.
    double u;
    if (key) {
      const uint64_t h = SeededKeyHash(options_.picker.seed ^ kCanarySeedSalt, *key);
      u = static_cast<double>(h >> 11) * (100.0 / 9007199254740992.0);  // 53 bits / 2^53
    } else {
      u = std::uniform_real_distribution<double>(0, 100)(weight_rng_);
    }
    int drawn = -1;
    double cumulative = 0;
    for (size_t w = 0; w < options_.weights.size() && drawn < 0; ++w) {
      cumulative += options_.weights[w].percent;
      if (u < cumulative) drawn = static_cast<int>(w);
    }
    group = drawn < 0 ? "other" : options_.weights[drawn].Name();
    uint64_t in_group = 0;
    bool any_in_group = false;
    for (int i = 0; i < n; ++i) {
      int g = -1;
      for (size_t w = 0; w < options_.weights.size() && g < 0; ++w) {
        auto it = states_[i].labels.find(options_.weights[w].key);
        if (it != states_[i].labels.end() && it->second == options_.weights[w].value) {
          g = static_cast<int>(w);
        }
      }
      if (g == drawn) in_group |= uint64_t{1} << i;
      any_in_group |= g == drawn && candidates[i].eligible;
    }
    if (any_in_group) {
      for (int i = 0; i < n; ++i) {
        candidates[i].eligible = candidates[i].eligible && (in_group & (uint64_t{1} << i));
      }
    }
  }
  if (options_.picker.policy == Policy::kKv) {
    for (int i = 0; i < n; ++i) candidates[i].name_hash = ReplicaNameHash(states_[i].url);
  }
  if (options_.picker.policy == Policy::kKv && !hashes.empty()) {
    std::array<int, kMaxReplicas> matched;
    // Not marked used here: the Insert below marks the whole prompt (when a replica is chosen).
    index_.MatchLeadingBlocks(hashes, std::span<int>(matched.data(), static_cast<size_t>(n)),
                              /*mark_used=*/false);
    // A replica computes a prompt's last token even when it is cached (its logits are needed),
    // so at most (prompt_tokens - 1) / block_size leading blocks are ever a hit there.
    const int usable = std::max(0, prompt_tokens - 1) / options_.picker.block_size;
    for (int i = 0; i < n; ++i) candidates[i].matched_blocks = std::min(matched[i], usable);
  }
  ForgoneHit forgone;
  const std::optional<int> pick = picker_.Pick(candidates, prompt_tokens, key, &forgone);
  if (!pick) return PlaceError::kSaturated;
  Placement p;
  p.replica = *pick;
  p.weight_group = std::move(group);
  p.predicted_cached_tokens = candidates[*pick].matched_blocks * options_.picker.block_size;
  p.prefill_tokens = std::max(0, prompt_tokens - p.predicted_cached_tokens);
  p.forgone_cached_tokens = forgone.blocks * options_.picker.block_size;
  p.forgone_by_guard = forgone.by_guard;
  states_[*pick].in_flight++;
  states_[*pick].pending_prefill_tokens += p.prefill_tokens;
  if (p.prefill_tokens > 0) states_[*pick].pending_prefill_requests++;
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

void ReplicaPool::PrefillDone(int replica, int64_t tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  ReplicaState& s = states_[replica];
  CHECK(tokens >= 0 && tokens <= s.pending_prefill_tokens);
  s.pending_prefill_tokens -= tokens;
  if (tokens > 0) {
    CHECK(s.pending_prefill_requests > 0);
    s.pending_prefill_requests--;
  }
}

void ReplicaPool::TakeDownLocked(int replica, const std::string& why) {
  states_[replica].up = false;
  states_[replica].last_error = why;
  // A replica in sync keeps its blocks: its events stream says what it holds (a restart ends
  // the stream, and the next one starts with a snapshot).
  if (!states_[replica].events_synced) index_.RemoveReplica(replica);
}

bool ReplicaPool::MarkFailed(int replica, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!states_[replica].up) return false;
  TakeDownLocked(replica, why);
  return true;
}

bool ReplicaPool::SetProbeResult(int replica, bool ready, const std::string& why,
                                 std::optional<uint64_t> generation) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!states_[replica].member) return false;
  if (generation && states_[replica].generation != *generation) return false;
  if (states_[replica].up == ready) return false;
  if (ready) {
    states_[replica].up = true;
  } else {
    TakeDownLocked(replica, why);
  }
  return true;
}

void ReplicaPool::BeginSnapshot(int replica) {
  std::lock_guard<std::mutex> lock(mu_);
  states_[replica].events_synced = false;
  index_.RemoveReplica(replica);
}

void ReplicaPool::ApplyBlockEvents(int replica, std::span<const BlockEvent> events) {
  // In slices, so that a routing decision waits for one slice at most, not for a whole
  // snapshot part; a decision between two slices sees the events a little later, as if they
  // had arrived later. The lookups of a slice overlap through the index's prefetch hint.
  constexpr size_t kSlice = 256, kAhead = 32;
  for (size_t first = 0; first < events.size(); first += kSlice) {
    const size_t end = std::min(events.size(), first + kSlice);
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = first; i < std::min(end, first + kAhead); ++i) index_.Prefetch(events[i].hash);
    for (size_t i = first; i < end; ++i) {
      if (i + kAhead < end) index_.Prefetch(events[i + kAhead].hash);
      const BlockEvent& e = events[i];
      if (e.stored) {
        index_.Insert(replica, std::span<const kv::BlockHash>(&e.hash, 1));
      } else {
        index_.Remove(replica, e.hash);
      }
    }
  }
}

void ReplicaPool::SetEventsSynced(int replica, bool synced) {
  std::lock_guard<std::mutex> lock(mu_);
  states_[replica].events_synced = synced;
  if (!synced) {
    states_[replica].reported = ReplicaLoad{};
    states_[replica].others = 0;
  }
}

void ReplicaPool::SetLabels(int replica, std::map<std::string, std::string> labels) {
  std::lock_guard<std::mutex> lock(mu_);
  states_[replica].labels = std::move(labels);
}

void ReplicaPool::SetReportedLoad(int replica, const ReplicaLoad& load) {
  std::lock_guard<std::mutex> lock(mu_);
  ReplicaState& s = states_[replica];
  s.reported = load;
  s.others = std::max(0, load.running + load.waiting - s.in_flight);
}

bool ReplicaPool::AnyUp() const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const ReplicaState& s : states_) {
    if (s.member && s.up) return true;
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
