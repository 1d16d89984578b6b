#include "router/replica_picker.h"

#include <algorithm>
#include <limits>

#include <xxhash.h>

#include "util/logging.h"
#include "util/splitmix.h"

namespace tachyon::router {

Result<Policy> ParsePolicy(std::string_view name) {
  if (name == "kv") return Policy::kKv;
  if (name == "round_robin") return Policy::kRoundRobin;
  if (name == "random") return Policy::kRandom;
  return InvalidArgument("'" + std::string(name) + "' is not kv, round_robin or random");
}

const char* PolicyName(Policy p) {
  switch (p) {
    case Policy::kKv:
      return "kv";
    case Policy::kRoundRobin:
      return "round_robin";
    case Policy::kRandom:
      return "random";
  }
  return "unknown";
}

uint64_t ReplicaNameHash(std::string_view url) {
  return XXH3_64bits(url.data(), url.size());
}

uint64_t SeededKeyHash(uint64_t seed, uint64_t key) {
  return SplitMix64(key ^ SplitMix64(seed));
}

ReplicaPicker::ReplicaPicker(const PickerOptions& options)
    : options_(options), rng_(options.seed) {}

template <typename Pred>
int ReplicaPicker::DrawAmong(std::span<const Candidate> candidates, size_t count, Pred is_one) {
  size_t k = std::uniform_int_distribution<size_t>(0, count - 1)(rng_);
  for (int i = 0; i < static_cast<int>(candidates.size()); ++i) {
    if (is_one(i) && k-- == 0) return i;
  }
  CHECK(false) << "DrawAmong: fewer than " << count << " candidates";
  return -1;
}

std::optional<int> ReplicaPicker::Pick(std::span<const Candidate> candidates, int prompt_tokens,
                                       std::optional<uint64_t> tie_key, ForgoneHit* forgone) {
  const int n = static_cast<int>(candidates.size());
  switch (options_.policy) {
    case Policy::kKv:
      return PickKv(candidates, prompt_tokens, tie_key, forgone);
    case Policy::kRoundRobin:
      for (int k = 0; k < n; ++k) {
        const int i = (next_ + k) % n;
        if (candidates[i].eligible) {
          next_ = (i + 1) % n;
          return i;
        }
      }
      return std::nullopt;
    case Policy::kRandom: {
      size_t eligible = 0;
      for (const Candidate& c : candidates) eligible += c.eligible ? 1 : 0;
      if (eligible == 0) return std::nullopt;
      return DrawAmong(candidates, eligible, [&](int i) { return candidates[i].eligible; });
    }
  }
  return std::nullopt;
}

std::optional<int> ReplicaPicker::PickKv(std::span<const Candidate> candidates, int prompt_tokens,
                                         std::optional<uint64_t> tie_key, ForgoneHit* forgone) {
  const std::optional<int> pick = PickKvIndex(candidates, prompt_tokens, tie_key);
  if (forgone != nullptr && pick) *forgone = Forgone(candidates, *pick);
  return pick;
}

ForgoneHit ReplicaPicker::Forgone(std::span<const Candidate> candidates, int chosen) const {
  int most = 0;
  for (const Candidate& c : candidates) {
    if (c.eligible) most = std::max(most, c.matched_blocks);
  }
  ForgoneHit f;
  f.blocks = most - candidates[chosen].matched_blocks;
  if (f.blocks > 0) {
    const double guard = Guard(candidates);
    f.by_guard = std::none_of(candidates.begin(), candidates.end(), [&](const Candidate& c) {
      return c.eligible && c.matched_blocks == most && c.in_flight + 1 <= guard;
    });
  }
  return f;
}

double ReplicaPicker::Guard(std::span<const Candidate> candidates) const {
  int least = std::numeric_limits<int>::max();
  for (const Candidate& c : candidates) {
    if (c.eligible) least = std::min(least, c.in_flight);
  }
  return std::max(options_.balance_ratio * (least + 1),
                  static_cast<double>(least + options_.balance_slack));
}

std::optional<int> ReplicaPicker::PickKvIndex(std::span<const Candidate> candidates,
                                              int prompt_tokens, std::optional<uint64_t> tie_key) {
  if (std::none_of(candidates.begin(), candidates.end(),
                   [](const Candidate& c) { return c.eligible; })) {
    return std::nullopt;
  }
  const double guard = Guard(candidates);
  auto score = [&](const Candidate& c) -> std::optional<int64_t> {
    if (!c.eligible || c.in_flight + 1 > guard) return std::nullopt;
    const int64_t cached = int64_t{c.matched_blocks} * options_.block_size;
    const int64_t uncached = std::max<int64_t>(0, prompt_tokens - cached);
    const int64_t waiting = options_.shared_prompt_cost ? c.pending_prefill_requests : 0;
    return uncached * (1 + waiting) + c.pending_prefill_tokens +
           int64_t{options_.load_weight} * c.in_flight;
  };
  int64_t best = std::numeric_limits<int64_t>::max();
  size_t tied = 0;
  int first = -1;
  for (int i = 0; i < static_cast<int>(candidates.size()); ++i) {
    const std::optional<int64_t> s = score(candidates[i]);
    if (!s || *s > best) continue;
    if (*s < best) {
      best = *s;
      tied = 0;
      first = i;
    }
    ++tied;
  }
  // The least loaded replica always passes the guard, so one candidate scored.
  CHECK(first >= 0);
  if (tied == 1) return first;
  auto is_tied = [&](int i) { return score(candidates[i]) == best; };
  if (!tie_key) return DrawAmong(candidates, tied, is_tied);
  // Rendezvous: the tied replica whose name ranks highest for this key.
  const uint64_t key = SeededKeyHash(options_.seed, *tie_key);
  int winner = -1;
  uint64_t top = 0;
  for (int i = first; i < static_cast<int>(candidates.size()); ++i) {
    if (!is_tied(i)) continue;
    const uint64_t rank = SplitMix64(key ^ candidates[i].name_hash);
    if (winner < 0 || rank > top) {
      winner = i;
      top = rank;
    }
  }
  return winner;
}

}  // namespace tachyon::router
