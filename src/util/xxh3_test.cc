#include "util/xxh3.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdint>
#include <random>
#include <vector>

namespace tachyon {
namespace {

// Lengths of every XXH3 code path: empty, 1-3, 4-8, 9-16, 17-128, 129-240, past 240 (stripes),
// past one 1 KiB block, and large.
std::vector<size_t> Lengths() {
  std::vector<size_t> n;
  for (size_t i = 0; i <= 260; ++i) n.push_back(i);
  for (size_t i : {1023, 1024, 1025, 4095, 12288 + 52, 65536 + 7, 1 << 20}) n.push_back(i);
  return n;
}

TEST(Xxh3, EveryBuildMatchesTheLibrary) {
  std::mt19937_64 rng(7);
  std::vector<uint8_t> data(1 << 20);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  int levels = 0;
  for (int level = 0; level <= 2; ++level) {
    uint64_t v = 0;
    if (!Xxh3With(level, data.data(), 1, &v)) continue;
    ++levels;
    for (size_t n : Lengths()) {
      const size_t at = n % 61;  // unaligned too
      const size_t len = std::min(n, data.size() - at);
      ASSERT_TRUE(Xxh3With(level, data.data() + at, len, &v));
      EXPECT_EQ(v, XXH3_64bits(data.data() + at, len)) << "level " << level << " length " << len;
    }
  }
  EXPECT_GE(levels, 1);
  EXPECT_EQ(Xxh3(data.data(), 1000), XXH3_64bits(data.data(), 1000));
}

TEST(Xxh3, StreamInAnyPiecesMatchesOneShot) {
  std::mt19937_64 rng(11);
  std::vector<uint8_t> data(300000);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  for (size_t n : {size_t{0}, size_t{5}, size_t{240}, size_t{241}, size_t{5000}, data.size()}) {
    for (int trial = 0; trial < 4; ++trial) {
      Xxh3Stream s;
      for (size_t at = 0; at < n;) {
        const size_t piece = std::min<size_t>(n - at, 1 + rng() % (trial == 0 ? 3 : 20000));
        s.Update(data.data() + at, piece);
        at += piece;
      }
      EXPECT_EQ(s.Digest(), XXH3_64bits(data.data(), n)) << n;
    }
  }
}

}  // namespace
}  // namespace tachyon
