// StopStringMatcher: finds stop strings in streamed text, across token boundaries.
//
// Text is released only once it can no longer be the start of a stop string: a suffix that
// is a prefix of some stop string is held back until the next delta decides. When a stop
// string completes, the text before it is released and the stop string and everything after
// it are dropped. One per output stream; not thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tachyon::engine {

class StopStringMatcher {
 public:
  explicit StopStringMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Appends a text delta. Returns the text that may be released now; sets *stopped when a
  // stop string completed (then nothing more should be appended).
  std::string Append(std::string_view delta, bool* stopped);
  // Releases the held-back text (at the end of the stream).
  std::string Flush();
  bool empty() const { return stops_.empty(); }

 private:
  std::vector<std::string> stops_;
  std::string held_;
};

}  // namespace tachyon::engine
