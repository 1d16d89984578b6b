#include "kv/disk_tier.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "kv/testing/tier_test_util.h"

namespace tachyon::kv {
namespace {
namespace fs = std::filesystem;
using testing::Key;
using testing::TempDir;
using testing::TestBlock;

const BlockHash kModelA{1, 2};
const BlockHash kModelB{3, 4};

std::vector<fs::path> Files(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path());
  return out;
}

TEST(DiskTier, BlocksSurviveAReopenBitForBit) {
  TempDir dir("disk-reopen");
  TestBlock a(2, 300, 1), b(2, 300, 2);
  {
    auto t = DiskTier::Open(dir.path, 1 << 20, kModelA);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    (*t)->Store(Key(1), a.chunks());
    (*t)->Store(Key(2), b.chunks());
    const BlockHash keys[] = {Key(1), Key(2), Key(3)};
    EXPECT_EQ((*t)->Lookup(keys), 2u);  // queued blocks are found at once
    (*t)->Flush();
    EXPECT_EQ((*t)->Stats().stores, 2);
  }
  auto t = DiskTier::Open(dir.path, 1 << 20, kModelA);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->scanned_blocks(), 2);
  TestBlock out(2, 300, 0);
  ASSERT_TRUE((*t)->Load(Key(2), out.chunks()).ok());
  EXPECT_EQ(out.data, b.data);
  ASSERT_TRUE((*t)->Load(Key(1), out.chunks()).ok());
  EXPECT_EQ(out.data, a.data);
  EXPECT_EQ((*t)->Load(Key(3), out.chunks()).code(), StatusCode::kNotFound);
  TestBlock wrong(1, 300, 0);
  EXPECT_EQ((*t)->Load(Key(1), wrong.chunks()).code(), StatusCode::kInvalidArgument);
  EXPECT_GT((*t)->LoadSecondsPerBlock(), 0);
}

TEST(DiskTier, RecyclesBuffersThroughTheSharedPool) {
  TempDir dir("disk-buffers");
  auto t = DiskTier::Open(dir.path, 1 << 20, kModelA);
  ASSERT_TRUE(t.ok());
  auto pool = std::make_shared<BufferPool>(1 << 20);
  (*t)->ShareBuffers(pool);
  std::vector<uint8_t> bytes(600, 5);
  const uint8_t* at = bytes.data();
  (*t)->StoreOwned(Key(1), std::move(bytes));
  (*t)->Flush();
  EXPECT_EQ(pool->bytes(), 600);  // written: given back
  TestBlock b(2, 300, 2);
  (*t)->Store(Key(2), b.chunks());  // copied into that buffer
  (*t)->Flush();
  EXPECT_EQ(pool->bytes(), 600);
  std::vector<uint8_t> again = pool->Take();
  EXPECT_EQ(again.data(), at);                 // block 2 went to disk in block 1's pages
  (*t)->StoreOwned(Key(1), std::move(again));  // held already: given back
  EXPECT_EQ(pool->bytes(), 600);
  (*t)->StoreOwned(Key(3), std::vector<uint8_t>(2 << 20));  // larger than the tier: declined
  EXPECT_EQ((*t)->Stats().declined, 1);
  const BlockHash k3[] = {Key(3)};
  EXPECT_EQ((*t)->Lookup(k3), 0u);
  TestBlock out(2, 300, 0);
  ASSERT_TRUE((*t)->Load(Key(2), out.chunks()).ok());
  EXPECT_EQ(out.data, b.data);
}

TEST(DiskTier, AnotherModelsBlocksAreIgnoredAndKept) {
  TempDir dir("disk-identity");
  {
    auto t = DiskTier::Open(dir.path, 1 << 20, kModelA);
    ASSERT_TRUE(t.ok());
    (*t)->Store(Key(1), TestBlock(2, 300, 1).chunks());
  }
  // Even under this model's file name, model A's file is never used.
  const fs::path a_file = Files(dir.path).at(0);
  auto b = DiskTier::Open(dir.path, 1 << 20, kModelB);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->scanned_blocks(), 0);
  EXPECT_EQ((*b)->ignored_files(), 1);
  std::string name = a_file.filename().string();
  fs::path renamed = dir.path / (std::string("0000000000000004") + name.substr(16));
  fs::copy_file(a_file, renamed);
  b = DiskTier::Open(dir.path, 1 << 20, kModelB);
  ASSERT_TRUE(b.ok());
  const BlockHash k1[] = {Key(1)};
  EXPECT_EQ((*b)->Lookup(k1), 0u);
  EXPECT_EQ((*b)->ignored_files(), 2);
  EXPECT_TRUE(fs::exists(a_file));
}

TEST(DiskTier, CorruptFilesAreRemovedNeverLoaded) {
  TempDir dir("disk-corrupt");
  {
    auto t = DiskTier::Open(dir.path, 1 << 20, kModelA);
    ASSERT_TRUE(t.ok());
    (*t)->Store(Key(1), TestBlock(2, 300, 1).chunks());
    (*t)->Store(Key(2), TestBlock(2, 300, 2).chunks());
  }
  std::vector<fs::path> files = Files(dir.path);
  ASSERT_EQ(files.size(), 2u);
  std::sort(files.begin(), files.end());
  {  // a flipped payload byte: found by the scan (header fine), refused by Load
    std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(64 + 10);
    f.put('\x5a');
  }
  fs::resize_file(files[1], 40);                    // a truncated header: removed by the scan
  std::ofstream(dir.path / "x.kvb.tmp") << "half";  // a write cut short
  auto t = DiskTier::Open(dir.path, 1 << 20, kModelA);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->scanned_blocks(), 1);
  EXPECT_EQ((*t)->removed_files(), 2);
  TestBlock out(2, 300, 0);
  const BlockHash first = (*t)->Lookup(std::vector<BlockHash>{Key(1)}) ? Key(1) : Key(2);
  EXPECT_EQ((*t)->Load(first, out.chunks()).code(), StatusCode::kDataLoss);
  EXPECT_TRUE(Files(dir.path).empty());
  EXPECT_EQ((*t)->Stats().load_failures, 1);
}

TEST(DiskTier, StaysWithinItsCapacity) {
  TempDir dir("disk-capacity");
  const int64_t file = 64 + 600;
  {
    auto t = DiskTier::Open(dir.path, 3 * file, kModelA);
    ASSERT_TRUE(t.ok());
    for (int i = 0; i < 5; ++i) {
      (*t)->Store(Key(i), TestBlock(2, 300, i).chunks());
      (*t)->Flush();
    }
    EXPECT_EQ(Files(dir.path).size(), 3u);
    const BlockHash old_keys[] = {Key(0)}, new_keys[] = {Key(2), Key(3), Key(4)};
    EXPECT_EQ((*t)->Lookup(old_keys), 0u);
    EXPECT_EQ((*t)->Lookup(new_keys), 3u);
    EXPECT_EQ((*t)->Stats().evictions, 2);
    EXPECT_LE((*t)->Stats().bytes, 3 * file);
  }
  // Reopened with a smaller bound: the oldest go.
  auto u = DiskTier::Open(dir.path, 2 * file, kModelA);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ((*u)->scanned_blocks(), 2);
  EXPECT_EQ(Files(dir.path).size(), 2u);
}

TEST(DiskTier, ModelIdentityFollowsTheFileAndFormat) {
  TempDir dir("disk-ident");
  fs::create_directories(dir.path);
  std::ofstream(dir.path / "m.gguf") << "weights-1";
  auto a = ModelKvIdentity(dir.path / "m.gguf", "f16/16");
  auto b = ModelKvIdentity(dir.path / "m.gguf", "q8_0/16");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_FALSE(*a == *b);
  std::ofstream(dir.path / "m.gguf") << "weights-2";
  auto c = ModelKvIdentity(dir.path / "m.gguf", "f16/16");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(*a == *c);
  EXPECT_EQ(ModelKvIdentity(dir.path / "missing.gguf", "").status().code(),
            StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tachyon::kv
