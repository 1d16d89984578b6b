#include "kv/disk_tier.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <thread>

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

// Two blocks of 600 bytes in one segment of a fresh tier in `dir`: records at bytes 0 and
// kRecord. Returns the segment's path.
constexpr int64_t kRecord = DiskTier::kRecordHeaderBytes + 600;
fs::path WriteTwoBlocks(const fs::path& dir) {
  auto t = DiskTier::Open(dir, 1 << 20, kModelA);
  EXPECT_TRUE(t.ok());
  (*t)->Store(Key(1), TestBlock(2, 300, 1).chunks());
  (*t)->Store(Key(2), TestBlock(2, 300, 2).chunks());
  (*t)->Flush();
  EXPECT_EQ((*t)->segments(), 1u);
  return Files(dir).at(0);
}

void FlipByte(const fs::path& file, int64_t at) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  const char c = static_cast<char>(f.get());
  f.seekp(at);
  f.put(static_cast<char>(c ^ 0x5a));
}

TEST(DiskTier, ACorruptPayloadIsNeverLoaded) {
  TempDir dir("disk-corrupt-payload");
  FlipByte(WriteTwoBlocks(dir.path), DiskTier::kRecordHeaderBytes + 10);
  auto t = DiskTier::Open(dir.path, 1 << 20, kModelA);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->scanned_blocks(), 2);  // headers fine: found by the scan, refused by Load
  TestBlock out(2, 300, 0);
  EXPECT_EQ((*t)->Load(Key(1), out.chunks()).code(), StatusCode::kDataLoss);
  EXPECT_EQ((*t)->Lookup(std::vector<BlockHash>{Key(1)}), 0u);  // dropped
  ASSERT_TRUE((*t)->Load(Key(2), out.chunks()).ok());
  EXPECT_EQ(out.data, TestBlock(2, 300, 2).data);
  EXPECT_EQ((*t)->Stats().load_failures, 1);
}

TEST(DiskTier, ACorruptHeaderEndsItsSegmentsScan) {
  TempDir dir("disk-corrupt-header");
  FlipByte(WriteTwoBlocks(dir.path), kRecord + 20);  // the second record's key
  auto t = DiskTier::Open(dir.path, 1 << 20, kModelA);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->scanned_blocks(), 1);
  EXPECT_EQ((*t)->Lookup(std::vector<BlockHash>{Key(2)}), 0u);
  TestBlock out(2, 300, 0);
  ASSERT_TRUE((*t)->Load(Key(1), out.chunks()).ok());
  EXPECT_EQ(out.data, TestBlock(2, 300, 1).data);
  // New records go after the valid ones, over the bad one.
  (*t)->Store(Key(3), TestBlock(2, 300, 3).chunks());
  (*t)->Flush();
  t = DiskTier::Open(dir.path, 1 << 20, kModelA);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->scanned_blocks(), 2);
  ASSERT_TRUE((*t)->Load(Key(3), out.chunks()).ok());
  EXPECT_EQ(out.data, TestBlock(2, 300, 3).data);
}

TEST(DiskTier, ATruncatedSegmentKeepsItsWholeRecords) {
  TempDir dir("disk-truncated");
  fs::resize_file(WriteTwoBlocks(dir.path), kRecord + 300);  // in the second record's payload
  auto t = DiskTier::Open(dir.path, 1 << 20, kModelA);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->scanned_blocks(), 1);
  const BlockHash keys[] = {Key(1), Key(2)};
  EXPECT_EQ((*t)->Lookup(keys), 1u);
  TestBlock out(2, 300, 0);
  ASSERT_TRUE((*t)->Load(Key(1), out.chunks()).ok());
  EXPECT_EQ(out.data, TestBlock(2, 300, 1).data);
}

TEST(DiskTier, BadAndOldFilesAreRemovedOthersKept) {
  TempDir dir("disk-bad-files");
  const fs::path segment = WriteTwoBlocks(dir.path);
  const std::string ours = segment.filename().string().substr(0, 17);  // "<identity hi>-"
  std::ofstream(dir.path / (ours + "0000000a.kvs")) << "not a record";
  std::ofstream(dir.path / (ours + "0000000b.kvs"));  // created, never written
  std::ofstream(dir.path / (ours + "0123456789abcdef0123456789abcdef.kvb")) << "format 1";
  std::ofstream(dir.path / "x.kvb.tmp") << "half";  // format 1's write cut short
  const fs::path other = dir.path / "0000000000000009-0123456789abcdef0123456789abcdef.kvb";
  std::ofstream(other) << "another model's, format 1";
  auto t = DiskTier::Open(dir.path, 1 << 20, kModelA);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->scanned_blocks(), 2);
  EXPECT_EQ((*t)->removed_files(), 4);
  EXPECT_EQ((*t)->ignored_files(), 1);
  EXPECT_EQ(Files(dir.path).size(), 2u);
  EXPECT_TRUE(fs::exists(other));
  // New segments never take a removed or another file's number.
  (*t)->Store(Key(3), TestBlock(2, 300, 3).chunks());
  (*t)->Flush();
  EXPECT_EQ((*t)->Stats().stores, 1);
}

TEST(DiskTier, StaysWithinItsCapacity) {
  TempDir dir("disk-capacity");
  // Blocks larger than a segment's target (capacity / 16): one per segment, each file a
  // record and its end mark.
  const int64_t file = kRecord + DiskTier::kRecordHeaderBytes;
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
  const BlockHash newest[] = {Key(3), Key(4)};
  EXPECT_EQ((*u)->Lookup(newest), 2u);
}

// Which of keys [0, n) a tier holds.
std::vector<bool> Held(DiskTier& t, int n) {
  std::vector<bool> out;
  for (int i = 0; i < n; ++i) out.push_back(t.Lookup(std::vector<BlockHash>{Key(i)}) == 1);
  return out;
}

TEST(DiskTier, AFullTierOverwritesItsOldestSegmentAcrossRestarts) {
  TempDir dir("disk-ring");
  const int64_t capacity = 16 * 4 * kRecord;  // segments of 4 records
  constexpr int kBlocks = 150;
  int64_t held_at_close = 0;
  for (int phase = 0; phase < 2; ++phase) {  // half the blocks, a restart, the other half
    auto t = DiskTier::Open(dir.path, capacity, kModelA);
    ASSERT_TRUE(t.ok());
    ASSERT_EQ((*t)->segment_bytes(), 4 * kRecord);
    EXPECT_EQ((*t)->scanned_blocks(), held_at_close);
    for (int i = phase * kBlocks / 2; i < (phase + 1) * kBlocks / 2; ++i) {
      (*t)->Store(Key(i), TestBlock(2, 300, i).chunks());
      if (i % 8 == 7) (*t)->Flush();
    }
    (*t)->Flush();
    EXPECT_LE((*t)->Stats().bytes, capacity);
    EXPECT_LE(Files(dir.path).size(), 16u);
    held_at_close = (*t)->Stats().blocks;
  }
  auto t = DiskTier::Open(dir.path, capacity, kModelA);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->scanned_blocks(), held_at_close);
  EXPECT_GT(held_at_close, 40);  // most of the capacity holds blocks
  EXPECT_LT(held_at_close, kBlocks);
  // The newest blocks, and no older one: the stale records of an overwritten segment (after
  // its end mark) are never indexed again.
  const std::vector<bool> held = Held(**t, kBlocks);
  const int first = static_cast<int>(std::find(held.begin(), held.end(), true) - held.begin());
  EXPECT_EQ(kBlocks - first, held_at_close);
  EXPECT_TRUE(std::all_of(held.begin() + first, held.end(), [](bool b) { return b; }));
  TestBlock out(2, 300, 0);
  for (int i : {first, (first + kBlocks) / 2, kBlocks - 1}) {
    ASSERT_TRUE((*t)->Load(Key(i), out.chunks()).ok()) << i;
    EXPECT_EQ(out.data, TestBlock(2, 300, i).data) << i;
  }
  EXPECT_EQ((*t)->Stats().load_failures, 0);
}

TEST(DiskTier, ABlockOfferedAgainOutlivesItsSegment) {
  TempDir dir("disk-reoffer");
  const int64_t capacity = 16 * 4 * kRecord;
  auto t = DiskTier::Open(dir.path, capacity, kModelA);
  ASSERT_TRUE(t.ok());
  int next = 0;
  auto fill = [&](int n) {
    for (int i = 0; i < n; ++i, ++next) {
      (*t)->Store(Key(next), TestBlock(2, 300, next).chunks());
      (*t)->Flush();
    }
  };
  fill(80);  // full: the oldest segments have been overwritten
  const std::vector<bool> held = Held(**t, next);
  const int oldest = static_cast<int>(std::find(held.begin(), held.end(), true) - held.begin());
  ASSERT_GT(oldest, 0);
  (*t)->Store(Key(oldest), TestBlock(2, 300, oldest).chunks());      // in use again: rewritten
  (*t)->Store(Key(next - 1), TestBlock(2, 300, next - 1).chunks());  // recent: kept as is
  (*t)->Flush();
  EXPECT_EQ((*t)->Stats().stores, 81);
  fill(12);  // three segments more: the one `oldest` was in is overwritten
  EXPECT_EQ((*t)->Lookup(std::vector<BlockHash>{Key(oldest + 1)}), 0u);
  TestBlock out(2, 300, 0);
  ASSERT_TRUE((*t)->Load(Key(oldest), out.chunks()).ok());
  EXPECT_EQ(out.data, TestBlock(2, 300, oldest).data);
}

TEST(DiskTier, LoadsRacingTheOverwriteOfTheirSegmentNeverSeeWrongBytes) {
  TempDir dir("disk-race");
  auto t = DiskTier::Open(dir.path, 16 * 4 * kRecord, kModelA);
  ASSERT_TRUE(t.ok());
  constexpr int kBlocks = 200;  // the ring (15 segments of 4 blocks) goes round three times
  std::atomic<int> written{0}, loads{0};
  std::thread writer([&] {
    for (int i = 0; i < kBlocks; ++i) {
      const int seen = loads;
      while (loads < seen + 4) std::this_thread::yield();  // a few loads between two writes
      (*t)->Store(Key(i), TestBlock(2, 300, i).chunks());
      (*t)->Flush();
      written = i + 1;
    }
  });
  int ok = 0, gone = 0;
  for (int round = 0; written < kBlocks; ++round, ++loads) {
    // The newest block, and the oldest ones: the next to be overwritten.
    const int i = round % 2 ? written - 1 : written - 56 - round % 8;
    if (i < 0) continue;
    TestBlock out(2, 300, 0);
    const Status s = (*t)->Load(Key(i), out.chunks());
    if (s.ok()) {
      ASSERT_EQ(out.data, TestBlock(2, 300, i).data) << i;
      ++ok;
    } else {
      ASSERT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
      ++gone;
    }
  }
  writer.join();
  EXPECT_GT(ok, kBlocks / 2);
  EXPECT_GT(gone, 0);
  EXPECT_EQ((*t)->Stats().load_failures, gone);
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
