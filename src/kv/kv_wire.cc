#include "kv/kv_wire.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "util/xxh3.h"

namespace tachyon::kv {
namespace {

constexpr size_t kHeaderFixedBytes = 60;  // shape (56) + request id length (4)
constexpr size_t kEndBytes = 8;
constexpr size_t kAckBytes = 8;

void Put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
void Put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void Put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint16_t Get16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
uint32_t Get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t Get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// A frame's head followed by `fixed` payload bytes (filled by the caller), for a payload of
// payload_bytes in all.
std::vector<uint8_t> FrameHead(KvWireType type, uint64_t payload_bytes, size_t fixed) {
  std::vector<uint8_t> h(kKvWireFrameHeadBytes + fixed);
  Put32(h.data(), kKvWireMagic);
  Put16(h.data() + 4, kKvWireVersion);
  Put16(h.data() + 6, static_cast<uint16_t>(type));
  Put64(h.data() + 8, payload_bytes);
  return h;
}

// A frame without chunks: the checksum of all its bytes.
void Seal(KvWireFrame* f) {
  Xxh3Stream st;
  st.Update(f->head.data(), f->head.size());
  for (const auto& b : f->body) st.Update(b.data(), b.size());
  Put64(f->trailer.data(), st.Digest());
}

// Feeds a chunk's value into a layer frame's checksum.
void UpdateWithDigest(Xxh3Stream* st, uint64_t digest) {
  uint8_t b[8];
  Put64(b, digest);
  st->Update(b, sizeof(b));
}

void PutShape(uint8_t* p, const KvWireShape& s) {
  Put64(p, s.model_id.lo);
  Put64(p + 8, s.model_id.hi);
  Put32(p + 16, s.dtype);
  Put32(p + 20, s.block_size);
  Put32(p + 24, s.n_layers);
  Put32(p + 28, s.layers_per_block);
  Put32(p + 32, s.n_kv_heads);
  Put32(p + 36, s.head_dim);
  Put32(p + 40, s.num_chunks);
  Put64(p + 44, s.chunk_bytes);
}

KvWireShape GetShape(const uint8_t* p) {
  KvWireShape s;
  s.model_id = {Get64(p), Get64(p + 8)};
  s.dtype = Get32(p + 16);
  s.block_size = Get32(p + 20);
  s.n_layers = Get32(p + 24);
  s.layers_per_block = Get32(p + 28);
  s.n_kv_heads = Get32(p + 32);
  s.head_dim = Get32(p + 36);
  s.num_chunks = Get32(p + 40);
  s.chunk_bytes = Get64(p + 44);
  return s;
}

std::string Name(uint16_t type) {
  switch (static_cast<KvWireType>(type)) {
    case KvWireType::kHeader:
      return "header";
    case KvWireType::kLayer:
      return "layer";
    case KvWireType::kEnd:
      return "end";
    case KvWireType::kAck:
      return "ack";
  }
  return "type " + std::to_string(type);
}

Status Bad(std::string_view what) {
  return DataLoss("KV transfer: " + std::string(what));
}

}  // namespace

size_t KvWireFrame::size() const {
  size_t n = head.size() + trailer.size();
  for (const auto& b : body) n += b.size();
  return n;
}

std::vector<uint8_t> KvWireFrame::Flatten() const {
  std::vector<uint8_t> out(head);
  for (const auto& b : body) out.insert(out.end(), b.begin(), b.end());
  out.insert(out.end(), trailer.begin(), trailer.end());
  return out;
}

Status ValidateShape(const KvWireShape& s, const KvWireLimits& limits) {
  if (s.block_size == 0 || s.n_layers == 0 || s.layers_per_block == 0 || s.n_kv_heads == 0 ||
      s.head_dim == 0 || s.chunk_bytes == 0) {
    return InvalidArgument("KV transfer: a zero size in the KV shape");
  }
  if (s.n_layers % s.layers_per_block != 0) {
    return InvalidArgument("KV transfer: n_layers " + std::to_string(s.n_layers) +
                           " is not a multiple of layers_per_block " +
                           std::to_string(s.layers_per_block));
  }
  if (uint64_t{s.num_chunks} != 2 * uint64_t{s.layers_per_block}) {
    return InvalidArgument("KV transfer: num_chunks " + std::to_string(s.num_chunks) +
                           " is not 2 x layers_per_block");
  }
  if (s.num_chunks > limits.max_chunks) {
    return InvalidArgument("KV transfer: num_chunks " + std::to_string(s.num_chunks) +
                           " exceeds the limit " + std::to_string(limits.max_chunks));
  }
  if (s.chunk_bytes > limits.max_block_bytes / s.num_chunks) {
    return InvalidArgument("KV transfer: a block of " + std::to_string(s.num_chunks) + " x " +
                           std::to_string(s.chunk_bytes) + " bytes exceeds the limit " +
                           std::to_string(limits.max_block_bytes));
  }
  return OkStatus();
}

Status CheckCompatible(const KvWireShape& got, const KvWireShape& mine) {
  auto differs = [](const char* field, uint64_t a, uint64_t b) {
    return InvalidArgument(std::string("KV transfer: ") + field + " differs (sender " +
                           std::to_string(a) + ", receiver " + std::to_string(b) + ")");
  };
  if (!(got.model_id == mine.model_id)) {
    return InvalidArgument("KV transfer: the sender serves another model (model identity differs)");
  }
  if (got.dtype != mine.dtype) return differs("dtype", got.dtype, mine.dtype);
  if (got.block_size != mine.block_size)
    return differs("block_size", got.block_size, mine.block_size);
  if (got.n_layers != mine.n_layers) return differs("n_layers", got.n_layers, mine.n_layers);
  if (got.layers_per_block != mine.layers_per_block) {
    return differs("layers_per_block", got.layers_per_block, mine.layers_per_block);
  }
  if (got.n_kv_heads != mine.n_kv_heads)
    return differs("n_kv_heads", got.n_kv_heads, mine.n_kv_heads);
  if (got.head_dim != mine.head_dim) return differs("head_dim", got.head_dim, mine.head_dim);
  if (got.num_chunks != mine.num_chunks)
    return differs("num_chunks", got.num_chunks, mine.num_chunks);
  if (got.chunk_bytes != mine.chunk_bytes) {
    return differs("chunk_bytes", got.chunk_bytes, mine.chunk_bytes);
  }
  return OkStatus();
}

Result<KvWireFrame> EncodeHeader(const KvWireHeader& h) {
  RETURN_IF_ERROR(ValidateShape(h.shape));
  if (h.request_id.size() > kKvWireMaxRequestId) {
    return InvalidArgument("KV transfer: request id longer than " +
                           std::to_string(kKvWireMaxRequestId) + " bytes");
  }
  KvWireFrame f;
  f.head = FrameHead(KvWireType::kHeader, kHeaderFixedBytes + h.request_id.size(),
                     kHeaderFixedBytes + h.request_id.size());
  uint8_t* p = f.head.data() + kKvWireFrameHeadBytes;
  PutShape(p, h.shape);
  Put32(p + 52, h.num_blocks);
  Put32(p + 56, static_cast<uint32_t>(h.request_id.size()));
  std::memcpy(p + kHeaderFixedBytes, h.request_id.data(), h.request_id.size());
  Seal(&f);
  return f;
}

Result<KvWireFrame> EncodeLayers(const KvWireShape& shape, uint32_t group,
                                 std::span<const KvWireLayerRef> layers) {
  if (layers.empty() || layers.size() > KvWireLimits{}.max_run_entries) {
    return InvalidArgument("KV transfer: a layer frame of " + std::to_string(layers.size()) +
                           " layers");
  }
  const size_t n = layers.size();
  KvWireFrame f;
  f.head = FrameHead(KvWireType::kLayer,
                     kKvWireRunFixedBytes + n * (kKvWireRunEntryBytes + 2 * shape.chunk_bytes),
                     kKvWireRunFixedBytes + n * kKvWireRunEntryBytes);
  uint8_t* p = f.head.data() + kKvWireFrameHeadBytes;
  Put32(p, static_cast<uint32_t>(n));
  Put32(p + 4, group);
  Put32(p + 8, 0);
  Put32(p + 12, 0);
  f.body.reserve(2 * n);
  // The chunks' values as they enter the checksum, 8 bytes each, in frame order.
  std::vector<uint8_t> digests(2 * n * 8);
  for (size_t i = 0; i < n; ++i) {
    const KvWireLayerRef& l = layers[i];
    if (l.slot >= shape.layers_per_block) {
      return InvalidArgument("KV transfer: layer slot " + std::to_string(l.slot) + " of a " +
                             std::to_string(shape.layers_per_block) + "-layer block");
    }
    if (l.k.size() != shape.chunk_bytes || l.v.size() != shape.chunk_bytes) {
      return InvalidArgument("KV transfer: a chunk of " +
                             std::to_string(l.k.size() != shape.chunk_bytes ? l.k.size()
                                                                             : l.v.size()) +
                             " bytes, expected " + std::to_string(shape.chunk_bytes));
    }
    uint8_t* e = p + kKvWireRunFixedBytes + i * kKvWireRunEntryBytes;
    Put32(e, l.index);
    Put32(e + 4, l.slot);
    Put64(e + 8, l.hash.lo);
    Put64(e + 16, l.hash.hi);
    f.body.push_back(l.k);
    f.body.push_back(l.v);
    Put64(&digests[16 * i], l.has_digests ? l.digests[0] : KvWireChunkDigest(l.k));
    Put64(&digests[16 * i + 8], l.has_digests ? l.digests[1] : KvWireChunkDigest(l.v));
  }
  Xxh3Stream st;
  st.Update(f.head.data(), f.head.size());
  st.Update(digests.data(), digests.size());
  Put64(f.trailer.data(), st.Digest());
  return f;
}

Result<KvWireFrame> EncodeLayer(const KvWireShape& shape, uint32_t index, uint32_t group,
                                const BlockHash& hash, uint32_t slot,
                                std::span<const std::span<const uint8_t>> kv) {
  if (kv.size() != 2) {
    return InvalidArgument("KV transfer: a layer needs 2 chunks (K, V), got " +
                           std::to_string(kv.size()));
  }
  const KvWireLayerRef one{index, slot, hash, kv[0], kv[1]};
  return EncodeLayers(shape, group, std::span(&one, 1));
}

Result<std::vector<KvWireFrame>> EncodeBlockLayers(
    const KvWireShape& shape, uint32_t index, uint32_t group, const BlockHash& hash,
    std::span<const std::span<const uint8_t>> chunks) {
  if (chunks.size() != shape.num_chunks) {
    return InvalidArgument("KV transfer: a block needs " + std::to_string(shape.num_chunks) +
                           " chunks, got " + std::to_string(chunks.size()));
  }
  std::vector<KvWireFrame> frames;
  for (uint32_t slot = 0; slot < shape.layers_per_block; ++slot) {
    auto f = EncodeLayer(shape, index, group, hash, slot, chunks.subspan(2 * slot, 2));
    if (!f.ok()) return f.status();
    frames.push_back(std::move(*f));
  }
  return frames;
}

KvWireFrame EncodeEnd(const KvWireEnd& end) {
  KvWireFrame f;
  f.head = FrameHead(KvWireType::kEnd, kEndBytes, kEndBytes);
  Put32(f.head.data() + kKvWireFrameHeadBytes, end.num_blocks);
  Put32(f.head.data() + kKvWireFrameHeadBytes + 4, static_cast<uint32_t>(end.status));
  Seal(&f);
  return f;
}

KvWireFrame EncodeAck(const KvWireAck& ack) {
  KvWireFrame f;
  f.head = FrameHead(KvWireType::kAck, kAckBytes, kAckBytes);
  Put32(f.head.data() + kKvWireFrameHeadBytes, ack.num_blocks);
  Put32(f.head.data() + kKvWireFrameHeadBytes + 4, ack.status);
  Seal(&f);
  return f;
}

namespace {

// Checks a frame head: magic, version, a known type, and the payload size of that type.
Status CheckHead(const uint8_t* h, uint16_t* type, uint64_t* payload) {
  if (Get32(h) != kKvWireMagic) return Bad("bad magic (not a KV transfer frame)");
  const uint16_t version = Get16(h + 4);
  if (version != kKvWireVersion) {
    return Bad("unsupported wire version " + std::to_string(version) + " (this side speaks " +
               std::to_string(kKvWireVersion) + ")");
  }
  *type = Get16(h + 6);
  *payload = Get64(h + 8);
  if (*type < 1 || *type > 4) return Bad("unknown frame " + Name(*type));
  return OkStatus();
}

bool ChecksumMatches(std::span<const uint8_t> frame_before_trailer, const uint8_t* trailer) {
  return KvWireFrameChecksum(frame_before_trailer) == Get64(trailer);
}

}  // namespace

uint64_t KvWireFrameChecksum(std::span<const uint8_t> f) {
  const size_t fixed = kKvWireFrameHeadBytes + kKvWireRunFixedBytes;
  if (f.size() >= fixed && Get16(f.data() + 6) == static_cast<uint16_t>(KvWireType::kLayer)) {
    const uint64_t n = Get32(f.data() + kKvWireFrameHeadBytes);
    const uint64_t rest = f.size() - fixed;
    if (n > 0 && n <= rest / kKvWireRunEntryBytes &&
        (rest - n * kKvWireRunEntryBytes) % (2 * n) == 0) {
      const size_t chunks_at = fixed + n * kKvWireRunEntryBytes;
      const size_t chunk = (f.size() - chunks_at) / (2 * n);
      Xxh3Stream st;
      st.Update(f.data(), chunks_at);
      for (uint64_t c = 0; c < 2 * n; ++c) {
        UpdateWithDigest(&st, KvWireChunkDigest(f.subspan(chunks_at + c * chunk, chunk)));
      }
      return st.Digest();
    }
  }
  return Xxh3(f.data(), f.size());
}

Result<KvWireAck> DecodeAck(std::span<const uint8_t> frame) {
  if (frame.size() != kKvWireAckFrameBytes) {
    return Bad("an ack frame of " + std::to_string(frame.size()) + " bytes, expected " +
               std::to_string(kKvWireAckFrameBytes));
  }
  uint16_t type = 0;
  uint64_t payload = 0;
  RETURN_IF_ERROR(CheckHead(frame.data(), &type, &payload));
  if (type != static_cast<uint16_t>(KvWireType::kAck) || payload != kAckBytes) {
    return Bad("expected an ack frame, got " + Name(type));
  }
  const auto body = frame.subspan(kKvWireFrameHeadBytes, kAckBytes);
  if (!ChecksumMatches(frame.first(kKvWireFrameHeadBytes + kAckBytes),
                       frame.data() + kKvWireFrameHeadBytes + kAckBytes)) {
    return Bad("ack frame checksum mismatch");
  }
  return KvWireAck{Get32(body.data()), Get32(body.data() + 4)};
}

Status KvWireDecoder::Fail(Status s) {
  status_ = std::move(s);
  return status_;
}

std::span<uint8_t> KvWireDecoder::NextBuffer() {
  if (!status_.ok() || done_) return {};
  switch (phase_) {
    case Phase::kHead:
      return std::span<uint8_t>(head_).subspan(have_);
    case Phase::kPayload:
      return std::span<uint8_t>(payload_).subspan(have_);
    case Phase::kChunks:
      return places_[place_].subspan(have_);
    case Phase::kTrailer:
      return std::span<uint8_t>(trailer_).subspan(have_);
  }
  return {};
}

size_t KvWireDecoder::NextBuffers(std::span<std::span<uint8_t>> out) {
  if (out.empty()) return 0;
  out[0] = NextBuffer();
  if (out[0].empty()) return 0;
  size_t n = 1;
  if (phase_ != Phase::kChunks) return n;
  for (size_t p = place_ + 1; p < places_.size() && n < out.size(); ++p) out[n++] = places_[p];
  if (n < out.size()) out[n++] = std::span<uint8_t>(trailer_);
  return n;
}

Status KvWireDecoder::Commit(size_t n) {
  if (!status_.ok()) return status_;
  while (n > 0) {
    const std::span<uint8_t> into = NextBuffer();
    if (into.empty()) return Fail(Internal("KV transfer: committed past the frame"));
    const size_t k = std::min(n, into.size());
    if (phase_ == Phase::kChunks) {
      HashChunkBytes(into.first(k));
    } else if (phase_ != Phase::kTrailer) {
      checksum_.Update(into.data(), k);
    }
    have_ += k;
    bytes_consumed_ += k;
    n -= k;
    RETURN_IF_ERROR(Advance());
  }
  return status_;
}

void KvWireDecoder::HashChunkBytes(std::span<const uint8_t> bytes) {
  const uint64_t chunk = header_.shape.chunk_bytes;
  while (!bytes.empty()) {
    if (chunk_have_ == 0 && bytes.size() >= chunk) {  // a whole chunk at once
      UpdateWithDigest(&checksum_, KvWireChunkDigest(bytes.first(chunk)));
      bytes = bytes.subspan(chunk);
      continue;
    }
    if (chunk_have_ == 0) chunk_sum_ = Xxh3Stream();
    const size_t k = std::min<uint64_t>(bytes.size(), chunk - chunk_have_);
    chunk_sum_.Update(bytes.data(), k);
    chunk_have_ += k;
    bytes = bytes.subspan(k);
    if (chunk_have_ == chunk) {
      UpdateWithDigest(&checksum_, chunk_sum_.Digest());
      chunk_have_ = 0;
    }
  }
}

Status KvWireDecoder::Advance() {
  while (status_.ok() && !done_ && NextBuffer().empty()) {
    switch (phase_) {
      case Phase::kHead:
        RETURN_IF_ERROR(OnFrameHead());
        break;
      case Phase::kPayload:
        if (type_ == KvWireType::kLayer) {
          if (Status s = OnLayerBlocks(); !s.ok()) return Fail(s);
          phase_ = Phase::kChunks;
          place_ = 0;
        } else {
          phase_ = Phase::kTrailer;
        }
        have_ = 0;
        break;
      case Phase::kChunks:
        have_ = 0;
        if (++place_ == places_.size()) phase_ = Phase::kTrailer;
        break;
      case Phase::kTrailer:
        RETURN_IF_ERROR(OnFrameComplete());
        break;
    }
  }
  return status_;
}

Status KvWireDecoder::Feed(std::span<const uint8_t> bytes) {
  while (!bytes.empty()) {
    if (!status_.ok()) return status_;
    if (done_) return Fail(InvalidArgument("KV transfer: bytes after the end frame"));
    const std::span<uint8_t> into = NextBuffer();
    const size_t n = std::min(into.size(), bytes.size());
    std::memcpy(into.data(), bytes.data(), n);
    RETURN_IF_ERROR(Commit(n));
    bytes = bytes.subspan(n);
  }
  return status_;
}

Status KvWireDecoder::Finish() const {
  if (!status_.ok()) return status_;
  if (done_) return OkStatus();
  return Bad("the stream ended before the end frame (truncated after " +
             std::to_string(bytes_consumed_) + " bytes, " + std::to_string(blocks_decoded_) +
             " blocks)");
}

Status KvWireDecoder::OnFrameHead() {
  uint16_t type = 0;
  uint64_t payload = 0;
  if (Status s = CheckHead(head_.data(), &type, &payload); !s.ok()) return Fail(s);
  type_ = static_cast<KvWireType>(type);
  uint64_t expected = 0;
  switch (type_) {
    case KvWireType::kHeader:
      if (has_header_) return Fail(Bad("a second header frame"));
      if (payload < kHeaderFixedBytes || payload > kHeaderFixedBytes + kKvWireMaxRequestId) {
        return Fail(Bad("a header frame of " + std::to_string(payload) + " payload bytes"));
      }
      expected = payload;
      break;
    case KvWireType::kLayer: {
      if (!has_header_) return Fail(Bad("a layer frame before the header"));
      // The fixed part, then per layer an entry and two chunks.
      const uint64_t per_layer = kKvWireRunEntryBytes + 2 * header_.shape.chunk_bytes;
      const uint64_t layers =
          payload > kKvWireRunFixedBytes ? (payload - kKvWireRunFixedBytes) / per_layer : 0;
      if (layers == 0 || layers > limits_.max_run_entries ||
          payload != kKvWireRunFixedBytes + layers * per_layer) {
        return Fail(Bad("a layer frame of " + std::to_string(payload) +
                        " payload bytes, expected " + std::to_string(kKvWireRunFixedBytes) +
                        " + a multiple of " + std::to_string(per_layer) + " (at most " +
                        std::to_string(limits_.max_run_entries) + " layers)"));
      }
      run_entries_ = static_cast<uint32_t>(layers);
      expected = payload;
      payload = kKvWireRunFixedBytes + layers * kKvWireRunEntryBytes;  // before the chunks
      break;
    }
    case KvWireType::kEnd:
      if (!has_header_) return Fail(Bad("an end frame before the header"));
      expected = kEndBytes;
      break;
    case KvWireType::kAck:
      return Fail(Bad("an ack frame inside a transfer"));
  }
  if (type_ != KvWireType::kLayer && payload != expected) {
    return Fail(Bad("a " + Name(type) + " frame of " + std::to_string(payload) +
                    " payload bytes, expected " + std::to_string(expected)));
  }
  payload_.resize(payload);  // keeps its capacity across frames: no allocation per frame
  phase_ = payload ? Phase::kPayload : Phase::kTrailer;
  have_ = 0;
  return OkStatus();
}

Status KvWireDecoder::OnFrameComplete() {
  if (checksum_.Digest() != Get64(trailer_.data())) {
    return Fail(Bad(Name(static_cast<uint16_t>(type_)) + " frame checksum mismatch (after " +
                    std::to_string(layers_decoded_) + " layers)"));
  }
  Status s;
  switch (type_) {
    case KvWireType::kHeader:
      s = OnHeader();
      break;
    case KvWireType::kLayer:
      OnLayerVerified();
      break;
    case KvWireType::kEnd:
      s = OnEnd();
      break;
    case KvWireType::kAck:
      s = Internal("KV transfer: ack frame in a transfer");
      break;
  }
  if (!s.ok()) return Fail(s);
  phase_ = Phase::kHead;
  have_ = 0;
  checksum_ = Xxh3Stream();
  return OkStatus();
}

Status KvWireDecoder::OnHeader() {
  const uint8_t* p = payload_.data();
  KvWireHeader h;
  h.shape = GetShape(p);
  h.num_blocks = Get32(p + 52);
  const uint32_t id_bytes = Get32(p + 56);
  if (kHeaderFixedBytes + uint64_t{id_bytes} != payload_.size()) {
    return Bad("header request id of " + std::to_string(id_bytes) + " bytes in a " +
               std::to_string(payload_.size()) + "-byte payload");
  }
  if (Status s = ValidateShape(h.shape, limits_); !s.ok()) return DataLoss(s.message());
  if (h.num_blocks > limits_.max_blocks) {
    return Bad("header announces " + std::to_string(h.num_blocks) + " blocks, the limit is " +
               std::to_string(limits_.max_blocks));
  }
  h.request_id.assign(reinterpret_cast<const char*>(p + kHeaderFixedBytes), id_bytes);
  header_ = std::move(h);
  has_header_ = true;
  return OkStatus();
}

Status KvWireDecoder::OnLayerBlocks() {
  const KvWireShape& shape = header_.shape;
  const uint8_t* p = payload_.data();
  const uint32_t count = Get32(p), group = Get32(p + 4);
  if (count != run_entries_ || Get32(p + 8) != 0 || Get32(p + 12) != 0) {
    return Bad("a layer frame counting " + std::to_string(count) + " layers in the space of " +
               std::to_string(run_entries_));
  }
  if (group >= shape.n_groups()) {
    return Bad("block group " + std::to_string(group) + " of " + std::to_string(shape.n_groups()));
  }
  places_.clear();
  run_keys_.clear();
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t* e = p + kKvWireRunFixedBytes + size_t{i} * kKvWireRunEntryBytes;
    const uint32_t index = Get32(e), slot = Get32(e + 4);
    const BlockHash hash{Get64(e + 8), Get64(e + 16)};
    if (index >= header_.num_blocks) {
      return Bad("block index " + std::to_string(index) + " beyond the " +
                 std::to_string(header_.num_blocks) + " announced");
    }
    if (slot >= shape.layers_per_block) {
      return Bad("layer slot " + std::to_string(slot) + " of a " +
                 std::to_string(shape.layers_per_block) + "-layer block");
    }
    const uint64_t key = (uint64_t{group} << 32) | index;
    auto name = [&] {
      return "block " + std::to_string(index) + " (group " + std::to_string(group) + ")";
    };
    if (complete_.count(key)) {
      return Bad("a layer of " + name() + ", which arrived whole already");
    }
    auto it = partial_.find(key);
    if (it == partial_.end()) {
      if (partial_.size() >= limits_.max_partial_blocks) {
        return Bad("more than " + std::to_string(limits_.max_partial_blocks) +
                   " blocks with layers missing at once");
      }
      if (complete_.size() + partial_.size() >= header_.num_blocks) {
        return Bad("more blocks than the " + std::to_string(header_.num_blocks) + " announced");
      }
      Partial fresh;
      fresh.block.index = index;
      fresh.block.group = group;
      fresh.block.hash = hash;
      fresh.block.chunk_bytes = shape.chunk_bytes;
      const size_t bytes = kKvWireBlockFixedBytes + shape.block_bytes();
      if (buffers_) {
        fresh.block.bytes = buffers_(bytes);
        if (fresh.block.bytes.size() != bytes) {
          return ResourceExhausted(
              "KV transfer: no room for another block in flight (the receiver's budget for "
              "blocks being received is spent)");
        }
      } else {
        fresh.block.bytes.assign(bytes, 0);
      }
      uint8_t* fixed = fresh.block.bytes.data();
      Put32(fixed, index);
      Put32(fixed + 4, group);
      Put64(fixed + 8, hash.lo);
      Put64(fixed + 16, hash.hi);
      fresh.have.assign(shape.layers_per_block, false);
      fresh.missing = shape.layers_per_block;
      it = partial_.emplace(key, std::move(fresh)).first;
    }
    Partial& part = it->second;
    if (!(part.block.hash == hash)) return Bad("a layer of " + name() + " under another hash");
    if (part.have[slot]) {
      return Bad("layer slot " + std::to_string(slot) + " of " + name() + " twice");
    }
    part.have[slot] = true;  // its bytes count once the frame's checksum matched
    uint8_t* at = part.block.bytes.data() + kKvWireBlockFixedBytes + 2 * slot * shape.chunk_bytes;
    if (!places_.empty() && places_.back().data() + places_.back().size() == at) {
      places_.back() = {places_.back().data(), places_.back().size() + 2 * shape.chunk_bytes};
    } else {
      places_.emplace_back(at, 2 * shape.chunk_bytes);
    }
    run_keys_.push_back(key);
  }
  return OkStatus();
}

void KvWireDecoder::OnLayerVerified() {
  for (const uint64_t key : run_keys_) {
    auto it = partial_.find(key);
    ++layers_decoded_;
    if (--it->second.missing == 0) {
      blocks_.push_back(std::move(it->second.block));
      partial_.erase(it);
      complete_.insert(key);
      ++blocks_decoded_;
    }
  }
  places_.clear();
  run_keys_.clear();
}

Status KvWireDecoder::OnEnd() {
  KvWireEnd e;
  e.num_blocks = Get32(payload_.data());
  const uint32_t st = Get32(payload_.data() + 4);
  if (st > 1) return Bad("end frame status " + std::to_string(st));
  e.status = static_cast<KvWireEndStatus>(st);
  if (e.num_blocks != blocks_decoded_) {
    return Bad("end frame counts " + std::to_string(e.num_blocks) + " blocks, " +
               std::to_string(blocks_decoded_) + " arrived");
  }
  if (!partial_.empty()) {
    // An aborted sender may stop between a block's layers: those blocks are dropped.
    if (e.status == KvWireEndStatus::kComplete) {
      const Partial& first = partial_.begin()->second;
      return Bad("block " + std::to_string(first.block.index) + " lacks " +
                 std::to_string(first.missing) + " layers at a complete end frame");
    }
    partial_.clear();
  }
  end_ = e;
  done_ = true;
  return OkStatus();
}

}  // namespace tachyon::kv
