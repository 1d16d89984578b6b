#include "router/huge_page_allocator.h"

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

namespace tachyon::router {
namespace {

TEST(HugePageAllocator, LargeBlocksAreAlignedZeroedAndUsable) {
  // 3 MiB and more: a 2 MiB-aligned mapping; growing reallocates and keeps the contents.
  std::vector<uint64_t, HugePageAllocator<uint64_t>> v(size_t{3} << 17, 0);  // 3 MiB
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % (size_t{2} << 20), 0u);
  for (size_t i = 0; i < v.size(); ++i) v[i] = i;
  v.resize(v.size() * 3, 7);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % (size_t{2} << 20), 0u);
  for (size_t i = 0; i < (size_t{3} << 17); ++i) ASSERT_EQ(v[i], i);
  EXPECT_EQ(v.back(), 7u);
  // A raw large block comes back zeroed.
  HugePageAllocator<uint32_t> a;
  uint32_t* p = a.allocate(size_t{1} << 20);  // 4 MiB
  EXPECT_EQ(p[0], 0u);
  EXPECT_EQ(p[(size_t{1} << 20) - 1], 0u);
  a.deallocate(p, size_t{1} << 20);
}

TEST(HugePageAllocator, SmallBlocksComeFromTheHeap) {
  std::vector<int, HugePageAllocator<int>> v;
  for (int i = 0; i < 1000; ++i) v.push_back(i);
  EXPECT_EQ(v[999], 999);
}

}  // namespace
}  // namespace tachyon::router
