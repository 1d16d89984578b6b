// XXH3, 64-bit (the checksum of the KV wire frames, the disk KV tier and the packed-weight
// cache), computed with the widest SIMD this CPU has: the library's build is plain x86-64
// (SSE2), which checksums a few GB/s; the AVX2 and AVX-512 builds of the same algorithm are
// 2-3.5x faster. The value does not depend on the path: every path computes XXH3 as specified
// (util_test checks them against the library on every length class).
// Thread-safety: the functions are pure; a Xxh3Stream is used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tachyon {

// XXH3_64bits(data, size) with seed 0.
uint64_t Xxh3(const void* data, size_t size);

// The same value over bytes that arrive in pieces: Update(a), Update(b) == Xxh3(a ++ b).
class Xxh3Stream {
 public:
  Xxh3Stream();
  void Update(const void* data, size_t size);
  uint64_t Digest() const;  // of everything so far; Update may go on after it

 private:
  alignas(64) unsigned char state_[576];  // XXH3_state_t (checked in xxh3.cc)
};

// For tests: the value through each build this CPU can run (0 = plain, 1 = AVX2, 2 = AVX-512);
// false when the CPU lacks that level.
bool Xxh3With(int level, const void* data, size_t size, uint64_t* out);

}  // namespace tachyon
