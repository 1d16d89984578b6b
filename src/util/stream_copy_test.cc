#include "util/stream_copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace tachyon {
namespace {

// Every path copies exactly [dst, dst + n) from src, at any alignment, and writes nothing
// around it.
TEST(StreamCopy, CopiesExactlyTheRangeAtAnyAlignment) {
  const size_t sizes[] = {0, 1, 15, 16, 17, 63, 64, 65, 255, 256, 257, 319, 320, 1000, 6147, 70001};
  for (int level : {-1, 0, 2}) {
    for (size_t n : sizes) {
      for (size_t src_off : {0, 1, 33}) {
        for (size_t dst_off : {0, 1, 5, 16, 63}) {
          std::vector<uint8_t> src(n + 64), dst(n + 128, 0xee);
          for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);
          if (level < 0) {
            StreamCopy(dst.data() + dst_off, src.data() + src_off, n);
          } else if (!StreamCopyWith(level, dst.data() + dst_off, src.data() + src_off, n)) {
            continue;  // the CPU lacks this level
          }
          for (size_t i = 0; i < dst.size(); ++i) {
            const bool in = i >= dst_off && i < dst_off + n;
            ASSERT_EQ(dst[i], in ? src[src_off + i - dst_off] : 0xee)
                << "level " << level << " n " << n << " src+" << src_off << " dst+" << dst_off
                << " byte " << i;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tachyon
