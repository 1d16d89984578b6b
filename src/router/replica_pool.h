// ReplicaPool: the router's replicas, their health and in-flight counts, the prefix index and
// the picker, under one mutex, so that a placement sees one consistent state.
//
// Health: a replica starts down and is up once a probe of its /ready answered 200
// (SetProbeResult). Passive detection (MarkFailed: connect refused, reset, EOF before the end,
// timeout, a 503) takes it down at once; only a later successful probe brings it back. Going
// down forgets its blocks in the prefix index (a restarted replica has an empty cache), unless
// its KV events are in sync (then its stream says what it holds).
//
// Membership: replicas live in slots [0, kMaxReplicas) (the ids the index, the picker and the
// `excluded` masks use). SetMembers, fed by a Discovery (router/discovery.h), takes the whole
// current set: a new URL gets a slot (its old one if it was a member before, else a slot never
// used, else the slot left longest ago with nothing in flight), a URL no longer in the set
// leaves (down, out of placement, its blocks forgotten; requests in flight there go on and are
// Released as usual). Each slot's generation grows whenever it joins or leaves, so a probe or
// an events subscription started for an earlier membership can tell (IsCurrent) and stop.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kv/block_hash.h"
#include "router/discovery.h"
#include "router/prefix_index.h"
#include "router/replica_picker.h"
#include "router/upstream_client.h"

namespace tachyon::router {

// Canary weights (`tachyon route --weight KEY=VALUE:PERCENT`): that share of new requests goes
// to the replicas labelled KEY=VALUE (labels come with a replica's KV events snapshot). A request
// is put in a share by its key (Place) mixed with the seed (every router with that seed puts it
// in the same share, whatever it placed before; distinct prompts split in the weights'
// proportions); a request without a key by the pool's seeded RNG.
struct LabelWeight {
  std::string key, value;
  double percent = 0;  // [0, 100]
  std::string Name() const { return key + "=" + value; }
};

// "KEY=VALUE:PERCENT". Errors: InvalidArgument naming what is wrong.
Result<LabelWeight> ParseLabelWeight(std::string_view text);

struct PoolOptions {
  PickerOptions picker;
  // Shares of new requests by label (their sum <= 100); the rest goes to replicas matching
  // none. A share whose replicas are all unusable falls back to every replica.
  std::vector<LabelWeight> weights;
  int max_in_flight = 256;  // per replica; beyond it the replica is saturated
  size_t index_blocks = size_t{1} << 20;
};

struct Placement {
  int replica = -1;
  int predicted_cached_tokens = 0;  // leading prompt tokens the index says it holds
  // prompt_tokens - predicted_cached_tokens: counted in the replica's pending prefill until the
  // caller reports PrefillDone.
  int prefill_tokens = 0;
  // kv: leading prompt tokens another eligible replica held beyond the chosen one's
  // (ForgoneHit), and whether the balance guard (else the score) decided it.
  int forgone_cached_tokens = 0;
  bool forgone_by_guard = false;
  double decision_seconds = 0;  // time spent choosing (index match + scoring)
  std::string weight_group;     // with weights: the share drawn ("KEY=VALUE" or "other")
};

enum class PlaceError {
  kNoReplica,  // no replica up (outside `excluded`)
  kSaturated,  // replicas are up but every one is at max_in_flight
};

struct ReplicaLoad {
  int running = 0;  // sequences running on the replica (all routers' and direct clients')
  int waiting = 0;
  double kv_usage = 0;  // fraction of its KV blocks in use
};

// One block event of a replica's stream: `hash` stored (true) or removed (false).
struct BlockEvent {
  kv::BlockHash hash;
  bool stored = true;
};

struct ReplicaState {
  std::string url;
  bool member = true;       // in the discovery's current set (else the slot is unused or left)
  uint64_t generation = 0;  // grows each time the slot joins or leaves
  bool up = false;
  int in_flight = 0;
  // Uncached prompt tokens of this router's requests in flight there that have produced no
  // output yet (Placement::prefill_tokens until PrefillDone): the prompt work a new request
  // would queue behind.
  int64_t pending_prefill_tokens = 0;
  int pending_prefill_requests = 0;  // those requests (with prefill_tokens > 0)
  std::string last_error;      // why it last went down ("" if never)
  bool events_synced = false;  // its KV events feed the index (snapshot applied, no gap since)
  ReplicaLoad reported;        // from its events stream (zeros without one)
  // Sequences on it that are not this router's: its last reported running + waiting less this
  // router's in-flight count there when that report arrived (>= 0). A placement scores
  // in_flight + others, so a request this router just finished, still counted in the last
  // report, weighs nothing, and what other routers or direct clients run weighs the same for
  // every router.
  int others = 0;
  std::map<std::string, std::string> labels;  // from its events snapshot
};

// A member's slot, as of one membership (see IsCurrent).
struct MemberRef {
  int replica = -1;
  uint64_t generation = 0;
  Endpoint endpoint;
};

struct MembershipChange {
  std::vector<MemberRef> joined;
  std::vector<std::string> left;     // URLs
  std::vector<std::string> refused;  // URLs beyond kMaxReplicas slots (left out)
};

class ReplicaPool {
 public:
  // `replicas` (may be empty) are the first members. REQUIRES: replicas.size() <= kMaxReplicas.
  ReplicaPool(std::vector<Endpoint> replicas, const PoolOptions& options);

  // Slots in use or used before (members and left ones).
  int size() const;
  Endpoint endpoint(int replica) const;
  const PoolOptions& options() const { return options_; }

  // The discovery's whole current set (see the header comment). Labels of a replica that
  // joins are set from `set` (its KV events snapshot may set them again later).
  MembershipChange SetMembers(const std::vector<DiscoveredReplica>& set);
  std::vector<MemberRef> Members() const;
  // Whether `replica` is still the member it was at `generation`.
  bool IsCurrent(int replica, uint64_t generation) const;

  // Chooses a replica for a prompt with block hashes `hashes` (may be empty) and
  // `prompt_tokens` tokens, avoiding the replicas whose bit is set in `excluded`; counts the
  // request in flight there and records its blocks in the index. `key` names the request
  // (PromptBlocks::key) for keyed ties and the canary share; without one, BlockKey of the last
  // of `hashes`; with neither, the seeded RNGs decide. The choice is a function of the
  // replicas' state (up, in flight, reported load, indexed blocks), the request and the seed.
  std::variant<Placement, PlaceError> Place(std::span<const kv::BlockHash> hashes,
                                            int prompt_tokens, uint64_t excluded,
                                            std::optional<uint64_t> key = std::nullopt);
  // A placed request finished (in whatever way).
  void Release(int replica);
  // A request placed on `replica` with Placement::prefill_tokens `tokens` produced its first
  // output (its prompt is computed) or ended before: those tokens (and the request, when
  // `tokens` > 0) no longer wait there. Call it once per placement with `tokens` > 0, before
  // the placement's Release.
  void PrefillDone(int replica, int64_t tokens);

  // Passive detection: the replica failed a request. Returns true when it was up.
  bool MarkFailed(int replica, const std::string& why);
  // An active probe's answer. Returns true when the replica changed state. Ignored for a slot
  // that is not a member, or (with `generation`) no longer the member probed.
  bool SetProbeResult(int replica, bool ready, const std::string& why,
                      std::optional<uint64_t> generation = std::nullopt);

  // KV events of `replica` (router/kv_event_stream.h). BeginSnapshot forgets its blocks and
  // marks it out of sync; ApplyBlockEvents applies stored / removed hashes in order (taking
  // the mutex per slice of 256, so a placement never waits for a whole snapshot part);
  // SetEventsSynced(true) once a snapshot is complete, (false) when the stream is lost.
  void BeginSnapshot(int replica);
  void ApplyBlockEvents(int replica, std::span<const BlockEvent> events);
  void SetEventsSynced(int replica, bool synced);
  void SetReportedLoad(int replica, const ReplicaLoad& load);
  void SetLabels(int replica, std::map<std::string, std::string> labels);

  bool AnyUp() const;
  std::vector<ReplicaState> Snapshot() const;
  size_t IndexedBlocks() const;

 private:
  void TakeDownLocked(int replica, const std::string& why);

  const PoolOptions options_;
  mutable std::mutex mu_;
  std::vector<Endpoint> endpoints_;   // GUARDED_BY(mu_) one per slot
  std::vector<uint64_t> left_at_;     // GUARDED_BY(mu_) membership changes count when it left
  std::vector<ReplicaState> states_;  // GUARDED_BY(mu_)
  PrefixIndex index_;                 // GUARDED_BY(mu_)
  uint64_t changes_ = 0;              // GUARDED_BY(mu_) SetMembers calls
  ReplicaPicker picker_;              // GUARDED_BY(mu_)
  std::mt19937_64 weight_rng_;        // GUARDED_BY(mu_) canary share of a prompt without a block
};

}  // namespace tachyon::router
