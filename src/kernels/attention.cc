// Paged attention: KV dtypes, scalar reference, scalar tile kernel, run-time dispatch and
// the threaded batch driver.
#include "kernels/attention.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <string>

#include "kernels/attention_tile.h"
#include "kernels/matmul.h"
#include "tensor/quant_blocks.h"

namespace tachyon::kernels {

namespace {

GgmlType KvGgmlType(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF16:
      return GgmlType::kF16;
    case KvDtype::kBf16:
      return GgmlType::kBF16;
    case KvDtype::kQ8_0:
      return GgmlType::kQ8_0;
    case KvDtype::kQ4_0:
      return GgmlType::kQ4_0;
    case KvDtype::kQ4_1:
      return GgmlType::kQ4_1;
    case KvDtype::kF32:
      break;
  }
  return GgmlType::kF32;
}

// The scalar policy of the tile kernel (see attention_tile.h).
struct ScalarIsa {
  static const float* LoadRow(KvDtype dtype, const uint8_t* src, float* buf, int64_t n) {
    if (dtype == KvDtype::kF32) return reinterpret_cast<const float*>(src);
    LoadKvRowReference(dtype, src, buf, n);
    return buf;
  }
  static void Scores(const float* q, const float* const* rows, int64_t n_rows, int64_t hd,
                     float scale, float* s) {
    for (int64_t j = 0; j < n_rows; ++j) {
      float dot = 0;
      for (int64_t d = 0; d < hd; ++d) dot += q[d] * rows[j][d];
      s[j] = dot * scale;
    }
  }
  static void Scores2(const float* q0, const float* q1, const float* const* rows, int64_t n_rows,
                      int64_t hd, float scale, float* s0, float* s1) {
    Scores(q0, rows, n_rows, hd, scale, s0);
    Scores(q1, rows, n_rows, hd, scale, s1);
  }
  static float Max(const float* s, int64_t n) {
    float mx = s[0];
    for (int64_t j = 1; j < n; ++j) mx = std::max(mx, s[j]);
    return mx;
  }
  static float ExpSub(float* s, int64_t n, float m) {
    float sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += (s[j] = std::exp(s[j] - m));
    return sum;
  }
  static void Scale(float* y, float a, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] *= a;
  }
  static void Accumulate(const float* p, const float* const* rows, int64_t n_rows, float* acc,
                         int64_t hd) {
    for (int64_t j = 0; j < n_rows; ++j) {
      for (int64_t d = 0; d < hd; ++d) acc[d] += p[j] * rows[j][d];
    }
  }
};

}  // namespace

const char* KvDtypeName(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF32:
      return "f32";
    case KvDtype::kF16:
      return "f16";
    case KvDtype::kBf16:
      return "bf16";
    case KvDtype::kQ8_0:
      return "q8_0";
    case KvDtype::kQ4_0:
      return "q4_0";
    case KvDtype::kQ4_1:
      return "q4_1";
  }
  return "?";
}

Result<KvDtype> ParseKvDtype(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (KvDtype d : {KvDtype::kF32, KvDtype::kF16, KvDtype::kBf16, KvDtype::kQ8_0, KvDtype::kQ4_0,
                    KvDtype::kQ4_1}) {
    if (lower == KvDtypeName(d)) return d;
  }
  return InvalidArgument("unknown KV cache dtype '" + std::string(name) +
                         "' (choices: f16, bf16, q8_0, q4_0, q4_1, f32)");
}

bool KvDtypeIsBlocked(KvDtype dtype) {
  return dtype == KvDtype::kQ8_0 || dtype == KvDtype::kQ4_0 || dtype == KvDtype::kQ4_1;
}

Status CheckKvDtype(KvDtype dtype, int64_t head_dim) {
  if (head_dim <= 0) return InvalidArgument("KV cache: head_dim must be > 0");
  if (KvDtypeIsBlocked(dtype) && head_dim % kQK4 != 0) {
    return InvalidArgument(std::string("KV cache dtype ") + KvDtypeName(dtype) +
                           " needs head_dim to be a multiple of 32, got " +
                           std::to_string(head_dim) + " (use f16, bf16 or f32)");
  }
  return OkStatus();
}

size_t KvRowBytes(KvDtype dtype, int64_t n) {
  switch (dtype) {
    case KvDtype::kF32:
      return static_cast<size_t>(n) * 4;
    case KvDtype::kF16:
    case KvDtype::kBf16:
      return static_cast<size_t>(n) * 2;
    case KvDtype::kQ8_0:
      return static_cast<size_t>(n / kQK4) * sizeof(BlockQ8_0);
    case KvDtype::kQ4_0:
      return static_cast<size_t>(n / kQK4) * sizeof(BlockQ4_0);
    case KvDtype::kQ4_1:
      return static_cast<size_t>(n / kQK4) * sizeof(BlockQ4_1);
  }
  return 0;
}

void StoreKvRowReference(KvDtype dtype, const float* x, void* dst, int64_t n) {
  QuantizeRow(KvGgmlType(dtype), x, dst, n);
}

void LoadKvRowReference(KvDtype dtype, const void* src, float* out, int64_t n) {
  DequantizeRow(KvGgmlType(dtype), src, out, n);
}

void StoreKvRow(KvDtype dtype, const float* x, void* dst, int64_t n) {
  static const SimdLevel level = BestSimdLevel();
  switch (level) {
    case SimdLevel::kAmx:
    case SimdLevel::kAvx512:
      return internal::StoreKvRowAvx512(dtype, x, dst, n);
    case SimdLevel::kAvx2:
      return internal::StoreKvRowAvx2(dtype, x, dst, n);
    case SimdLevel::kScalar:
      break;
  }
  StoreKvRowReference(dtype, x, dst, n);
}

void AttendGroupReference(const PagedKv& kv, const GroupJob& job, int64_t n_group, float scale,
                          float* scores) {
  const int64_t n_ctx = job.ctx_end - job.ctx_begin;
  const int64_t hd = kv.head_dim;
  std::vector<float> row(static_cast<size_t>(hd));
  for (int64_t g = 0; g < n_group; ++g) {
    const float* q = job.q + g * hd;
    float* s = scores + g * n_ctx;
    float max_s = -INFINITY;
    for (int64_t t = 0; t < n_ctx; ++t) {
      LoadKvRowReference(kv.dtype, kv.Row(kv.k, job.block_table, job.ctx_begin + t, job.kv_head),
                         row.data(), hd);
      double dot = 0;
      for (int64_t d = 0; d < hd; ++d) dot += static_cast<double>(q[d]) * row[d];
      s[t] = static_cast<float>(dot) * scale;
      max_s = std::max(max_s, s[t]);
    }
    double sum = 0;
    for (int64_t t = 0; t < n_ctx; ++t) {
      s[t] = std::exp(s[t] - max_s);
      sum += s[t];
    }
    std::vector<double> out(static_cast<size_t>(hd), 0.0);
    for (int64_t t = 0; t < n_ctx; ++t) {
      LoadKvRowReference(kv.dtype, kv.Row(kv.v, job.block_table, job.ctx_begin + t, job.kv_head),
                         row.data(), hd);
      for (int64_t d = 0; d < hd; ++d) out[d] += static_cast<double>(s[t]) * row[d];
    }
    for (int64_t d = 0; d < hd; ++d) job.out[g * hd + d] = static_cast<float>(out[d] / sum);
  }
}

size_t TileScratchFloats(const PagedKv& kv, const TileJob& job, const TileParams& p) {
  // Enough for every variant: the AMX layout needs padding and bf16 panels.
  return std::max(internal::TileScratchFloatsFor(kv.head_dim, job.n_rows, p.n_group),
                  internal::AmxScratchLayout(kv.head_dim, job.n_rows, p.n_group).total);
}

namespace {

std::atomic<int64_t>& AmxMinQueries() {
  static std::atomic<int64_t> n{internal::kAmxMinQueries};
  return n;
}

}  // namespace

bool UseAmxTile(int64_t head_dim, int64_t n_query_vectors) {
  return head_dim >= internal::kAmxMinHeadDim &&
         n_query_vectors >= AmxMinQueries().load(std::memory_order_relaxed);
}

void SetAttentionAmxMinQueries(int64_t n) {
  AmxMinQueries().store(n > 0 ? n : internal::kAmxMinQueries, std::memory_order_relaxed);
}

void AttendTileAmxOrAvx512(const PagedKv& kv, const TileJob& job, const TileParams& p,
                           float* scratch) {
  if (UseAmxTile(kv.head_dim, job.n_rows * p.n_group)) return AttendTileAmx(kv, job, p, scratch);
  AttendTileAvx512(kv, job, p, scratch);
}

void AttendTileScalar(const PagedKv& kv, const TileJob& job, const TileParams& p, float* scratch) {
  internal::AttendTileImpl<ScalarIsa>(kv, job, p, scratch);
}

AttendTileFn AttendTileAtLevel(SimdLevel level) {
  switch (std::min(level, BestSimdLevel())) {
    case SimdLevel::kAmx:
      return AttendTileAmxOrAvx512;
    case SimdLevel::kAvx512:
      return AttendTileAvx512;
    case SimdLevel::kAvx2:
      return AttendTileAvx2;
    case SimdLevel::kScalar:
      break;
  }
  return AttendTileScalar;
}

void AttentionScratch::EnsureThreads(int n) {
  if (static_cast<int>(per_thread_.size()) < n) per_thread_.resize(n);
}

float* AttentionScratch::Get(int tid, size_t n) {
  std::vector<float>& buf = per_thread_[tid];
  if (buf.size() < n) buf.resize(std::max(n, buf.size() * 2));
  return buf.data();
}

namespace {

// Query rows per tile job: about 64 query vectors (rows x heads of the group) share each
// converted KV tile, and the tile's accumulators stay in L1/L2. The AMX kernel takes
// kAmxQueryTile: its tile multiplies are cheap next to converting K and V into tiles.
int64_t RowsPerTile(SimdLevel level, int64_t head_dim, int64_t n_group) {
  const int64_t vectors = level == SimdLevel::kAmx && UseAmxTile(head_dim, internal::kAmxQueryTile)
                              ? internal::kAmxQueryTile
                              : 64;
  return std::max<int64_t>(1, vectors / n_group);
}

}  // namespace

void PagedAttentionAtLevel(SimdLevel level, const PagedKv& kv, const AttentionParams& params,
                           const AttentionSeq* seqs, int64_t n_seqs, ThreadPool* pool,
                           AttentionScratch* scratch) {
  level = std::min(level, BestSimdLevel());
  const int64_t n_kv = kv.n_kv_heads;
  TileParams tp;
  tp.n_group = params.n_heads / n_kv;
  tp.scale = params.scale;
  tp.sliding_window = params.sliding_window;
  // Index 1: the sequences marked decode_rows, which never take the AMX kernel.
  const SimdLevel decode_level = std::min(level, SimdLevel::kAvx512);
  const AttendTileFn attend_of[2] = {AttendTileAtLevel(level), AttendTileAtLevel(decode_level)};
  const int64_t rows_of[2] = {RowsPerTile(level, kv.head_dim, tp.n_group),
                              RowsPerTile(decode_level, kv.head_dim, tp.n_group)};
  const int64_t hd = kv.head_dim;
  const int n_parts = pool ? pool->num_threads() : 1;
  scratch->EnsureThreads(n_parts);
  // Work items: (sequence, query tile, kv head), numbered sequence by sequence; the tiles of
  // a sequence are numbered from its last (longest context) to its first, so the expensive
  // items are claimed first and the cheap ones fill the gaps at the end.
  auto seq_items = [&](int64_t s) {
    const int64_t rows_per_tile = rows_of[seqs[s].decode_rows];
    return (seqs[s].n_tokens + rows_per_tile - 1) / rows_per_tile * n_kv;
  };
  int64_t n_items = 0;
  for (int64_t s = 0; s < n_seqs; ++s) n_items += seq_items(s);
  std::atomic<int64_t> next{0};
  auto worker = [&](int part, int /*n*/) {
    int64_t seq = 0, seq_first_item = 0;
    for (;;) {
      const int64_t item = next.fetch_add(1, std::memory_order_relaxed);
      if (item >= n_items) return;
      // Items are handed out in increasing order, so the sequence only moves forward.
      while (item >= seq_first_item + seq_items(seq)) {
        seq_first_item += seq_items(seq);
        ++seq;
      }
      const AttentionSeq& sq = seqs[seq];
      const int64_t rows_per_tile = rows_of[sq.decode_rows];
      const int64_t local = item - seq_first_item;
      const int64_t n_tiles = (sq.n_tokens + rows_per_tile - 1) / rows_per_tile;
      const int64_t tile = n_tiles - 1 - local / n_kv, kv_head = local % n_kv;
      TileJob job;
      job.block_table = sq.block_table;
      job.kv_head = kv_head;
      const int64_t row0 = tile * rows_per_tile;
      job.pos_start = sq.pos_start + row0;
      job.n_rows = std::min(rows_per_tile, sq.n_tokens - row0);
      job.row_stride = params.n_heads * hd;
      const int64_t offset = row0 * job.row_stride + kv_head * tp.n_group * hd;
      job.q = sq.q + offset;
      job.out = sq.out + offset;
      attend_of[sq.decode_rows](kv, job, tp, scratch->Get(part, TileScratchFloats(kv, job, tp)));
    }
  };
  if (pool && n_items > 1) {
    pool->Run(worker);
  } else {
    worker(0, 1);
  }
}

void PagedAttention(const PagedKv& kv, const AttentionParams& params, const AttentionSeq* seqs,
                    int64_t n_seqs, ThreadPool* pool, AttentionScratch* scratch) {
  PagedAttentionAtLevel(BestSimdLevel(), kv, params, seqs, n_seqs, pool, scratch);
}

}  // namespace tachyon::kernels
