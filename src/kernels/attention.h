// Paged attention: causal softmax attention of new query tokens over keys/values stored in
// fixed-size KV blocks (the paged KV cache), with grouped-query attention (GQA).
//
// KV layout of one layer: K and V are each [n_blocks, n_kv_heads, block_size] rows of
// head_dim elements stored as `dtype` (head-major inside a block, so the rows one KV head
// reads from a block are contiguous) (KvDtype: f32, f16, bf16, or q8_0 = head_dim / 32
// blocks of {f16 scale, 32 x int8}, the GGUF Q8_0 block; q4_0 / q4_1 = head_dim / 32 GGUF
// Q4_0 / Q4_1 blocks). Position p of a sequence lives in
// block block_table[p / block_size], slot p % block_size. Query head h reads KV head
// h / (n_heads / n_kv_heads). K/V are rounded to the dtype once, when written (StoreKvRows).
// The 4-bit dtypes are GGUF blocks too: q4_0 = {f16 d, 16 bytes of nibbles}, x = d (q - 8);
// q4_1 = {f16 d, f16 m, 16 bytes}, x = d q + m; element i < 16 of a block is the low nibble
// of byte i, element 16 + i its high nibble.
//
// Three layers of API:
//   AttendGroupReference  one query token, the query heads that share one KV head (a
//                         "group"), full softmax in double precision: the oracle.
//   AttendTile*           flash-style kernel: a tile of query rows of one sequence x all
//                         heads of one group, streamed over KV tiles with an online softmax
//                         (running max and sum), causal mask and sliding window; no score
//                         matrix is materialised. Decode is a tile of one row, so each KV
//                         row is read (and converted) once for all heads of the group.
//                         Scalar, AVX2 (F16C) and AVX-512 (F16C / BF16) variants, and an
//                         AMX variant (Q·Kᵀ and P·V as bf16 tile multiplies on hi/lo split
//                         operands, near-f32 accuracy) for jobs with enough query vectors.
//   PagedAttention        every new token of every sequence of a flat batch, threaded over
//                         (sequence, KV head, query tile) work items; picks the best variant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "util/cpu_features.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace tachyon::kernels {

// Element type of the KV cache.
enum class KvDtype : uint8_t { kF32, kF16, kBf16, kQ8_0, kQ4_0, kQ4_1 };

// "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1".
const char* KvDtypeName(KvDtype dtype);
// Parses a KvDtypeName (case-insensitive). Errors: InvalidArgument listing the choices.
Result<KvDtype> ParseKvDtype(std::string_view name);
// Whether dtype stores rows as 32-element blocks (q8_0, q4_0, q4_1).
bool KvDtypeIsBlocked(KvDtype dtype);
// InvalidArgument when rows of head_dim elements cannot be stored as dtype (the blocked
// dtypes need a multiple of 32).
Status CheckKvDtype(KvDtype dtype, int64_t head_dim);
// Bytes of one row of n elements. REQUIRES: CheckKvDtype(dtype, n) ok.
size_t KvRowBytes(KvDtype dtype, int64_t n);

// Rounds n floats to dtype into dst (KvRowBytes(dtype, n) bytes). For the blocked dtypes, n
// must be a multiple of 32; each 32 elements get their own scale (and q4_1 its minimum).
// Dispatched to F16C / AVX-512 code (q4_0 / q4_1: the scalar quantizer at every level).
void StoreKvRow(KvDtype dtype, const float* x, void* dst, int64_t n);
// Scalar references of the conversions (the SIMD variants must match them exactly).
void StoreKvRowReference(KvDtype dtype, const float* x, void* dst, int64_t n);
void LoadKvRowReference(KvDtype dtype, const void* src, float* out, int64_t n);

// One layer's KV storage, read-only view.
struct PagedKv {
  const void* k = nullptr;  // [n_blocks, n_kv_heads, block_size] rows of head_dim (dtype)
  const void* v = nullptr;  // same
  KvDtype dtype = KvDtype::kF32;
  int64_t n_blocks = 0;
  int64_t block_size = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;

  size_t row_bytes() const { return KvRowBytes(dtype, head_dim); }
  // Row of K (or V) base for position `pos` of a sequence with `block_table`, KV head h.
  const uint8_t* Row(const void* base, const int32_t* block_table, int64_t pos, int64_t h) const {
    const int64_t block = block_table[pos / block_size];
    const int64_t slot = pos % block_size;
    return static_cast<const uint8_t*>(base) +
           static_cast<size_t>((block * n_kv_heads + h) * block_size + slot) * row_bytes();
  }
};

// Arguments of one group job: query heads [kv_head * n_group, (kv_head + 1) * n_group) of
// one token attend to positions [ctx_begin, ctx_end) of the sequence whose blocks are
// `block_table` (covering at least ctx_end positions; ids < kv.n_blocks).
struct GroupJob {
  const int32_t* block_table = nullptr;
  int64_t kv_head = 0;
  int64_t ctx_begin = 0;
  int64_t ctx_end = 0;       // > ctx_begin
  const float* q = nullptr;  // [n_group, head_dim]
  float* out = nullptr;      // [n_group, head_dim]
};

// out[g] = softmax(scale * q[g] · K[ctx]) · V[ctx] for each of the n_group query heads,
// reading K/V through LoadKvRowReference, accumulating in double. `scores` is scratch of at
// least n_group * (ctx_end - ctx_begin) floats.
void AttendGroupReference(const PagedKv& kv, const GroupJob& job, int64_t n_group, float scale,
                          float* scores);

// One tile job: query rows [0, n_rows) of one sequence (row r at position pos_start + r),
// heads [kv_head * n_group, (kv_head + 1) * n_group) of each row. Row r sees positions
// [max(0, pos + 1 - window), pos] (window 0: all of [0, pos]).
struct TileJob {
  const int32_t* block_table = nullptr;  // covers positions [0, pos_start + n_rows)
  int64_t kv_head = 0;
  int64_t pos_start = 0;
  int64_t n_rows = 0;        // >= 1
  const float* q = nullptr;  // row r, head g at q[r * row_stride + g * head_dim]
  float* out = nullptr;      // same layout as q
  int64_t row_stride = 0;    // floats between rows (n_heads * head_dim)
};

struct TileParams {
  int64_t n_group = 1;         // query heads per KV head
  float scale = 0;             // usually 1 / sqrt(head_dim)
  int64_t sliding_window = 0;  // > 0: position p sees only (p - window, p]
};

// Floats of scratch one AttendTile call needs.
size_t TileScratchFloats(const PagedKv& kv, const TileJob& job, const TileParams& p);

using AttendTileFn = void (*)(const PagedKv&, const TileJob&, const TileParams&, float* scratch);
void AttendTileScalar(const PagedKv& kv, const TileJob& job, const TileParams& p, float* scratch);
void AttendTileAvx2(const PagedKv& kv, const TileJob& job, const TileParams& p, float* scratch);
void AttendTileAvx512(const PagedKv& kv, const TileJob& job, const TileParams& p, float* scratch);
// Q·Kᵀ and P·V as AMX bf16 tile multiplies with f32 accumulation (Q, K, P, V rounded to bf16),
// the online softmax in AVX-512; any head_dim (padded to a multiple of 32 inside).
// REQUIRES: DetectedCpuFeatures().HasAmxSet().
void AttendTileAmx(const PagedKv& kv, const TileJob& job, const TileParams& p, float* scratch);
// AttendTileAmx for jobs with enough query vectors (UseAmxTile), else AttendTileAvx512.
// REQUIRES: DetectedCpuFeatures().HasAmxSet().
void AttendTileAmxOrAvx512(const PagedKv& kv, const TileJob& job, const TileParams& p,
                           float* scratch);
// Whether AttendTileAmxOrAvx512 runs a job of n_query_vectors = n_rows * n_group on AMX.
bool UseAmxTile(int64_t head_dim, int64_t n_query_vectors);
// SetAttentionAmxMinQueries(n), n >= 1, makes n the smallest job (query vectors) UseAmxTile
// accepts (a huge n keeps attention off AMX); 0 restores the default (16). AMX and AVX-512
// results differ in the last bits, so tests that compare a prompt run in chunks with one pass
// put every job on one path. REQUIRES: no attention running on another thread.
void SetAttentionAmxMinQueries(int64_t n);
// SetAttentionKeySplit(n), n a positive multiple of 128, makes PagedAttention split decode-kernel
// jobs into key parts of n keys (docs/attention.md, Key parts); 0 restores the default (512).
// The split changes the rounding of rows that see more than one part, so tests that compare
// runs use one value. REQUIRES: no attention running on another thread.
void SetAttentionKeySplit(int64_t n);
// SetAttentionHeadSlices(false) keeps PagedAttention from splitting jobs over slices of their
// query heads (docs/attention.md, Head slices), for benchmarks that compare; true restores the
// default. Rows are the same bits either way. REQUIRES: no attention running on another thread.
void SetAttentionHeadSlices(bool on);
// The variant for `level`, capped by BestSimdLevel().
AttendTileFn AttendTileAtLevel(SimdLevel level);

// One sequence's part of a flat batch.
struct AttentionSeq {
  const int32_t* block_table = nullptr;  // covers positions [0, pos_start + n_tokens)
  int64_t pos_start = 0;                 // positions [0, pos_start) are already cached
  int64_t n_tokens = 0;                  // new tokens; their K/V must already be stored
  const float* q = nullptr;              // [n_tokens, n_heads, head_dim]
  float* out = nullptr;                  // [n_tokens, n_heads, head_dim]
  // Decode rows (a sequence's tokens past its prompt): at the kAmx level they take the AVX-512
  // tile kernel whatever the job's size, so each row's result does not depend on how many rows
  // the step gives the sequence (the lower levels are batch invariant anyway; see PagedAttention).
  bool decode_rows = false;
};

struct AttentionParams {
  int64_t n_heads = 0;         // query heads; a multiple of kv.n_kv_heads
  float scale = 0;             // usually 1 / sqrt(head_dim)
  int64_t sliding_window = 0;  // > 0: token at position p sees only (p - window, p]
};

// Per-part scratch, grown on demand (never shrunk) so steady-state calls do not allocate, and
// PagedAttention's work list.
class AttentionScratch {
 public:
  AttentionScratch();
  ~AttentionScratch();
  AttentionScratch(AttentionScratch&&) noexcept;
  AttentionScratch& operator=(AttentionScratch&&) noexcept;
  // Makes room for parts [0, n). Not thread-safe; call before the threads start.
  void EnsureThreads(int n);
  // Part tid's buffer of at least n floats. Safe from different tids concurrently.
  float* Get(int tid, size_t n);

  struct Plan;  // attention.cc
  Plan& plan() { return *plan_; }

 private:
  std::vector<std::vector<float>> per_thread_;
  std::unique_ptr<Plan> plan_;
};

// Causal attention for every new token of every sequence: token i of a sequence (position
// pos_start + i) sees positions [max(0, pos + 1 - window), pos]. Work is split over `pool`
// (may be null). Batch invariance: at the scalar, AVX2 and AVX-512 levels, and for the
// sequences marked decode_rows at every level, a row's result is the same bits whatever the
// other rows of the call (the chunk of the prompt it came in, the other sequences); at kAmx the
// other sequences' jobs of at least 16 query vectors (UseAmxTile) take the AMX kernel, whose
// rounding differs (docs/attention.md). Thread-safety: one call at a time per scratch.
void PagedAttention(const PagedKv& kv, const AttentionParams& params, const AttentionSeq* seqs,
                    int64_t n_seqs, ThreadPool* pool, AttentionScratch* scratch);
// Same with the tile kernel of `level` (capped by the CPU), for tests and benchmarks.
void PagedAttentionAtLevel(SimdLevel level, const PagedKv& kv, const AttentionParams& params,
                           const AttentionSeq* seqs, int64_t n_seqs, ThreadPool* pool,
                           AttentionScratch* scratch);

}  // namespace tachyon::kernels
