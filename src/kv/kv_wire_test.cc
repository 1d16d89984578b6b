#include "kv/kv_wire.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "kv/testing/wire_shape.h"
#include "util/xxh3.h"

namespace tachyon::kv {
namespace {

KvWireShape TestShape() {
  return testing::PlainF16WireShape(/*n_layers=*/3, /*block_size=*/4, /*n_kv_heads=*/2,
                                    /*head_dim=*/2, {0x1234, 0x5678});
}

// A transfer of `n` blocks whose bytes are a function of (block, chunk, byte).
struct Stream {
  KvWireShape shape = TestShape();
  std::vector<std::vector<std::vector<uint8_t>>> chunks;  // [block][chunk] bytes
  std::vector<uint8_t> bytes;
  std::vector<size_t> frame_starts;  // header, then layers_per_block layer frames a block, end
  std::vector<uint8_t> Frames(size_t first, size_t end) const {
    return {bytes.begin() + frame_starts[first],
            end < frame_starts.size() ? bytes.begin() + frame_starts[end] : bytes.end()};
  }
};

Stream MakeStream(int n, uint32_t announced, KvWireEndStatus end = KvWireEndStatus::kComplete) {
  Stream st;
  auto append = [&](const KvWireFrame& f) {
    st.frame_starts.push_back(st.bytes.size());
    const auto flat = f.Flatten();
    st.bytes.insert(st.bytes.end(), flat.begin(), flat.end());
  };
  KvWireHeader h{st.shape, "req-7", announced};
  auto hf = EncodeHeader(h);
  EXPECT_TRUE(hf.ok()) << hf.status().ToString();
  append(*hf);
  for (int b = 0; b < n; ++b) {
    std::vector<std::vector<uint8_t>> cs;
    std::vector<std::span<const uint8_t>> spans;
    for (uint32_t c = 0; c < st.shape.num_chunks; ++c) {
      std::vector<uint8_t> v(st.shape.chunk_bytes);
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>(b * 31 + c * 7 + i);
      cs.push_back(std::move(v));
    }
    for (const auto& v : cs) spans.emplace_back(v);
    auto bf = EncodeBlockLayers(st.shape, b, 0, BlockHash{uint64_t(b) + 1, 99}, spans);
    EXPECT_TRUE(bf.ok()) << bf.status().ToString();
    for (const KvWireFrame& f : *bf) append(f);
    st.chunks.push_back(std::move(cs));
  }
  append(EncodeEnd({static_cast<uint32_t>(n), end}));
  return st;
}

void ExpectBlocks(const Stream& st, const std::vector<KvWireBlock>& got) {
  ASSERT_EQ(got.size(), st.chunks.size());
  for (size_t b = 0; b < got.size(); ++b) {
    EXPECT_EQ(got[b].index, b);
    EXPECT_EQ(got[b].hash, (BlockHash{b + 1, 99}));
    for (uint32_t c = 0; c < st.shape.num_chunks; ++c) {
      const auto chunk = got[b].chunk(c);
      ASSERT_EQ(chunk.size(), st.chunks[b][c].size());
      EXPECT_EQ(0, std::memcmp(chunk.data(), st.chunks[b][c].data(), chunk.size()));
    }
  }
}

TEST(KvWire, RoundTripWholeAndBytewise) {
  const Stream st = MakeStream(3, 3);
  KvWireDecoder whole;
  ASSERT_TRUE(whole.Feed(st.bytes).ok()) << whole.status().ToString();
  ASSERT_TRUE(whole.Finish().ok());
  EXPECT_EQ(whole.header().shape, st.shape);
  EXPECT_EQ(whole.header().request_id, "req-7");
  EXPECT_EQ(whole.header().num_blocks, 3u);
  EXPECT_EQ(whole.end().status, KvWireEndStatus::kComplete);
  ExpectBlocks(st, whole.TakeBlocks());

  KvWireDecoder bytewise;  // one byte at a time through NextBuffer / Commit
  std::vector<KvWireBlock> blocks;
  for (uint8_t byte : st.bytes) {
    auto into = bytewise.NextBuffer();
    ASSERT_FALSE(into.empty());
    into[0] = byte;
    ASSERT_TRUE(bytewise.Commit(1).ok()) << bytewise.status().ToString();
    for (auto& b : bytewise.TakeBlocks()) blocks.push_back(std::move(b));
  }
  EXPECT_TRUE(bytewise.done());
  EXPECT_TRUE(bytewise.NextBuffer().empty());
  ExpectBlocks(st, blocks);
}

TEST(KvWire, FeedInAnyPiecesAndRecycledBuffers) {
  // Pieces of every size from 1 byte to the whole stream give the same blocks. Block buffers
  // come from a source that hands out vectors full of junk (a recycled block).
  const Stream st = MakeStream(4, 4);
  for (size_t piece = 1; piece <= st.bytes.size(); piece += piece < 64 ? 1 : 37) {
    KvWireDecoder d;
    int taken = 0;
    d.set_block_buffers([&](size_t bytes) {
      ++taken;
      return std::vector<uint8_t>(bytes, 0xAB);
    });
    std::vector<KvWireBlock> blocks;
    for (size_t at = 0; at < st.bytes.size(); at += piece) {
      const size_t n = std::min(piece, st.bytes.size() - at);
      ASSERT_TRUE(d.Feed(std::span(st.bytes).subspan(at, n)).ok()) << piece << " "
                                                                    << d.status().ToString();
      for (auto& b : d.TakeBlocks()) blocks.push_back(std::move(b));
    }
    ASSERT_TRUE(d.done()) << piece;
    EXPECT_EQ(d.bytes_consumed(), st.bytes.size());
    EXPECT_EQ(taken, 4);
    ExpectBlocks(st, blocks);
  }
}

TEST(KvWire, FeedReportsACorruptFrameAfterWholeBlocks) {
  // One piece holding two good blocks and a corrupt layer of the third: the two are decoded
  // before the error.
  Stream st = MakeStream(3, 3);
  const size_t layer = st.frame_starts[1 + 2 * st.shape.layers_per_block];  // block 2, layer 0
  st.bytes[layer + kKvWireFrameHeadBytes + 40] ^= 0x10;
  KvWireDecoder d;
  EXPECT_EQ(d.Feed(st.bytes).code(), StatusCode::kDataLoss);
  EXPECT_EQ(d.blocks_decoded(), 2u);
  EXPECT_EQ(d.TakeBlocks().size(), 2u);
}

TEST(KvWire, FewerBlocksThanAnnouncedAndAbortedEnd) {
  const Stream st = MakeStream(1, 5, KvWireEndStatus::kAborted);
  KvWireDecoder d;
  ASSERT_TRUE(d.Feed(st.bytes).ok()) << d.status().ToString();
  EXPECT_EQ(d.end().status, KvWireEndStatus::kAborted);
  EXPECT_EQ(d.end().num_blocks, 1u);
  ExpectBlocks(st, d.TakeBlocks());
}

TEST(KvWire, EveryTruncationIsReported) {
  const Stream st = MakeStream(2, 2);
  for (size_t cut = 0; cut < st.bytes.size(); ++cut) {
    KvWireDecoder d;
    ASSERT_TRUE(d.Feed(std::span(st.bytes).first(cut)).ok()) << cut;
    const Status s = d.Finish();
    ASSERT_FALSE(s.ok()) << cut;
    EXPECT_EQ(s.code(), StatusCode::kDataLoss);
    EXPECT_NE(s.message().find("truncated"), std::string::npos) << s.message();
  }
}

TEST(KvWire, EveryFlippedByteIsRejected) {
  const Stream st = MakeStream(1, 1);
  for (size_t i = 0; i < st.bytes.size(); ++i) {
    std::vector<uint8_t> bad = st.bytes;
    bad[i] ^= 0x40;
    KvWireDecoder d;
    const Status fed = d.Feed(bad);
    const Status s = fed.ok() ? d.Finish() : fed;
    EXPECT_FALSE(s.ok()) << "byte " << i << " flipped was accepted";
  }
}

Status DecodeAll(const std::vector<uint8_t>& bytes, const KvWireLimits& limits = {}) {
  KvWireDecoder d(limits);
  RETURN_IF_ERROR(d.Feed(bytes));
  return d.Finish();
}

void ExpectError(const std::vector<uint8_t>& bytes, std::string_view needle,
                 const KvWireLimits& limits = {}) {
  const Status s = DecodeAll(bytes, limits);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
}

// Rewrites bytes of frame `frame` at `offset` (not re-sealed: head fields are checked before
// the checksum, so the head check must name the problem).
std::vector<uint8_t> Patch(const Stream& st, size_t frame, size_t offset, uint64_t value,
                           int width) {
  std::vector<uint8_t> b = st.bytes;
  const size_t at = st.frame_starts[frame];
  for (int i = 0; i < width; ++i) b[at + offset + i] = static_cast<uint8_t>(value >> (8 * i));
  return b;
}

TEST(KvWire, HeadErrorsNameTheProblem) {
  const Stream st = MakeStream(1, 1);
  ExpectError(Patch(st, 0, 0, 0x46464947, 4), "bad magic");
  ExpectError(Patch(st, 0, 4, 1, 2), "unsupported wire version 1");
  ExpectError(Patch(st, 0, 6, 9, 2), "unknown frame type 9");
  ExpectError(Patch(st, 1, 6, 4, 2), "ack frame inside");
  ExpectError(Patch(st, 0, 8, 1 << 20, 8), "header frame of");
  ExpectError(Patch(st, 1, 8, 10, 8), "layer frame of 10 payload bytes");
  ExpectError(Patch(st, 0, 20, 0xff, 1), "checksum mismatch");  // a payload byte
}

TEST(KvWire, OrderErrors) {
  const Stream st = MakeStream(2, 2);
  const size_t end_frame = st.frame_starts.size() - 1;
  ExpectError(st.Frames(1, 2), "layer frame before the header");
  ExpectError(st.Frames(end_frame, end_frame + 1), "end frame before the header");
  std::vector<uint8_t> two_headers = st.Frames(0, 1);
  two_headers.insert(two_headers.end(), two_headers.begin(), two_headers.end());
  ExpectError(two_headers, "a second header");
  // A block beyond the two announced.
  const Stream three = MakeStream(3, 3);
  std::vector<uint8_t> extra = st.Frames(0, end_frame);
  const std::vector<uint8_t> block2 = three.Frames(7, 8);
  std::vector<uint8_t> beyond = extra;
  beyond.insert(beyond.end(), block2.begin(), block2.end());
  ExpectError(beyond, "block index 2 beyond the 2 announced");
  // A layer of a block that arrived whole, a layer twice, a layer under another hash.
  std::vector<uint8_t> again = extra;
  const std::vector<uint8_t> layer0 = st.Frames(1, 2);
  again.insert(again.end(), layer0.begin(), layer0.end());
  ExpectError(again, "block 0 (group 0), which arrived whole already");
  std::vector<uint8_t> twice = st.Frames(0, 2);
  twice.insert(twice.end(), layer0.begin(), layer0.end());
  ExpectError(twice, "layer slot 0 of block 0 (group 0) twice");
  std::vector<uint8_t> resealed = MakeStream(2, 2).Frames(0, 2);
  {
    KvWireShape sh = TestShape();
    std::vector<uint8_t> k(sh.chunk_bytes, 1), v(sh.chunk_bytes, 2);
    const std::span<const uint8_t> kvs[] = {k, v};
    const auto f = EncodeLayer(sh, 0, 0, {77, 77}, 1, kvs)->Flatten();
    resealed.insert(resealed.end(), f.begin(), f.end());
  }
  ExpectError(resealed, "a layer of block 0 (group 0) under another hash");
  // A complete end frame while a block lacks layers.
  std::vector<uint8_t> short_block = st.Frames(0, 6);
  const auto e1 = EncodeEnd({1, KvWireEndStatus::kComplete}).Flatten();
  short_block.insert(short_block.end(), e1.begin(), e1.end());
  ExpectError(short_block, "block 1 lacks 1 layers at a complete end frame");
  // An end frame that counts another number of blocks.
  const Stream one = MakeStream(1, 2);
  std::vector<uint8_t> miscount = one.Frames(0, 4);
  const auto e = EncodeEnd({2, KvWireEndStatus::kComplete}).Flatten();
  miscount.insert(miscount.end(), e.begin(), e.end());
  ExpectError(miscount, "end frame counts 2 blocks, 1 arrived");
  // Bytes after the end.
  std::vector<uint8_t> trailing = st.bytes;
  trailing.push_back(0);
  ExpectError(trailing, "bytes after the end frame");
}

TEST(KvWire, ShapeAndLimitErrors) {
  KvWireShape s = TestShape();
  s.num_chunks = 5;
  EXPECT_FALSE(EncodeHeader({s, "x", 1}).ok());
  s = TestShape();
  s.layers_per_block = 2;
  s.num_chunks = 4;
  EXPECT_NE(ValidateShape(s).message().find("not a multiple"), std::string::npos);
  s = TestShape();
  s.head_dim = 0;
  EXPECT_FALSE(ValidateShape(s).ok());
  EXPECT_FALSE(EncodeHeader({TestShape(), std::string(kKvWireMaxRequestId + 1, 'a'), 1}).ok());

  const Stream st = MakeStream(1, 1);
  KvWireLimits small;
  small.max_block_bytes = 64;
  ExpectError(st.bytes, "exceeds the limit 64", small);
  KvWireLimits few;
  few.max_blocks = 0;
  ExpectError(st.bytes, "the limit is 0", few);

  KvWireLimits one_partial;
  one_partial.max_partial_blocks = 1;
  const Stream two = MakeStream(2, 2);
  ExpectError(two.Frames(0, 1), "truncated", one_partial);
  std::vector<uint8_t> interleaved = two.Frames(0, 2);  // block 0's layer 0, then block 1's
  const std::vector<uint8_t> b1 = two.Frames(4, 5);
  interleaved.insert(interleaved.end(), b1.begin(), b1.end());
  ExpectError(interleaved, "more than 1 blocks with layers missing at once", one_partial);

  const std::vector<uint8_t> c(10);
  const std::vector<std::span<const uint8_t>> wrong(6, std::span<const uint8_t>(c));
  EXPECT_FALSE(EncodeBlockLayers(TestShape(), 0, 0, {}, wrong).ok());
  EXPECT_FALSE(EncodeBlockLayers(TestShape(), 0, 0, {}, std::span(wrong).first(2)).ok());
  EXPECT_FALSE(EncodeLayer(TestShape(), 0, 0, {}, 0, std::span(wrong).first(1)).ok());
  const std::vector<uint8_t> ok_chunk(TestShape().chunk_bytes);
  const std::span<const uint8_t> kvs[] = {ok_chunk, ok_chunk};
  EXPECT_TRUE(EncodeLayer(TestShape(), 0, 0, {}, 2, kvs).ok());
  EXPECT_FALSE(EncodeLayer(TestShape(), 0, 0, {}, 3, kvs).ok());
}

// The order a streaming sender uses: layer 0 of every block of a chunk, then layer 1, ...; an
// aborted end drops a block whose layers did not all arrive and keeps the whole ones.
TEST(KvWire, LayerMajorOrderAndAbortMidBlock) {
  const Stream st = MakeStream(3, 3);
  const size_t L = st.shape.layers_per_block;
  std::vector<uint8_t> bytes = st.Frames(0, 1);
  for (size_t l = 0; l < L; ++l) {
    for (size_t b = 0; b < 3; ++b) {
      const auto f = st.Frames(1 + b * L + l, 2 + b * L + l);
      bytes.insert(bytes.end(), f.begin(), f.end());
    }
  }
  const auto end = st.Frames(st.frame_starts.size() - 1, st.frame_starts.size());
  bytes.insert(bytes.end(), end.begin(), end.end());
  KvWireDecoder d;
  std::vector<KvWireBlock> got;
  for (size_t at = 0; at < bytes.size(); ++at) {  // blocks come out only once whole
    ASSERT_TRUE(d.Feed(std::span(bytes).subspan(at, 1)).ok()) << d.status().ToString();
    for (auto& b : d.TakeBlocks()) got.push_back(std::move(b));
    if (d.layers_decoded() < 2 * 3 + 1) EXPECT_TRUE(got.empty()) << at;
  }
  ASSERT_TRUE(d.Finish().ok());
  EXPECT_EQ(d.layers_decoded(), 9u);
  ExpectBlocks(st, got);

  // Block 0 whole, block 1 with one layer, then an aborted end counting one block.
  std::vector<uint8_t> aborted = st.Frames(0, 5);
  const auto e = EncodeEnd({1, KvWireEndStatus::kAborted}).Flatten();
  aborted.insert(aborted.end(), e.begin(), e.end());
  KvWireDecoder a;
  ASSERT_TRUE(a.Feed(aborted).ok()) << a.status().ToString();
  ASSERT_TRUE(a.Finish().ok());
  const auto kept = a.TakeBlocks();
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].index, 0u);
}

// Layer frames of many layers, as a sender makes them: blocks 0-3 whole, one after another, in
// one frame (cached blocks), blocks 6, 5, 4 layer by layer in a frame per layer (a step's
// blocks); received by scatter reads of any size straight into the blocks.
TEST(KvWire, LayerFramesScatterIntoTheBlocks) {
  const KvWireShape shape = TestShape();
  const uint32_t kBlocks = 7;
  std::vector<std::vector<uint8_t>> pool(kBlocks * shape.num_chunks);
  for (size_t i = 0; i < pool.size(); ++i) {
    pool[i].resize(shape.chunk_bytes);
    for (size_t j = 0; j < pool[i].size(); ++j) pool[i][j] = static_cast<uint8_t>(i * 13 + j);
  }
  auto ref = [&](uint32_t b, uint32_t slot) {
    return KvWireLayerRef{b, slot, BlockHash{b + 1u, 99}, pool[b * shape.num_chunks + 2 * slot],
                          pool[b * shape.num_chunks + 2 * slot + 1]};
  };
  std::vector<uint8_t> bytes = EncodeHeader({shape, "runs", kBlocks})->Flatten();
  auto append = [&](const std::vector<KvWireLayerRef>& layers) {
    auto f = EncodeLayers(shape, 0, layers);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ASSERT_EQ(f->body.size(), 2 * layers.size());
    EXPECT_EQ(f->body[0].data(), layers[0].k.data());  // borrowed
    const auto flat = f->Flatten();
    bytes.insert(bytes.end(), flat.begin(), flat.end());
  };
  std::vector<KvWireLayerRef> whole;
  for (uint32_t b = 0; b < 4; ++b) {
    for (uint32_t slot = 0; slot < shape.layers_per_block; ++slot) whole.push_back(ref(b, slot));
  }
  append(whole);
  for (uint32_t slot = 0; slot < shape.layers_per_block; ++slot) {
    append({ref(6, slot), ref(5, slot), ref(4, slot)});
  }
  const auto end = EncodeEnd({kBlocks, KvWireEndStatus::kComplete}).Flatten();
  bytes.insert(bytes.end(), end.begin(), end.end());

  for (size_t piece : {size_t{1}, size_t{5}, size_t{40}, size_t{333}, bytes.size()}) {
    for (size_t max_spans : {size_t{1}, size_t{2}, size_t{64}}) {
      KvWireDecoder d;
      std::vector<KvWireBlock> got;
      size_t at = 0;
      std::vector<std::span<uint8_t>> spans(max_spans);
      while (!d.done()) {
        const size_t k = d.NextBuffers(spans);
        ASSERT_GT(k, 0u);
        size_t n = 0;  // a scatter read of at most `piece` bytes
        for (size_t i = 0; i < k && n < piece && at + n < bytes.size(); ++i) {
          const size_t m = std::min({spans[i].size(), piece - n, bytes.size() - at - n});
          std::memcpy(spans[i].data(), bytes.data() + at + n, m);
          n += m;
          if (m < spans[i].size()) break;
        }
        ASSERT_GT(n, 0u);
        ASSERT_TRUE(d.Commit(n).ok()) << d.status().ToString();
        at += n;
        for (auto& b : d.TakeBlocks()) got.push_back(std::move(b));
      }
      ASSERT_EQ(at, bytes.size());
      ASSERT_TRUE(d.Finish().ok());
      EXPECT_EQ(d.layers_decoded(), kBlocks * shape.layers_per_block);
      ASSERT_EQ(got.size(), kBlocks);
      for (const KvWireBlock& b : got) {
        EXPECT_EQ(b.hash, (BlockHash{b.index + 1u, 99}));
        for (uint32_t c = 0; c < shape.num_chunks; ++c) {
          EXPECT_EQ(0, std::memcmp(b.chunk(c).data(), pool[b.index * shape.num_chunks + c].data(),
                                   shape.chunk_bytes))
              << piece << " " << b.index << " " << c;
        }
      }
    }
  }
}

TEST(KvWire, LayerFrameErrors) {
  const KvWireShape shape = TestShape();
  const std::vector<uint8_t> c(shape.chunk_bytes, 3);
  const std::vector<uint8_t> header = EncodeHeader({shape, "r", 4})->Flatten();
  auto with = [&](std::vector<KvWireLayerRef> layers) {
    std::vector<uint8_t> b = header;
    const auto f = EncodeLayers(shape, 0, layers)->Flatten();
    b.insert(b.end(), f.begin(), f.end());
    return b;
  };
  ExpectError(with({{1, 0, {2, 0}, c, c}, {1, 0, {2, 0}, c, c}}),
              "layer slot 0 of block 1 (group 0) twice");
  ExpectError(with({{1, 0, {2, 0}, c, c}, {1, 1, {3, 0}, c, c}}),
              "a layer of block 1 (group 0) under another hash");
  ExpectError(with({{0, 0, {1, 0}, c, c}, {9, 0, {1, 0}, c, c}}),
              "block index 9 beyond the 4 announced");
  // The count field disagreeing with the frame's size (resealed, so the count is what fails).
  std::vector<uint8_t> bad = with({{0, 0, {1, 0}, c, c}, {1, 0, {2, 0}, c, c}});
  const size_t frame = header.size();
  bad[frame + kKvWireFrameHeadBytes] = 3;
  const size_t body = bad.size() - frame - kKvWireChecksumBytes;
  const uint64_t h = KvWireFrameChecksum(std::span(bad).subspan(frame, body));
  std::memcpy(bad.data() + frame + body, &h, 8);
  ExpectError(bad, "a layer frame counting 3 layers in the space of 2");
  KvWireLimits one;
  one.max_run_entries = 1;
  ExpectError(with({{0, 0, {1, 0}, c, c}, {1, 0, {2, 0}, c, c}}), "at most 1 layers", one);
  EXPECT_FALSE(EncodeLayers(shape, 0, {}).ok());
  const std::vector<uint8_t> short_chunk(shape.chunk_bytes - 1);
  const KvWireLayerRef wrong{0, 0, {}, c, short_chunk};
  EXPECT_FALSE(EncodeLayers(shape, 0, std::span(&wrong, 1)).ok());
  const KvWireLayerRef bad_slot{0, shape.layers_per_block, {}, c, c};
  EXPECT_FALSE(EncodeLayers(shape, 0, std::span(&bad_slot, 1)).ok());
}

TEST(KvWire, CompatibilityNamesTheField) {
  KvWireShape a = TestShape(), b = TestShape();
  EXPECT_TRUE(CheckCompatible(a, b).ok());
  b.dtype = 8;
  EXPECT_EQ(CheckCompatible(a, b).message(), "KV transfer: dtype differs (sender 1, receiver 8)");
  b = TestShape();
  b.model_id.lo ^= 1;
  EXPECT_NE(CheckCompatible(a, b).message().find("another model"), std::string::npos);
}

TEST(KvWire, AckRoundTripAndCorruption) {
  const auto f = EncodeAck({7, 0}).Flatten();
  ASSERT_EQ(f.size(), kKvWireAckFrameBytes);
  auto a = DecodeAck(f);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->num_blocks, 7u);
  for (size_t i = 0; i < f.size(); ++i) {
    auto bad = f;
    bad[i] ^= 1;
    EXPECT_FALSE(DecodeAck(bad).ok()) << i;
  }
  EXPECT_FALSE(DecodeAck(std::span(f).first(10)).ok());
  EXPECT_FALSE(DecodeAck(EncodeEnd({}).Flatten()).ok());
}

TEST(KvWire, GatherFrameBorrowsTheChunks) {
  const KvWireShape s = TestShape();
  std::vector<std::vector<uint8_t>> cs(s.num_chunks, std::vector<uint8_t>(s.chunk_bytes, 5));
  std::vector<std::span<const uint8_t>> spans(cs.begin(), cs.end());
  auto f = EncodeBlockLayers(s, 0, 0, {1, 2}, spans);
  ASSERT_TRUE(f.ok());
  ASSERT_EQ(f->size(), s.layers_per_block);
  for (uint32_t l = 0; l < s.layers_per_block; ++l) {
    const KvWireFrame& fl = (*f)[l];
    ASSERT_EQ(fl.body.size(), 2u);
    EXPECT_EQ(fl.body[0].data(), cs[2 * l].data());  // no copy
    EXPECT_EQ(fl.body[1].data(), cs[2 * l + 1].data());
    EXPECT_EQ(fl.size(), kKvWireFrameHeadBytes + kKvWireRunFixedBytes + kKvWireRunEntryBytes +
                             2 * s.chunk_bytes + kKvWireChecksumBytes);
  }
}

TEST(KvWire, ChunkChecksumsFromTheCallerMakeTheSameFrame) {
  // The checksum of a layer frame takes each chunk as its XXH3-64: values the caller computed
  // where the KV was written give the very frame the encoder makes from the bytes; a wrong one
  // is a checksum mismatch at the receiver.
  const KvWireShape shape = TestShape();
  std::vector<std::vector<uint8_t>> cs;
  std::vector<KvWireLayerRef> layers;  // every layer of block 0
  for (uint32_t c = 0; c < shape.num_chunks; ++c) {
    cs.emplace_back(shape.chunk_bytes, static_cast<uint8_t>(c * 9));
  }
  for (uint32_t l = 0; l < shape.layers_per_block; ++l) {
    layers.push_back({0, l, {1, 0}, cs[2 * l], cs[2 * l + 1]});
  }
  const std::vector<uint8_t> computed = EncodeLayers(shape, 0, layers)->Flatten();
  const size_t before_trailer = computed.size() - kKvWireChecksumBytes;
  uint64_t trailer = 0;
  std::memcpy(&trailer, computed.data() + before_trailer, 8);
  EXPECT_EQ(KvWireFrameChecksum(std::span(computed).first(before_trailer)), trailer);
  for (size_t i = 0; i < layers.size(); ++i) {
    layers[i].digests = {KvWireChunkDigest(cs[2 * i]), KvWireChunkDigest(cs[2 * i + 1])};
    layers[i].has_digests = true;
  }
  EXPECT_EQ(EncodeLayers(shape, 0, layers)->Flatten(), computed);

  const std::vector<uint8_t> header = EncodeHeader({shape, "r", 1})->Flatten();
  auto stream = [&](const std::vector<uint8_t>& frame) {
    std::vector<uint8_t> b = header;
    b.insert(b.end(), frame.begin(), frame.end());
    const auto end = EncodeEnd({1, KvWireEndStatus::kComplete}).Flatten();
    b.insert(b.end(), end.begin(), end.end());
    return b;
  };
  EXPECT_TRUE(DecodeAll(stream(computed)).ok());
  layers[1].digests[0] ^= 1;  // a value that is not the chunk's
  ExpectError(stream(EncodeLayers(shape, 0, layers)->Flatten()), "layer frame checksum mismatch");
}

}  // namespace
}  // namespace tachyon::kv
