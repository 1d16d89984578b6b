#include "model/kv_cache.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace tachyon::model {
namespace {

constexpr int64_t kBlock = 4, kHeads = 2, kDim = 32;

// Fills every position of `block` in every layer with values derived from (layer, position).
void Fill(KvCache& kv, int32_t block, float salt) {
  std::vector<float> k(kHeads * kDim), v(kHeads * kDim);
  for (int64_t layer = 0; layer < kv.n_layers(); ++layer) {
    for (int64_t p = 0; p < kBlock; ++p) {
      for (size_t i = 0; i < k.size(); ++i) {
        k[i] = salt + 0.25f * static_cast<float>(layer) - 0.01f * static_cast<float>(p * 64 + i);
        v[i] = -k[i] * 0.5f;
      }
      kv.Store(layer, block * kBlock + p, k.data(), v.data());
    }
  }
}

TEST(KvCacheChunks, CopyingChunksRestoresABlockBitForBitInEveryDtypeAndLayout) {
  const int64_t windows[] = {0, 8, 8, 0, 8, 8};  // groups of 2 layers: 1 full, 2 sliding
  for (KvLayout layout : {KvLayout::Single(3), KvLayout::Hybrid(windows)}) {
    for (KvDtype dtype : {KvDtype::kF32, KvDtype::kF16, KvDtype::kBf16, KvDtype::kQ8_0,
                          KvDtype::kQ4_0, KvDtype::kQ4_1}) {
      auto a = KvCache::Create(layout, 6, kBlock, kHeads, kDim, dtype);
      auto b = KvCache::Create(layout, 6, kBlock, kHeads, kDim, dtype);
      auto ref = KvCache::Create(layout, 6, kBlock, kHeads, kDim, dtype);
      ASSERT_TRUE(a.ok() && b.ok() && ref.ok());
      EXPECT_EQ((*a)->num_chunks(), 2 * layout.layers_per_block);
      EXPECT_EQ(static_cast<size_t>((*a)->num_chunks()) * (*a)->chunk_bytes(),
                KvCache::BytesPerBlock(layout, kBlock, kHeads, kDim, dtype));
      Fill(**a, 2, 1.0f);
      Fill(**ref, 5, 1.0f);
      for (int64_t c = 0; c < (*a)->num_chunks(); ++c) {
        auto src = (*a)->BlockChunk(2, c);
        auto dst = (*b)->BlockChunk(5, c);
        ASSERT_EQ(src.size(), dst.size());
        std::memcpy(dst.data(), src.data(), src.size());
      }
      for (int64_t c = 0; c < (*a)->num_chunks(); ++c) {
        auto got = (*b)->BlockChunk(5, c), want = (*ref)->BlockChunk(5, c);
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0)
            << KvDtypeName(dtype) << " chunk " << c;
      }
    }
  }
}

TEST(KvCacheChunks, CopySlotsCopiesTheFirstPositionsOfOneLayer) {
  for (KvDtype dtype : {KvDtype::kF16, KvDtype::kQ8_0}) {
    auto kv = KvCache::Create(2, 4, kBlock, kHeads, kDim, dtype);
    ASSERT_TRUE(kv.ok());
    Fill(**kv, 1, 1.0f);
    Fill(**kv, 3, 2.0f);
    std::vector<std::vector<uint8_t>> before;  // block 3's chunks
    for (int64_t c = 0; c < (*kv)->num_chunks(); ++c) {
      auto b = (*kv)->BlockChunk(3, c);
      before.emplace_back(b.begin(), b.end());
    }
    (*kv)->CopySlots(/*layer=*/1, /*src=*/1, /*dst=*/3, /*n=*/2);
    const size_t row = (*kv)->chunk_bytes() / (kBlock * kHeads);
    for (int64_t c = 0; c < (*kv)->num_chunks(); ++c) {  // chunks 2, 3: layer 1's K and V
      auto got = (*kv)->BlockChunk(3, c), src = (*kv)->BlockChunk(1, c);
      for (int64_t h = 0; h < kHeads; ++h) {
        for (int64_t p = 0; p < kBlock; ++p) {
          const size_t off = static_cast<size_t>(h * kBlock + p) * row;
          const uint8_t* want = c >= 2 && p < 2 ? src.data() + off : before[c].data() + off;
          EXPECT_EQ(std::memcmp(got.data() + off, want, row), 0)
              << KvDtypeName(dtype) << " chunk " << c << " head " << h << " position " << p;
        }
      }
    }
  }
}

TEST(KvCacheDtypes, BlockedDtypesRefuseHeadDimsThatAreNotMultiplesOf32) {
  for (KvDtype dtype : {KvDtype::kQ8_0, KvDtype::kQ4_0, KvDtype::kQ4_1}) {
    auto bad = KvCache::Create(KvLayout::Single(2), 4, kBlock, kHeads, 48, dtype);
    ASSERT_FALSE(bad.ok()) << KvDtypeName(dtype);
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(bad.status().message().find(std::string(KvDtypeName(dtype)) +
                                          " needs head_dim to be a multiple of 32, got 48"),
              std::string::npos)
        << bad.status().message();
    EXPECT_TRUE(KvCache::Create(KvLayout::Single(2), 4, kBlock, kHeads, 64, dtype).ok());
  }
  // 4-bit rows: 64 elements are two 32-element blocks of 18 (q4_0) or 20 (q4_1) bytes.
  EXPECT_EQ(KvCache::BytesPerBlock(KvLayout::Single(3), kBlock, kHeads, 64, KvDtype::kQ4_0),
            size_t{2 * 3 * kBlock * kHeads * 36});
  EXPECT_EQ(KvCache::BytesPerBlock(KvLayout::Single(3), kBlock, kHeads, 64, KvDtype::kQ4_1),
            size_t{2 * 3 * kBlock * kHeads * 40});
}

TEST(KvCacheChunks, ALayersRowsLiveInItsSlotsChunks) {
  auto kv = KvCache::Create(KvLayout::Single(2), 3, kBlock, kHeads, kDim, KvDtype::kF32);
  ASSERT_TRUE(kv.ok());
  for (int64_t c = 0; c < (*kv)->num_chunks(); ++c) {
    auto chunk = (*kv)->BlockChunk(1, c);
    std::memset(chunk.data(), 0, chunk.size());
  }
  std::vector<float> k(kHeads * kDim, 3.0f), v(kHeads * kDim, -2.0f);
  (*kv)->Store(1, 1 * kBlock + 2, k.data(), v.data());  // layer 1 = slot 1: chunks 2 (K), 3 (V)
  auto as_floats = [&](int64_t c) {
    auto bytes = (*kv)->BlockChunk(1, c);
    std::vector<float> f(bytes.size() / sizeof(float));
    std::memcpy(f.data(), bytes.data(), bytes.size());
    return f;
  };
  for (int64_t c : {0, 1}) {
    for (float x : as_floats(c)) EXPECT_EQ(x, 0.0f) << "chunk " << c;
  }
  int threes = 0, minus_twos = 0;
  for (float x : as_floats(2)) threes += x == 3.0f;
  for (float x : as_floats(3)) minus_twos += x == -2.0f;
  EXPECT_EQ(threes, kHeads * kDim);
  EXPECT_EQ(minus_twos, kHeads * kDim);
}

}  // namespace
}  // namespace tachyon::model
