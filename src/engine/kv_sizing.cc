#include "engine/kv_sizing.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <limits>
#include <sstream>

#include "kv/kv_groups.h"

namespace tachyon::engine {
namespace {

std::string Mib(int64_t bytes) {
  return std::to_string(bytes >> 20) + " MiB";
}

// a * b, saturated at INT64_MAX (both non-negative).
int64_t SatMul(int64_t a, int64_t b) {
  if (a != 0 && b > std::numeric_limits<int64_t>::max() / a) {
    return std::numeric_limits<int64_t>::max();
  }
  return a * b;
}

}  // namespace

Result<KvSizing> SizeKvCache(const KvSizingInput& in) {
  if (in.bytes_per_block <= 0 || in.block_size <= 0 || in.max_num_seqs <= 0 ||
      in.extra_tokens < 0) {
    return InvalidArgument("KV sizing needs positive bytes per block, block size and sequences");
  }
  if (!(in.memory_fraction > 0 && in.memory_fraction <= 1)) {
    return InvalidArgument("--kv-cache-memory-fraction must be in (0, 1], not " +
                           std::to_string(in.memory_fraction));
  }
  const bool explicit_len = in.max_model_len > 0;
  const int64_t base = explicit_len
                           ? in.max_model_len
                           : (in.trained_context > 0 ? in.trained_context : kFallbackContext);
  const int64_t wanted = base + in.extra_tokens;
  const int64_t blocks_per_seq =
      kv::PeakBlocksPerSequence(in.group_windows, in.block_size, wanted, in.max_chunk_tokens);
  // With a draft model, one target block costs its bytes plus the draft's share: the draft
  // blocks a full context needs per target block it needs (rounded up).
  const bool draft = in.draft_bytes_per_block > 0;
  const int64_t draft_blocks_per_seq =
      draft ? kv::PeakBlocksPerSequence(in.draft_group_windows, in.block_size, wanted,
                                        in.max_chunk_tokens)
            : 0;
  auto draft_blocks = [&](int64_t target_blocks) {
    return static_cast<int64_t>(static_cast<__int128>(target_blocks) * draft_blocks_per_seq /
                                std::max<int64_t>(blocks_per_seq, 1));
  };
  const int64_t unit_bytes =
      in.bytes_per_block +
      (draft ? static_cast<int64_t>(
                   (static_cast<__int128>(in.draft_bytes_per_block) * draft_blocks_per_seq +
                    blocks_per_seq - 1) /
                   std::max<int64_t>(blocks_per_seq, 1))
             : 0);
  const int64_t full = SatMul(SatMul(blocks_per_seq, in.max_num_seqs), unit_bytes);

  int64_t budget = 0;
  std::string source;  // what set the budget, for errors
  if (in.explicit_blocks > 0) {
    budget = SatMul(in.explicit_blocks, unit_bytes);
    source = std::to_string(in.explicit_blocks) + " KV blocks as requested";
  } else if (in.explicit_bytes > 0) {
    budget = in.explicit_bytes;
    source = "--kv-cache-memory " + Mib(in.explicit_bytes);
  } else if (in.available_bytes > 0) {
    const int64_t free_after_weights = std::max<int64_t>(in.available_bytes - in.weight_bytes, 0);
    budget = std::min(
        full, static_cast<int64_t>(static_cast<double>(free_after_weights) * in.memory_fraction));
    source = "the default budget (" + std::to_string(in.memory_fraction) + " of the " +
             Mib(free_after_weights) + " of memory available after the weights; set " +
             "--kv-cache-memory)";
  } else {
    budget = std::min(full, kFallbackKvBytes);
    source = "the default budget of " + Mib(budget) +
             " (available memory unknown; set --kv-cache-memory)";
  }
  const int64_t num_blocks =
      std::min<int64_t>(budget / unit_bytes, std::numeric_limits<int32_t>::max());

  KvSizing out;
  out.num_blocks = num_blocks;
  out.draft_num_blocks =
      draft ? std::min<int64_t>(draft_blocks(num_blocks), std::numeric_limits<int32_t>::max())
            : 0;
  out.budget_bytes = num_blocks * in.bytes_per_block + out.draft_num_blocks * in.draft_bytes_per_block;
  out.max_model_len = wanted;
  if (num_blocks >= blocks_per_seq && (!draft || out.draft_num_blocks >= draft_blocks_per_seq)) {
    return out;
  }

  int64_t fits =
      kv::MaxTokensInBlocks(in.group_windows, in.block_size, num_blocks, in.max_chunk_tokens);
  if (draft) {
    fits = std::min(fits, kv::MaxTokensInBlocks(in.draft_group_windows, in.block_size,
                                                out.draft_num_blocks, in.max_chunk_tokens));
  }
  if (explicit_len) {
    return InvalidArgument("--max-model-len " + std::to_string(wanted) + " needs " +
                           std::to_string(blocks_per_seq) + " KV blocks (" +
                           Mib(SatMul(blocks_per_seq, unit_bytes)) + ") but " + source +
                           " holds " + std::to_string(num_blocks) + " (" + std::to_string(fits) +
                           " tokens); lower --max-model-len or raise --kv-cache-memory");
  }
  if (fits < kMinKvContextTokens) {
    return InvalidArgument("the KV cache is too small: " + source + " holds " +
                           std::to_string(fits) + " tokens, fewer than the minimum context of " +
                           std::to_string(kMinKvContextTokens));
  }
  out.max_model_len = fits;
  out.lowered = true;
  return out;
}

std::optional<int64_t> ParseMemAvailable(std::string_view meminfo) {
  constexpr std::string_view kKey = "MemAvailable:";
  size_t pos = 0;
  while (pos < meminfo.size()) {
    size_t end = meminfo.find('\n', pos);
    if (end == std::string_view::npos) end = meminfo.size();
    std::string_view line = meminfo.substr(pos, end - pos);
    pos = end + 1;
    if (line.substr(0, kKey.size()) != kKey) continue;
    line.remove_prefix(kKey.size());
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    int64_t kib = 0;
    auto [ptr, ec] = std::from_chars(line.data(), line.data() + line.size(), kib);
    if (ec != std::errc() || kib < 0) return std::nullopt;
    std::string_view unit(ptr, static_cast<size_t>(line.data() + line.size() - ptr));
    while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
    if (unit != "kB") return std::nullopt;
    if (kib > std::numeric_limits<int64_t>::max() / 1024) return std::nullopt;
    return kib * 1024;
  }
  return std::nullopt;
}

int64_t ReadAvailableMemory() {
  std::ifstream in("/proc/meminfo");
  if (!in) return 0;
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseMemAvailable(ss.str()).value_or(0);
}

}  // namespace tachyon::engine
