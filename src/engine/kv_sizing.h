// KV pool sizing: how many KV blocks a serving engine gets and how long a context it serves,
// from a memory budget (as vLLM sizes its pool from gpu_memory_utilization).
//
//   budget      = explicit bytes (--kv-cache-memory), else
//                 min(fraction x (available memory - weights), max_num_seqs full contexts)
//                 (available memory unknown: min(kFallbackKvBytes, max_num_seqs full contexts))
//   num_blocks  = budget / bytes_per_block (a full context counts each sliding-window group's
//                 window only: kv::PeakBlocksPerSequence)
//   context     = the explicit max_model_len, else the model's trained context; when one
//                 context needs more blocks than the budget holds, the trained context is
//                 lowered to what fits (KvSizing::lowered says so), but an explicit
//                 max_model_len is an error naming --max-model-len, and so is a pool that
//                 holds fewer than kMinKvContextTokens tokens.
// Pure functions (ReadAvailableMemory aside); thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace tachyon::engine {

// Default share of the machine's available memory (after the weights) given to the KV pool.
inline constexpr double kDefaultKvMemoryFraction = 0.5;
// A pool that cannot hold one context of this many tokens is refused.
inline constexpr int64_t kMinKvContextTokens = 256;
// Budget when the available memory is unknown.
inline constexpr int64_t kFallbackKvBytes = int64_t{4} << 30;
// Context assumed when the model does not state its trained length.
inline constexpr int64_t kFallbackContext = 2048;

struct KvSizingInput {
  int64_t bytes_per_block = 0;  // KV bytes of one block over all layers (> 0)
  int64_t block_size = 16;      // tokens per block (> 0)
  int64_t trained_context = 0;  // the model's context_length; <= 0: unknown
  int64_t max_model_len = 0;    // > 0: explicit (--max-model-len); never lowered
  int64_t extra_tokens = 0;     // added to the context, explicit or trained (>= 0)
  int max_num_seqs = 1;         // sequences generating at once (> 0)
  int64_t explicit_bytes = 0;   // > 0: the pool budget (--kv-cache-memory)
  int64_t explicit_blocks = 0;  // > 0: exactly this many blocks (wins over explicit_bytes)
  int64_t available_bytes = 0;  // the machine's available memory (MemAvailable)
  int64_t weight_bytes = 0;     // the model's weights, which must stay resident
  double memory_fraction = kDefaultKvMemoryFraction;  // in (0, 1]
  // KV layer groups (kv/kv_groups.h; bytes_per_block is then one group's page): a sequence of
  // T tokens needs kv::PeakBlocksPerSequence(group_windows, block_size, T, max_chunk_tokens)
  // blocks, so sliding-window groups count only their window. Empty: one full group.
  std::vector<int64_t> group_windows = {};
  int64_t max_chunk_tokens = 0;  // tokens per step (max_num_batched_tokens)
  // Speculative method draft_model: the draft model's own pool comes out of the same budget.
  // draft_bytes_per_block > 0 is one page of the draft's layout (draft_group_windows, empty:
  // one full group). The draft pool gets as many blocks per target block as one full context
  // needs in each (their peaks' ratio), so both pools hold the same contexts, and the served
  // context is what both hold.
  int64_t draft_bytes_per_block = 0;
  std::vector<int64_t> draft_group_windows = {};
};

struct KvSizing {
  int64_t num_blocks = 0;
  int64_t max_model_len = 0;  // the context served (prompt + generated tokens)
  int64_t budget_bytes = 0;   // num_blocks x bytes_per_block (+ the draft pool's bytes)
  int64_t draft_num_blocks = 0;  // the draft model's pool (0 without one)
  bool lowered = false;       // max_model_len is below the model's trained context
};

// Errors: InvalidArgument for inputs out of range, for an explicit max_model_len the budget
// cannot hold (naming --max-model-len), and for a budget below kMinKvContextTokens (naming
// --kv-cache-memory, or the available memory when that set the budget).
Result<KvSizing> SizeKvCache(const KvSizingInput& in);

// MemAvailable of a /proc/meminfo text, in bytes; nullopt when absent or malformed.
std::optional<int64_t> ParseMemAvailable(std::string_view meminfo);
// MemAvailable of this machine now (0 when /proc/meminfo cannot be read).
int64_t ReadAvailableMemory();

}  // namespace tachyon::engine
