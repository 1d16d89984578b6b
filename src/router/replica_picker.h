// ReplicaPicker: which replica gets a new request, from each replica's state at that moment.
//
// Policies:
//   kv          score = uncached x (1 + pending requests) + pending prefill tokens
//               + load_weight * in_flight, lowest wins; uncached = prompt_tokens - block_size *
//               matched leading blocks (>= 0); pending prefill tokens = the uncached tokens of
//               the requests placed there that have not produced output yet (the prompt work
//               queued ahead of this one: what its time to first token waits for), pending
//               requests = how many those are. A replica's step computes the prompts of every
//               request admitted to it together, so this request's uncached tokens delay the
//               requests pending there as much as itself: its score is the time to first token
//               it adds over all of them (with `shared_prompt_cost`; without it, its own only,
//               uncached + pending prefill tokens + load). A hit on a busy replica is worth the
//               more for it, and a long uncached prompt goes where fewer requests wait.
//   round_robin the next eligible replica after the last one picked.
//   random      uniformly among the eligible.
// Eligible: healthy, below its in-flight cap, and not excluded (a retry avoids the replicas it
// already tried). Balance guard (kv): a replica is a candidate only if, with this request, its
// in-flight count stays within `balance_ratio` x (the least loaded eligible replica's in-flight
// + 1), or within the least loaded one's + `balance_slack` — so affinity cannot pile one hot
// prefix onto one replica, while a replica holding a prompt's prefix may run a few more
// requests than an idle one (its hit is worth more than the imbalance at small counts).
//
// Ties (kv): with a `tie_key` (the router passes the request's key, PromptBlocks::key: its
// prompt's last full-block hash, which names the whole prefix and cache salt; for a prompt
// shorter than a block a hash of its tokens) the tied replica ranked highest by a hash of (seed,
// tie_key, its name_hash) wins — rendezvous hashing over the replicas' URLs, so every router
// with the same seed makes the same choice for the same request and state, whatever it routed
// before and in whatever order it numbered the replicas, and distinct prompts spread evenly.
// Without a key (a caller that names no request) ties are broken uniformly with an RNG seeded
// by `seed`, as the random policy is: a router given the same sequence of states makes the
// same choices.
//
// Thread-safety: none (ReplicaPool calls it under its mutex).
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>

#include "kv/block_hash.h"
#include "util/status.h"

namespace tachyon::router {

enum class Policy { kKv, kRoundRobin, kRandom };

// "kv", "round_robin", "random". Errors: InvalidArgument.
Result<Policy> ParsePolicy(std::string_view name);
const char* PolicyName(Policy p);

struct PickerOptions {
  Policy policy = Policy::kKv;
  int block_size = 16;
  int load_weight = 32;  // prompt tokens one in-flight request weighs
  double balance_ratio = 1.5;
  int balance_slack = 3;  // in-flight requests beyond the least loaded's that pass the guard
  // Uncached tokens count once for the request and once for each request pending there.
  bool shared_prompt_cost = true;
  uint64_t seed = 0;
};

// One replica's state for a decision.
struct Candidate {
  bool eligible = false;
  int in_flight = 0;
  int matched_blocks = 0;              // leading prompt blocks it holds (kv)
  uint64_t name_hash = 0;              // ReplicaNameHash(its URL): ranks it in keyed ties
  int64_t pending_prefill_tokens = 0;  // uncached prompt tokens queued there, not yet computed
  int pending_prefill_requests = 0;    // the requests whose tokens those are
};

// A kv choice's hit forgone: the most leading blocks an eligible replica holds less those of
// the replica chosen, and whether every replica holding that many was kept out by the balance
// guard (else the score chose: pending prefill or load outweighed the hit).
struct ForgoneHit {
  int blocks = 0;
  bool by_guard = false;
};

// The 64-bit key of a block hash (a request's key when that block is its prompt's last).
inline uint64_t BlockKey(const kv::BlockHash& h) { return h.lo ^ h.hi; }

// A hash of a replica's name (its URL) that is the same in every process.
uint64_t ReplicaNameHash(std::string_view url);

// A well-mixed hash of (seed, key), the same in every process: keyed ties rank replicas by it,
// and ReplicaPool draws a prompt's canary share from it (with its own seed).
uint64_t SeededKeyHash(uint64_t seed, uint64_t key);

class ReplicaPicker {
 public:
  explicit ReplicaPicker(const PickerOptions& options);

  // The index of the chosen candidate, or nullopt when none is eligible. Allocates nothing.
  // With `forgone` (kv), sets it to the chosen candidate's ForgoneHit.
  std::optional<int> Pick(std::span<const Candidate> candidates, int prompt_tokens,
                          std::optional<uint64_t> tie_key = std::nullopt,
                          ForgoneHit* forgone = nullptr);

  const PickerOptions& options() const { return options_; }

 private:
  std::optional<int> PickKv(std::span<const Candidate> candidates, int prompt_tokens,
                            std::optional<uint64_t> tie_key, ForgoneHit* forgone);
  std::optional<int> PickKvIndex(std::span<const Candidate> candidates, int prompt_tokens,
                                 std::optional<uint64_t> tie_key);
  // The balance guard's bound on in-flight (with the request). REQUIRES: one eligible.
  double Guard(std::span<const Candidate> candidates) const;
  ForgoneHit Forgone(std::span<const Candidate> candidates, int chosen) const;
  // One drawn uniformly (one RNG draw) of the `count` candidates for which `is_one(i)` holds.
  template <typename Pred>
  int DrawAmong(std::span<const Candidate> candidates, size_t count, Pred is_one);

  PickerOptions options_;
  std::mt19937_64 rng_;
  int next_ = 0;  // round_robin: where the next search starts
};

}  // namespace tachyon::router
