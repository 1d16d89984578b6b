// StreamCopy: memcpy for large copies whose destination is not read again soon (a KV block
// evicted into an offload tier's buffer). Non-temporal stores write whole cache lines to memory
// without first reading the destination's lines in and without evicting the caller's working
// set: on the 2-vCPU Xeon VM a 360 KiB KV block (60 chunks of 6 KiB) copies in ~2/3 of
// memcpy's CPU time with 64-byte stores, ~4/5 with 16-byte ones. The widest stores this CPU
// has (AVX-512, else SSE2); copies under 256 bytes are plain memcpy. Ends with a store fence,
// so once another thread synchronizes with this one (a mutex) it sees the bytes, as after
// memcpy. REQUIRES: the ranges do not overlap.
// Thread-safety: pure.
#pragma once

#include <cstddef>

namespace tachyon {

void StreamCopy(void* dst, const void* src, size_t n);

// For tests: the copy with stores of one width (0 = 16-byte SSE2 stores, 2 = AVX-512); false
// when the CPU lacks that level.
bool StreamCopyWith(int level, void* dst, const void* src, size_t n);

}  // namespace tachyon
