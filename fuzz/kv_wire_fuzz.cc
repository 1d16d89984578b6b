// libFuzzer target: KvWireDecoder on arbitrary bytes, fed in pieces whose sizes come from the
// input's first byte, under small limits. Whatever arrives, the decoder must end in blocks
// whose every chunk lies inside its payload, or in an error; every byte of an accepted chunk is
// read so ASan sees any gap. Fed in pieces and fed byte by byte, a stream must get the same
// verdict. With the first byte's top bit set, the target first rewrites every frame's checksum
// to the right one, so the fuzzer reaches the checks behind it (sizes, order, limits).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "kv/kv_wire.h"

namespace {

using tachyon::kv::KvWireBlock;
using tachyon::kv::KvWireDecoder;
using tachyon::kv::KvWireLimits;

size_t Touch(const KvWireDecoder& d, const std::vector<KvWireBlock>& blocks) {
  size_t sink = 0;
  for (const KvWireBlock& b : blocks) {
    if (b.index >= d.header().num_blocks) __builtin_trap();
    if (b.group >= d.header().shape.n_groups()) __builtin_trap();
    for (uint32_t c = 0; c < d.header().shape.num_chunks; ++c) {
      const auto chunk = b.chunk(c);
      if (chunk.data() + chunk.size() > b.bytes.data() + b.bytes.size()) __builtin_trap();
      for (uint8_t x : chunk) sink += x;
    }
  }
  return sink;
}

// Walks the bytes as frames (head, payload_bytes as the head says, checksum) and writes each
// complete frame's correct checksum.
void Reseal(std::vector<uint8_t>* b) {
  using namespace tachyon::kv;
  size_t at = 0;
  while (at + kKvWireFrameHeadBytes + kKvWireChecksumBytes <= b->size()) {
    uint64_t len = 0;
    std::memcpy(&len, b->data() + at + 8, 8);
    const size_t room = b->size() - at - kKvWireFrameHeadBytes - kKvWireChecksumBytes;
    if (len > room) return;
    const size_t body = kKvWireFrameHeadBytes + len;
    const uint64_t h = KvWireFrameChecksum(std::span(b->data() + at, body));
    std::memcpy(b->data() + at + body, &h, 8);
    at += body + kKvWireChecksumBytes;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  KvWireLimits limits;
  limits.max_block_bytes = 1 << 16;
  limits.max_blocks = 64;
  limits.max_chunks = 64;
  const size_t piece = 1 + (data[0] & 0x7f) % 97;
  std::vector<uint8_t> bytes(data + 1, data + size);
  if (data[0] & 0x80) Reseal(&bytes);
  std::span<const uint8_t> in(bytes);

  KvWireDecoder pieces(limits);
  volatile size_t sink = 0;
  bool ok = true;
  for (size_t at = 0; at < in.size() && ok; at += piece) {
    ok = pieces.Feed(in.subspan(at, std::min(piece, in.size() - at))).ok();
    sink = sink + Touch(pieces, pieces.TakeBlocks());
  }
  if (ok && !pieces.Finish().ok() && pieces.done()) __builtin_trap();
  if (!ok && pieces.status().message().rfind("KV transfer", 0) != 0) __builtin_trap();

  KvWireDecoder bytewise(limits);
  bool ok2 = true;
  for (size_t at = 0; at < in.size() && ok2; ++at) {
    auto into = bytewise.NextBuffer();
    if (into.empty()) {
      ok2 = bytewise.Feed(in.subspan(at, 1)).ok();  // bytes after the end: must be refused
      if (ok2) __builtin_trap();
      break;
    }
    into[0] = in[at];
    ok2 = bytewise.Commit(1).ok();
    sink = sink + Touch(bytewise, bytewise.TakeBlocks());
  }
  if (ok != ok2 || pieces.done() != bytewise.done()) __builtin_trap();
  (void)sink;
  return 0;
}
