// Internal to kernels/: the AMX int8 tile path for packed Q4_0 / Q8_0 (matmul_int8_amx.cc).
#pragma once

#include <cstddef>
#include <cstdint>

#include <span>

#include "kernels/matmul.h"
#include "util/thread_pool.h"

namespace tachyon::kernels::internal {

// AMX int8 path (SimdLevel::kAmx, packed Q4_0 / Q8_0, AmxInt8MinRows() <= m <
// AmxMinRows(type); matmul_int8_amx.cc): one tile multiply per 32-element block on the
// kQ8_32 activation codes against the packed weight codes (Q4_0 made signed per K chunk,
// Q8_0 as packed with its +128 offset subtracted in int32), the int32 block dots scaled and
// summed in f32. Activations are converted once per call (AmxInt8ConvertRows) into: int8
// codes [mp rows][lda bytes] in block order (block b at byte 32 b; rows >= m and bytes past
// the row are 0), then float scales [nb][mp] (block-major; 0 for rows >= m), then int32
// offsets [nb][mp] = 128 * the sum of the block's codes.
struct AmxInt8Act {
  int64_t nb = 0;    // blocks per row (cols / 32)
  int64_t mp = 0;    // rows rounded up to 16
  size_t lda = 0;    // bytes per code row
  size_t bytes = 0;  // whole buffer
};
AmxInt8Act AmxInt8Layout(int64_t cols, int64_t m);
bool AmxInt8Supports(const Weight& w);  // packed Q4_0 / Q8_0
// Writes rows [i0, i1) of the mp-row buffer (i1 <= mp).
void AmxInt8ConvertRows(const float* x, int64_t cols, int64_t m, int64_t i0, int64_t i1,
                        uint8_t* act);
// y[i, 16t + r] for i < m, tiles t in [t0, t1) (rows past w.rows not written). A row's
// results do not depend on m, the tile range or the thread. REQUIRES: HasAmxSet(),
// AmxInt8Supports(w).
void AmxInt8RunTiles(const Weight& w, const uint8_t* act, int64_t m, float* y, int64_t t0,
                     int64_t t1);
// Smallest m that takes the AMX int8 path (TACHYON_AMX_INT8_MIN_M=N overrides; a large N
// disables it).
int64_t AmxInt8MinRows();
// The AMX int8 path itself, whatever m (tests). REQUIRES: HasAmxSet(), AmxInt8Supports(*ws[i]),
// all ws[i]->cols equal.
void MatMulMultiAmxInt8(std::span<const Weight* const> ws, const float* x, int64_t m,
                        std::span<float* const> ys, ThreadPool* pool);

}  // namespace tachyon::kernels::internal
