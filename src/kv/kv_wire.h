// The KV transfer wire format (docs/kv_wire.md): how one request's KV blocks travel from a
// prefill replica to a decode replica, versioned and checksummed frame by frame.
//
// A transfer is a byte stream of frames: one Header, then Layer frames (a run of layers of
// blocks of one layer group: for each, the block's index and hash and the layer's slot, then
// each layer's K and V chunks; the layers of a block in any order, blocks interleaved, so a
// sender can stream layer 0 of a prefill chunk's blocks while later layers still compute), then
// one End; the receiver answers with one Ack frame. Every frame is
//
//   u32 magic "TKVW" | u16 version | u16 type | u64 payload_bytes | payload | u64 checksum
//
// little-endian, the checksum being XXH3-64 of everything before it in the frame, except that
// a layer frame's chunks enter it as their own XXH3-64 values (8 bytes each): so a chunk's value
// can be computed where the KV is written, while it is in cache, and the sender, handed it, never
// reads the chunk before the kernel copies it into the socket (KvWireLayerRef::digests). A layer
// frame's entries name a block (its index and chained prefix hash, kv/block_hash.h) and a
// layer's slot in the block's page; its chunks are, per entry, the raw bytes of
// model::KvCache::BlockChunk(block, 2 * slot) and (block, 2 * slot + 1) in the cache's own
// dtype. Once every slot of a block arrived, the decoder hands the whole block out, so the
// receiver can store it under that hash and a later request with the same prefix finds it.
// Because a layer frame lists its entries before their chunks, a receiver learns where every
// chunk goes before the chunks arrive, and reads them straight into the blocks' buffers
// (NextBuffers: scatter reads, no copy).
//
// The decoder (KvWireDecoder) is incremental (bytes may arrive in any pieces; the checksum is
// computed over them as they arrive, so each byte is read once more, while it is in cache) and
// rejects every
// malformed stream with a DataLoss / InvalidArgument Status that names the problem: truncation
// (Finish before End), a bad magic or version, an unknown frame type, frames out of order,
// sizes that disagree with the header, a checksum mismatch, a layer sent twice or under another
// hash, a block left incomplete by a complete End, limits exceeded. It never allocates more than
// one frame's payload, bounded by KvWireLimits, before the frame is checked, and holds at most
// KvWireLimits::max_partial_blocks blocks whose layers are still arriving.
//
// Thread-safety: pure functions; a decoder is used by one thread at a time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kv/block_hash.h"
#include "util/status.h"
#include "util/xxh3.h"

namespace tachyon::kv {

inline constexpr uint32_t kKvWireMagic = 0x57564B54;  // "TKVW" as bytes on the wire
inline constexpr uint16_t kKvWireVersion = 4;
inline constexpr size_t kKvWireFrameHeadBytes = 16;  // magic, version, type, payload_bytes
inline constexpr size_t kKvWireChecksumBytes = 8;
inline constexpr size_t kKvWireBlockFixedBytes = 24;  // index, group, hash (before the chunks)
inline constexpr size_t kKvWireRunFixedBytes = 16;    // count, group, 0, 0 (layer frame)
inline constexpr size_t kKvWireRunEntryBytes = 24;    // index, slot, hash (one entry)
inline constexpr size_t kKvWireMaxRequestId = 256;

enum class KvWireType : uint16_t { kHeader = 1, kLayer = 2, kEnd = 3, kAck = 4 };

// What must be equal on both sides for the bytes of a block to mean the same KV.
struct KvWireShape {
  BlockHash model_id;  // a 128-bit digest of the model's identity (the caller's choice)
  uint32_t dtype = 0;  // the cache's KvDtype as its integer value
  uint32_t block_size = 0;
  uint32_t n_layers = 0;
  uint32_t layers_per_block = 0;  // layers in one page (model::KvLayout); n_layers divides by it
  uint32_t n_kv_heads = 0;
  uint32_t head_dim = 0;
  uint32_t num_chunks = 0;  // = 2 * layers_per_block
  uint64_t chunk_bytes = 0;
  bool operator==(const KvWireShape&) const = default;
  uint32_t n_groups() const { return layers_per_block ? n_layers / layers_per_block : 0; }
  uint64_t block_bytes() const { return uint64_t{num_chunks} * chunk_bytes; }
};

struct KvWireHeader {
  KvWireShape shape;
  std::string request_id;   // at most kKvWireMaxRequestId bytes
  uint32_t num_blocks = 0;  // blocks whose layers follow: at most this many
};

// One received block (every layer of it arrived): its position, hash and chunk bytes.
struct KvWireBlock {
  uint32_t index = 0;  // the block's position in the request's table (of its group)
  uint32_t group = 0;  // its layer group (0 for the plain layout)
  BlockHash hash;
  std::vector<uint8_t> bytes;  // index, group, hash, then the chunks at kKvWireBlockFixedBytes
  uint64_t chunk_bytes = 0;
  std::span<const uint8_t> chunk(uint32_t c) const {
    return {bytes.data() + kKvWireBlockFixedBytes + c * chunk_bytes, chunk_bytes};
  }
};

enum class KvWireEndStatus : uint32_t { kComplete = 0, kAborted = 1 };

struct KvWireEnd {
  uint32_t num_blocks = 0;  // blocks sent whole (every layer)
  KvWireEndStatus status = KvWireEndStatus::kComplete;
};

// The receiver's answer after the End frame: how many blocks it kept (0..num_blocks).
struct KvWireAck {
  uint32_t num_blocks = 0;
  uint32_t status = 0;  // 0: accepted; otherwise the StatusCode that made it refuse
};

struct KvWireLimits {
  uint64_t max_block_bytes = uint64_t{1} << 30;  // one block's chunks together
  uint32_t max_blocks = 1u << 20;                // header.num_blocks
  uint32_t max_chunks = 4096;                    // shape.num_chunks
  uint32_t max_partial_blocks = 4096;            // blocks with some layers arrived, at once
  uint32_t max_run_entries = 4096;               // layers in one layer frame
};

// A chunk's value in its layer frame's checksum: XXH3-64 (seed 0) of its bytes.
inline uint64_t KvWireChunkDigest(std::span<const uint8_t> chunk) {
  return Xxh3(chunk.data(), chunk.size());
}

// One layer of one block in a layer frame: chunks borrowed (K, V), each shape.chunk_bytes.
struct KvWireLayerRef {
  uint32_t index = 0;  // the block's position in the request's table (of its group)
  uint32_t slot = 0;   // the layer's array in the block's page
  BlockHash hash;      // the block's
  std::span<const uint8_t> k, v;
  // KvWireChunkDigest of k and of v when the caller has them (computed where the KV was
  // written); otherwise (has_digests false) EncodeLayers computes them. A wrong value is a
  // checksum mismatch at the receiver.
  std::array<uint64_t, 2> digests{};
  bool has_digests = false;
};

// One frame ready for gather I/O: `head` and `trailer` owned, `body` borrowed (e.g. pool
// memory; it must stay valid and unchanged until the frame is sent). The wire bytes are
// head, then each body span in order, then trailer.
struct KvWireFrame {
  std::vector<uint8_t> head;
  std::vector<std::span<const uint8_t>> body;
  std::array<uint8_t, kKvWireChecksumBytes> trailer{};
  size_t size() const;
  // The frame's bytes in one buffer (tests, small frames).
  std::vector<uint8_t> Flatten() const;
};

// Checks a shape for internal consistency (positive sizes, num_chunks = 2 * layers_per_block,
// n_layers a multiple of layers_per_block) and against the limits. Errors: InvalidArgument.
Status ValidateShape(const KvWireShape& shape, const KvWireLimits& limits = {});

// The checksum of a whole frame's bytes before its trailer (`frame`: head and payload, as on
// the wire), by the rule above; for a malformed layer frame (a count that does not fit its
// size), XXH3-64 of the bytes. Tests and the fuzz target use it to forge valid frames.
uint64_t KvWireFrameChecksum(std::span<const uint8_t> frame);

// Whether a received header's shape matches this side's: InvalidArgument naming the first field
// that differs (e.g. "KV transfer: dtype differs (sender 1, receiver 8)").
Status CheckCompatible(const KvWireShape& received, const KvWireShape& local);

// Encoders. Errors: InvalidArgument for a header that ValidateShape refuses or a request id too
// long; for layers, a slot not below layers_per_block, no layers or more than
// KvWireLimits{}.max_run_entries, or chunks that are not two spans (K, V) of chunk_bytes each.
// The frame borrows the chunks (gather I/O, no copy).
Result<KvWireFrame> EncodeHeader(const KvWireHeader& header);
// The given layers of blocks of layer group `group`, in order (one frame).
Result<KvWireFrame> EncodeLayers(const KvWireShape& shape, uint32_t group,
                                 std::span<const KvWireLayerRef> layers);
// One layer of one block.
Result<KvWireFrame> EncodeLayer(const KvWireShape& shape, uint32_t index, uint32_t group,
                                const BlockHash& hash, uint32_t slot,
                                std::span<const std::span<const uint8_t>> kv);
// Every layer of one block (num_chunks spans, chunk c as KvCache::BlockChunk), slot 0 first.
Result<std::vector<KvWireFrame>> EncodeBlockLayers(
    const KvWireShape& shape, uint32_t index, uint32_t group, const BlockHash& hash,
    std::span<const std::span<const uint8_t>> chunks);
KvWireFrame EncodeEnd(const KvWireEnd& end);
KvWireFrame EncodeAck(const KvWireAck& ack);

inline constexpr size_t kKvWireAckFrameBytes = kKvWireFrameHeadBytes + 8 + kKvWireChecksumBytes;
// Decodes one whole Ack frame. Errors: DataLoss for a malformed or corrupt frame.
Result<KvWireAck> DecodeAck(std::span<const uint8_t> frame);

// Incremental decoder of one transfer (Header, Layers, End). Receive straight into
// NextBuffer() (or the spans of NextBuffers(), with one scatter read) and Commit() the bytes
// written, or Feed() bytes from elsewhere; then take the decoded blocks. A layer frame's chunks
// are written into their blocks' buffers as they arrive, and count only once the frame's
// checksum matched. After an error every call returns that error.
class KvWireDecoder {
 public:
  explicit KvWireDecoder(const KvWireLimits& limits = {}) : limits_(limits) {}

  // Where a block's buffer (KvWireBlock::bytes) comes from: a vector of the given size whose
  // contents do not matter (every byte is written before the block is handed out), or an empty
  // one when there is no room (the decoder then fails with ResourceExhausted). Default: a
  // fresh zeroed vector.
  using BufferSource = std::function<std::vector<uint8_t>(size_t bytes)>;
  void set_block_buffers(BufferSource source) { buffers_ = std::move(source); }

  // Where the next bytes of the stream go: never empty before done() or an error; never past
  // the current frame's end (so a socket read into it never takes bytes of a later transfer).
  std::span<uint8_t> NextBuffer();
  // The places the next bytes go, in order, into out (at most out.size() of them): NextBuffer()
  // first, then, while a layer frame's chunks arrive, the next blocks' chunk places and the
  // frame's checksum. Never past the current frame's end. Returns how many were written.
  size_t NextBuffers(std::span<std::span<uint8_t>> out);
  // n bytes were written into the places NextBuffers() named, filling them in order.
  // REQUIRES: n <= the bytes NextBuffers() can name (at most the rest of the frame).
  Status Commit(size_t n);
  // Decodes bytes from elsewhere, copied through NextBuffer / Commit. Errors also:
  // InvalidArgument for bytes past End.
  Status Feed(std::span<const uint8_t> bytes);
  // The stream ended: DataLoss unless the End frame was decoded (truncation).
  Status Finish() const;

  bool has_header() const { return has_header_; }
  const KvWireHeader& header() const { return header_; }  // REQUIRES: has_header()
  bool done() const { return done_; }
  const KvWireEnd& end() const { return end_; }                // REQUIRES: done()
  uint32_t blocks_decoded() const { return blocks_decoded_; }  // whole blocks
  uint64_t layers_decoded() const { return layers_decoded_; }  // one layer of one block each
  uint64_t bytes_consumed() const { return bytes_consumed_; }
  // Blocks decoded since the last call, in stream order.
  std::vector<KvWireBlock> TakeBlocks() { return std::exchange(blocks_, {}); }
  const Status& status() const { return status_; }

 private:
  Status Fail(Status s);
  // Moves to the next phase while the current one is complete.
  Status Advance();
  Status OnFrameHead();
  Status OnFrameComplete();
  Status OnHeader();
  // A layer frame's fixed part and entries arrived: checks them, finds each chunk place.
  Status OnLayerBlocks();
  // The frame's checksum matched: its blocks have this layer now.
  void OnLayerVerified();
  // A layer frame's chunk bytes, in order: each whole chunk's digest into checksum_.
  void HashChunkBytes(std::span<const uint8_t> bytes);
  Status OnEnd();

  KvWireLimits limits_;
  BufferSource buffers_;
  // kPayload: a header's or end's payload, or a layer frame's fixed part and block list;
  // kChunks: a layer frame's chunks, straight into the blocks (places_).
  enum class Phase { kHead, kPayload, kChunks, kTrailer } phase_ = Phase::kHead;
  std::array<uint8_t, kKvWireFrameHeadBytes> head_{};
  std::array<uint8_t, kKvWireChecksumBytes> trailer_{};
  std::vector<uint8_t> payload_;
  size_t have_ = 0;  // bytes of the current phase (of places_[place_] in kChunks) received
  Xxh3Stream checksum_;  // of the current frame's bytes so far (a chunk's: its digest)
  Xxh3Stream chunk_sum_;    // of a chunk that arrives in pieces
  uint64_t chunk_have_ = 0;  // its bytes so far
  uint32_t run_entries_ = 0;  // of the current layer frame
  // Where the current layer frame's chunks go (adjacent places merged), and its blocks' keys.
  std::vector<std::span<uint8_t>> places_;
  std::vector<uint64_t> run_keys_;
  size_t place_ = 0;
  KvWireType type_ = KvWireType::kHeader;
  bool has_header_ = false;
  bool done_ = false;
  KvWireHeader header_;
  KvWireEnd end_;
  uint32_t blocks_decoded_ = 0;
  uint64_t layers_decoded_ = 0;
  uint64_t bytes_consumed_ = 0;
  std::vector<KvWireBlock> blocks_;
  // Blocks some of whose layers arrived, by (group << 32 | index); the slots still missing.
  struct Partial {
    KvWireBlock block;
    std::vector<bool> have;  // [layers_per_block]
    uint32_t missing = 0;
  };
  std::map<uint64_t, Partial> partial_;
  std::set<uint64_t> complete_;  // blocks handed out whole
  Status status_;
};

}  // namespace tachyon::kv
