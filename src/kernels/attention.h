// Paged attention: causal softmax attention of new query tokens over keys/values stored in
// fixed-size KV blocks (the paged KV cache), with grouped-query attention (GQA).
//
// KV layout of one layer (f32): K and V are each [n_blocks, block_size, n_kv_heads, head_dim];
// position p of a sequence lives in block block_table[p / block_size], slot p % block_size.
// Query head h reads KV head h / (n_heads / n_kv_heads).
//
// Three layers of API:
//   AttendGroup*     one query token, the query heads that share one KV head (a "group");
//                    scalar reference and SIMD variants with identical contracts.
//   PagedAttention   every new token of every sequence of a flat batch, threaded over
//                    (token, KV head) work items with the pool; picks the best variant.
#pragma once

#include <cstdint>
#include <vector>

#include "util/thread_pool.h"

namespace tachyon::kernels {

// One layer's KV storage, read-only view.
struct PagedKv {
  const float* k = nullptr;  // [n_blocks, block_size, n_kv_heads, head_dim]
  const float* v = nullptr;  // [n_blocks, block_size, n_kv_heads, head_dim]
  int64_t n_blocks = 0;
  int64_t block_size = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
};

// Arguments of one group job: query heads [kv_head * n_group, (kv_head + 1) * n_group) of
// one token attend to positions [ctx_begin, ctx_end) of the sequence whose blocks are
// `block_table` (covering at least ctx_end positions; ids < kv.n_blocks).
struct GroupJob {
  const int32_t* block_table = nullptr;
  int64_t kv_head = 0;
  int64_t ctx_begin = 0;
  int64_t ctx_end = 0;  // > ctx_begin
  const float* q = nullptr;  // [n_group, head_dim]
  float* out = nullptr;      // [n_group, head_dim]
};

// out[g] = softmax(scale * q[g] · K[ctx]) · V[ctx] for each of the n_group query heads.
// `scores` is scratch of at least n_group * (ctx_end - ctx_begin) floats.
void AttendGroupReference(const PagedKv& kv, const GroupJob& job, int64_t n_group, float scale,
                          float* scores);
void AttendGroupAvx2(const PagedKv& kv, const GroupJob& job, int64_t n_group, float scale,
                     float* scores);
void AttendGroupAvx512(const PagedKv& kv, const GroupJob& job, int64_t n_group, float scale,
                       float* scores);

using AttendGroupFn = void (*)(const PagedKv&, const GroupJob&, int64_t, float, float*);
// The best variant for this CPU (util/cpu_features.h BestSimdLevel()).
AttendGroupFn BestAttendGroup();

// One sequence's part of a flat batch.
struct AttentionSeq {
  const int32_t* block_table = nullptr;  // covers positions [0, pos_start + n_tokens)
  int64_t pos_start = 0;                 // positions [0, pos_start) are already cached
  int64_t n_tokens = 0;                  // new tokens; their K/V must already be stored
  const float* q = nullptr;              // [n_tokens, n_heads, head_dim]
  float* out = nullptr;                  // [n_tokens, n_heads, head_dim]
};

struct AttentionParams {
  int64_t n_heads = 0;          // query heads; a multiple of kv.n_kv_heads
  float scale = 0;              // usually 1 / sqrt(head_dim)
  int64_t sliding_window = 0;   // > 0: token at position p sees only (p - window, p]
};

// Per-thread scratch, grown on demand (never shrunk) so steady-state calls do not allocate.
class AttentionScratch {
 public:
  // Makes room for threads [0, n_threads). Not thread-safe; call before the threads start.
  void EnsureThreads(int n_threads);
  // Thread tid's buffer of at least n floats. Safe from different tids concurrently.
  float* Get(int tid, size_t n);

 private:
  std::vector<std::vector<float>> per_thread_;
};

// Causal attention for every new token of every sequence: token i of a sequence (position
// pos_start + i) sees positions [max(0, pos + 1 - window), pos]. Work is split over `pool`
// (may be null). `scratch` must hold at least pool->num_threads() slots; it is grown here.
// Thread-safety: one call at a time per scratch.
void PagedAttention(const PagedKv& kv, const AttentionParams& params, const AttentionSeq* seqs,
                    int64_t n_seqs, ThreadPool* pool, AttentionScratch* scratch);

}  // namespace tachyon::kernels
