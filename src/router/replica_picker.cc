#include "router/replica_picker.h"

#include <algorithm>
#include <limits>
#include <vector>

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

ReplicaPicker::ReplicaPicker(const PickerOptions& options)
    : options_(options), rng_(options.seed) {}

std::optional<int> ReplicaPicker::Pick(std::span<const Candidate> candidates, int prompt_tokens) {
  const int n = static_cast<int>(candidates.size());
  switch (options_.policy) {
    case Policy::kKv:
      return PickKv(candidates, prompt_tokens);
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
      std::vector<int> eligible;
      for (int i = 0; i < n; ++i) {
        if (candidates[i].eligible) eligible.push_back(i);
      }
      if (eligible.empty()) return std::nullopt;
      std::uniform_int_distribution<size_t> pick(0, eligible.size() - 1);
      return eligible[pick(rng_)];
    }
  }
  return std::nullopt;
}

std::optional<int> ReplicaPicker::PickKv(std::span<const Candidate> candidates, int prompt_tokens) {
  int least = std::numeric_limits<int>::max();
  for (const Candidate& c : candidates) {
    if (c.eligible) least = std::min(least, c.in_flight);
  }
  if (least == std::numeric_limits<int>::max()) return std::nullopt;
  const double guard = options_.balance_ratio * (least + 1);
  int64_t best = std::numeric_limits<int64_t>::max();
  std::vector<int> tied;
  for (int i = 0; i < static_cast<int>(candidates.size()); ++i) {
    const Candidate& c = candidates[i];
    if (!c.eligible || c.in_flight + 1 > guard) continue;
    const int64_t cached = int64_t{c.matched_blocks} * options_.block_size;
    const int64_t uncached = std::max<int64_t>(0, prompt_tokens - cached);
    const int64_t score = uncached + int64_t{options_.load_weight} * c.in_flight;
    if (score < best) {
      best = score;
      tied.clear();
    }
    if (score == best) tied.push_back(i);
  }
  // The least loaded replica always passes the guard, so `tied` is not empty.
  if (tied.size() == 1) return tied[0];
  std::uniform_int_distribution<size_t> pick(0, tied.size() - 1);
  return tied[pick(rng_)];
}

}  // namespace tachyon::router
