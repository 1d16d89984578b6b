#include "kv/kv_groups.h"

#include <limits>

#include "util/splitmix.h"

namespace tachyon::kv {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Blocks a run of n positions can touch at worst alignment (it may start at a block's last slot).
int64_t BlocksTouched(int64_t n, int64_t block_size) {
  return n <= 0 ? 0 : CeilDiv(n + block_size - 1, block_size);
}

}  // namespace

int64_t PeakBlocksPerSequence(std::span<const int64_t> group_windows, int64_t block_size,
                              int64_t num_tokens, int64_t max_chunk) {
  const int64_t all = CeilDiv(std::max<int64_t>(num_tokens, 0), block_size);
  if (group_windows.empty()) return all;
  int64_t total = 0;
  for (int64_t w : group_windows) {
    if (w <= 0) {
      total += all;
    } else {
      total += std::min(all, BlocksTouched(w - 1 + std::max<int64_t>(max_chunk, 1), block_size));
    }
  }
  return total;
}

int64_t MaxTokensInBlocks(std::span<const int64_t> group_windows, int64_t block_size,
                          int64_t num_blocks, int64_t max_chunk) {
  if (num_blocks <= 0) return 0;
  const int64_t cap = block_size * num_blocks;
  if (group_windows.empty() || (group_windows.size() == 1 && group_windows[0] <= 0)) return cap;
  const bool any_full =
      group_windows.empty() ||
      std::any_of(group_windows.begin(), group_windows.end(), [](int64_t w) { return w <= 0; });
  if (!any_full) {
    const int64_t peak = PeakBlocksPerSequence(group_windows, block_size,
                                               std::numeric_limits<int64_t>::max() / 4, max_chunk);
    if (peak <= num_blocks) return std::numeric_limits<int64_t>::max();
  }
  // PeakBlocksPerSequence grows with num_tokens: the largest fitting length in [0, cap].
  int64_t lo = 0, hi = cap;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (PeakBlocksPerSequence(group_windows, block_size, mid, max_chunk) <= num_blocks) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

BlockHash GroupBlockHash(const BlockHash& h, int group) {
  if (group == 0) return h;
  // A keyed mix of both halves (splitmix64 finaliser): distinct groups give distinct keys.
  const uint64_t g = static_cast<uint64_t>(group) * kSplitMixGamma;
  return BlockHash{SplitMixFinalize(h.lo ^ g), SplitMixFinalize(h.hi + g)};
}

}  // namespace tachyon::kv
