#include "engine/stop_string_matcher.h"

#include <gtest/gtest.h>

namespace tachyon::engine {
namespace {

// Feeds deltas; returns the released text and whether a stop string completed.
std::pair<std::string, bool> Feed(StopStringMatcher& m, std::vector<std::string> deltas) {
  std::string out;
  for (const std::string& d : deltas) {
    bool stopped = false;
    out += m.Append(d, &stopped);
    if (stopped) return {out, true};
  }
  return {out + m.Flush(), false};
}

TEST(StopStringMatcherTest, NoStopsPassesThrough) {
  StopStringMatcher m({});
  bool stopped = true;
  EXPECT_EQ(m.Append("abc", &stopped), "abc");
  EXPECT_FALSE(stopped);
}

TEST(StopStringMatcherTest, MatchAcrossDeltasExcludesStop) {
  StopStringMatcher m({"END"});
  auto [text, stopped] = Feed(m, {"hello E", "N", "D tail"});
  EXPECT_TRUE(stopped);
  EXPECT_EQ(text, "hello ");
}

TEST(StopStringMatcherTest, HoldsBackOnlyPossibleStarts) {
  StopStringMatcher m({"abc"});
  bool stopped = false;
  EXPECT_EQ(m.Append("xxa", &stopped), "xx");  // "a" might start "abc"
  EXPECT_EQ(m.Append("b", &stopped), "");      // "ab" still might
  EXPECT_EQ(m.Append("x", &stopped), "abx");   // no longer
  EXPECT_FALSE(stopped);
  EXPECT_EQ(m.Append("ab", &stopped), "");
  EXPECT_EQ(m.Flush(), "ab");  // end of stream releases the held text
}

TEST(StopStringMatcherTest, EarliestOfSeveralStopsWins) {
  StopStringMatcher m({"world", "lo w"});
  auto [text, stopped] = Feed(m, {"hel", "lo wor", "ld"});
  EXPECT_TRUE(stopped);
  EXPECT_EQ(text, "hel");
}

TEST(StopStringMatcherTest, StopInsideOneDelta) {
  StopStringMatcher m({"\n\n"});
  auto [text, stopped] = Feed(m, {"one\n\ntwo"});
  EXPECT_TRUE(stopped);
  EXPECT_EQ(text, "one");
}

TEST(StopStringMatcherTest, OverlappingPrefixes) {
  StopStringMatcher m({"aab"});
  auto [text, stopped] = Feed(m, {"a", "a", "a", "b"});
  EXPECT_TRUE(stopped);
  EXPECT_EQ(text, "a");
}

}  // namespace
}  // namespace tachyon::engine
