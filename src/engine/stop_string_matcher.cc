#include "engine/stop_string_matcher.h"

#include <algorithm>
#include <utility>

namespace tachyon::engine {

std::string StopStringMatcher::Append(std::string_view delta, bool* stopped) {
  *stopped = false;
  held_.append(delta);
  if (stops_.empty()) return std::exchange(held_, std::string());
  // Earliest complete match. held_ only ever starts where a match could start, so searching
  // it alone suffices.
  size_t best = std::string::npos;
  for (const std::string& s : stops_) best = std::min(best, held_.find(s));
  if (best != std::string::npos) {
    *stopped = true;
    std::string out = held_.substr(0, best);
    held_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    const size_t max_len = std::min(s.size() - 1, held_.size());
    for (size_t len = max_len; len > hold; --len) {
      if (std::string_view(held_).substr(held_.size() - len) ==
          std::string_view(s).substr(0, len)) {
        hold = len;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return out;
}

std::string StopStringMatcher::Flush() {
  return std::exchange(held_, std::string());
}

}  // namespace tachyon::engine
