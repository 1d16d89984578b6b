#include "spec/ngram_drafter.h"

#include <algorithm>
#include <cstddef>

namespace tachyon::spec {

void NgramLookup(std::span<const int32_t> tokens, int min_n, int max_n, int max_tokens,
                 std::vector<int32_t>* draft) {
  const size_t len = tokens.size();
  if (max_tokens <= 0) return;
  for (int n = std::min<int>(max_n, static_cast<int>(len) - 1); n >= min_n; --n) {
    const std::span<const int32_t> suffix = tokens.last(static_cast<size_t>(n));
    // An occurrence starting at i (i + n < len, so at least one token follows it), latest first.
    for (size_t i = len - static_cast<size_t>(n); i-- > 0;) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + i)) continue;
      // Copy what followed; a recent match runs into the sequence's end and then continues
      // over the draft itself (a repeating pattern repeats on).
      const size_t from = i + static_cast<size_t>(n);
      const size_t base = draft->size();
      for (size_t j = 0; j < static_cast<size_t>(max_tokens); ++j) {
        const size_t src = from + j;
        draft->push_back(src < len ? tokens[src] : (*draft)[base + src - len]);
      }
      return;
    }
  }
}

void NgramDrafter::Propose(int64_t seq_id, std::span<const int32_t> tokens,
                           int64_t num_prompt_tokens, int max_tokens, std::vector<int32_t>* draft) {
  (void)seq_id;
  (void)num_prompt_tokens;
  NgramLookup(tokens, min_n_, max_n_, max_tokens, draft);
}

}  // namespace tachyon::spec
