#include "kv/buffer_pool.h"

#include <gtest/gtest.h>

namespace tachyon::kv {
namespace {

TEST(BufferPool, GivesBackWhatItKeptWithinItsBound) {
  BufferPool pool(1000);
  EXPECT_TRUE(pool.Take().empty());
  std::vector<uint8_t> a(600, 1);
  const uint8_t* pa = a.data();
  pool.Give(std::move(a));
  EXPECT_EQ(pool.bytes(), 600);
  pool.Give(std::vector<uint8_t>(600, 2));  // over the bound: freed
  EXPECT_EQ(pool.bytes(), 600);
  std::vector<uint8_t> b = pool.Take();
  EXPECT_EQ(b.data(), pa);  // the same pages, not a copy
  EXPECT_EQ(pool.bytes(), 0);
  EXPECT_TRUE(pool.Take().empty());
}

TEST(BufferPool, CopyChunksIntoReusesTheBuffer) {
  std::vector<uint8_t> x = {1, 2, 3}, y = {4, 5};
  const std::span<uint8_t> chunks[] = {x, y};
  std::vector<uint8_t> dst(8, 9);
  const uint8_t* p = dst.data();
  CopyChunksInto(chunks, &dst);
  EXPECT_EQ(dst, (std::vector<uint8_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(dst.data(), p);
  EXPECT_EQ(ConcatChunks(chunks), dst);
}

TEST(BufferPool, CopyChunksIntoCopiesLargeChunksIntoFreshAndRecycledBuffers) {
  std::vector<uint8_t> x(1000), y(3001);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint8_t>(i * 7);
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<uint8_t>(i * 13 + 1);
  std::vector<uint8_t> want = x;
  want.insert(want.end(), y.begin(), y.end());
  const std::span<uint8_t> chunks[] = {x, y};
  std::vector<uint8_t> fresh, recycled(5000, 9);
  CopyChunksInto(chunks, &fresh);
  CopyChunksInto(chunks, &recycled);
  EXPECT_EQ(fresh, want);
  EXPECT_EQ(recycled, want);
}

}  // namespace
}  // namespace tachyon::kv
