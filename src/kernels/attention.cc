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

namespace {

std::atomic<int64_t>& KeySplit() {
  static std::atomic<int64_t> n{internal::kDecodeKeySplit};
  return n;
}

}  // namespace

void SetAttentionKeySplit(int64_t n) {
  KeySplit().store(
      n > 0 ? (n + internal::kDecodeKvTile - 1) / internal::kDecodeKvTile * internal::kDecodeKvTile
            : internal::kDecodeKeySplit,
      std::memory_order_relaxed);
}

namespace {
std::atomic<bool>& HeadSlices() {
  static std::atomic<bool> on{true};
  return on;
}
}  // namespace

void SetAttentionHeadSlices(bool on) {
  HeadSlices().store(on, std::memory_order_relaxed);
}

namespace internal {
int64_t DecodeKeySplit() {
  return KeySplit().load(std::memory_order_relaxed);
}
}  // namespace internal

// PagedAttention's work list: one item per job (sequence, query tile, KV head, slice of the KV
// head's query heads), or per key part of a job spread over the threads; per spread job its
// parts' states and how many are still running.
struct AttentionScratch::Plan {
  struct Item {
    int64_t seq, tile, kv_head;
    int64_t head0, heads;  // the job's query heads: [head0, head0 + heads) of the KV head's group
    int64_t part;          // key part (its first key is part * part_keys), or kAllParts
    int64_t split_job;     // index into `split_jobs` (one part of a spread job), or -1
  };
  struct SplitJob {
    int64_t n_parts, first_part, nq;
    size_t offset;  // of its parts' states in `states`: acc [n_parts][nq][hd], ml [n_parts][nq][2]
  };
  std::vector<Item> items;
  std::vector<SplitJob> split_jobs;
  std::vector<float> states;
  std::unique_ptr<std::atomic<int64_t>[]> pending;  // per split job: parts not yet done
  size_t pending_size = 0;
};

namespace {
// Item::part of a job whose parts all run on the thread that claims it.
constexpr int64_t kAllParts = -1;
}  // namespace

AttentionScratch::AttentionScratch() : plan_(std::make_unique<Plan>()) {}
AttentionScratch::~AttentionScratch() = default;
AttentionScratch::AttentionScratch(AttentionScratch&&) noexcept = default;
AttentionScratch& AttentionScratch::operator=(AttentionScratch&&) noexcept = default;

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

using AttendPartFn = void (*)(const PagedKv&, const TileJob&, const TileParams&,
                              const internal::DecodePart&, float*);

// The decode kernel that AttendTileAtLevel(level) runs a job of nq query vectors on, or null
// when it takes another kernel (scalar, the tile kernels, AMX).
AttendPartFn DecodePartKernel(SimdLevel level, int64_t head_dim, int64_t nq) {
  switch (level) {
    case SimdLevel::kAmx:
      if (UseAmxTile(head_dim, nq)) return nullptr;
      [[fallthrough]];
    case SimdLevel::kAvx512:
      return internal::Avx512DecodeTakes(nq) ? internal::AttendDecodePartAvx512 : nullptr;
    case SimdLevel::kAvx2:
      return internal::Avx2DecodeTakes(head_dim, nq) ? internal::AttendDecodePartAvx2 : nullptr;
    case SimdLevel::kScalar:
      break;
  }
  return nullptr;
}

// Floats of the states of n_parts parts of a job of nq query vectors (SplitJob::offset).
size_t PartStateFloats(int64_t n_parts, int64_t nq, int64_t hd) {
  return static_cast<size_t>(n_parts * nq * (hd + 2));
}

// Merges the parts of a split job (their states at `states`) into its rows' outputs: per query
// vector, the parts that saw a key (l > 0) in order, out = sum_c w_c acc_c / sum_c w_c l_c with
// w_c = exp(m_c - max m). A vector that saw one part gets acc * (1 / l), the whole-job kernel's
// bits.
void MergeParts(const AttentionScratch::Plan::SplitJob& sp, const float* states, int64_t hd,
                int64_t n_group, float* out, int64_t row_stride) {
  const float* acc = states;
  const float* ml = acc + sp.n_parts * sp.nq * hd;
  for (int64_t i = 0; i < sp.nq; ++i) {
    float* o = out + (i / n_group) * row_stride + (i % n_group) * hd;
    float mx = -INFINITY;
    int64_t valid = 0, only = 0;
    for (int64_t c = 0; c < sp.n_parts; ++c) {
      const float* st = ml + (c * sp.nq + i) * 2;
      if (st[1] > 0.0f) {
        mx = std::max(mx, st[0]);
        ++valid;
        only = c;
      }
    }
    if (valid == 1) {
      const float inv = 1.0f / ml[(only * sp.nq + i) * 2 + 1];
      const float* a = acc + (only * sp.nq + i) * hd;
      for (int64_t d = 0; d < hd; ++d) o[d] = a[d] * inv;
      continue;
    }
    float sum = 0.0f;
    std::fill(o, o + hd, 0.0f);
    for (int64_t c = 0; c < sp.n_parts; ++c) {
      const float* st = ml + (c * sp.nq + i) * 2;
      if (!(st[1] > 0.0f)) continue;
      const float w = std::exp(st[0] - mx);
      sum += w * st[1];
      const float* a = acc + (c * sp.nq + i) * hd;
      for (int64_t d = 0; d < hd; ++d) o[d] += w * a[d];
    }
    const float inv = 1.0f / sum;
    for (int64_t d = 0; d < hd; ++d) o[d] *= inv;
  }
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
  const SimdLevel level_of[2] = {level, std::min(level, SimdLevel::kAvx512)};
  const AttendTileFn attend_of[2] = {AttendTileAtLevel(level_of[0]),
                                     AttendTileAtLevel(level_of[1])};
  const int64_t rows_of[2] = {RowsPerTile(level_of[0], kv.head_dim, tp.n_group),
                              RowsPerTile(level_of[1], kv.head_dim, tp.n_group)};
  const int64_t hd = kv.head_dim, window = params.sliding_window;
  const int64_t part_keys = internal::DecodeKeySplit();
  const int n_parts = pool ? pool->num_threads() : 1;
  scratch->EnsureThreads(n_parts);
  AttentionScratch::Plan& plan = scratch->plan();
  // The key parts [p0, p1) of a job of rows [first, end): the parts from the one holding the first
  // row's first visible key to the one holding the last row.
  auto part_range = [&](int64_t first, int64_t end) {
    const int64_t seen = window > 0 ? std::max<int64_t>(0, first + 1 - window) : 0;
    return std::pair<int64_t, int64_t>{seen / part_keys, (end - 1) / part_keys + 1};
  };
  // Work items, sequence by sequence; the tiles of a sequence from its last (longest context)
  // to its first, so the expensive items are claimed first and the cheap ones fill the gaps at
  // the end. A job on a decode kernel whose keys cross a multiple of `part_keys` runs as parts:
  // spread as one item per part when the step has few jobs (kSpreadJobsPerThread per thread;
  // their states in `plan.states`, at most kMaxSpreadFloats), else all on the thread that claims
  // the job (its states in that thread's buffer). Either way the same parts are merged in the
  // same order, so a row's bits do not depend on which.
  //
  // Head slices: when a step's items do not divide evenly over the threads and it has few of
  // them (fewer than threads, or fewer than two per thread and no key parts: a lone sequence's
  // decode below part_keys, Gemma 3's one KV head or SmolLM2's 3 on 2 threads), the last
  // `remainder` decode-kernel jobs are each split into `slices` jobs over parts of their group
  // of query heads, enough for every thread to take one. Each slice reads its job's K and V
  // again, so only those jobs: a thread that would have run two whole jobs runs a whole one and
  // a slice. The decode kernel computes each query vector alone (slot groups share loads, not
  // sums), so a row's bits do not depend on the slicing either.
  constexpr int64_t kSpreadJobsPerThread = 16;
  constexpr size_t kMaxSpreadFloats = size_t{4} << 20;
  int64_t n_jobs = 0, n_items_unsliced = 0;
  for (int64_t s = 0; s < n_seqs; ++s) {
    const int64_t rows_per_tile = rows_of[seqs[s].decode_rows];
    for (int64_t row0 = 0; row0 < seqs[s].n_tokens; row0 += rows_per_tile) {
      const int64_t n_rows = std::min(rows_per_tile, seqs[s].n_tokens - row0);
      const auto [p0, p1] = part_range(seqs[s].pos_start + row0, seqs[s].pos_start + row0 + n_rows);
      n_jobs += n_kv;
      n_items_unsliced += n_kv * (p1 - p0);
    }
  }
  const bool spread = n_parts > 1 && n_jobs < kSpreadJobsPerThread * n_parts;
  const bool few_items =
      n_items_unsliced < n_parts ||
      (n_items_unsliced < 2 * n_parts && n_items_unsliced == n_jobs);  // (no key parts)
  // With fewer items than threads, remainder >= n_jobs: every job is sliced.
  const int64_t remainder = spread && few_items && HeadSlices().load(std::memory_order_relaxed)
                                ? n_items_unsliced % n_parts
                                : 0;
  const int64_t slices =
      remainder > 0 ? std::clamp<int64_t>((n_parts + remainder - 1) / remainder, 1, tp.n_group) : 1;
  int64_t job_index = 0;  // jobs [n_jobs - remainder, n_jobs) are sliced
  plan.items.clear();
  plan.split_jobs.clear();
  size_t state_floats = 0;
  for (int64_t s = 0; s < n_seqs; ++s) {
    const AttentionSeq& sq = seqs[s];
    const int64_t rows_per_tile = rows_of[sq.decode_rows];
    const int64_t n_tiles = (sq.n_tokens + rows_per_tile - 1) / rows_per_tile;
    for (int64_t tile = n_tiles - 1; tile >= 0; --tile) {
      const int64_t row0 = tile * rows_per_tile;
      const int64_t n_rows = std::min(rows_per_tile, sq.n_tokens - row0);
      const auto [p0, p1] = part_range(sq.pos_start + row0, sq.pos_start + row0 + n_rows);
      // Slices of a decode-kernel job run on that kernel too (fewer query vectors than a job
      // it takes; at the AMX level a job that small is not an AMX job).
      const AttendPartFn decode =
          DecodePartKernel(level_of[sq.decode_rows], hd, n_rows * tp.n_group);
      for (int64_t h = 0; h < n_kv; ++h, ++job_index) {
        const int64_t n_slices = decode != nullptr && job_index >= n_jobs - remainder ? slices : 1;
        for (int64_t k = 0; k < n_slices; ++k) {
          const int64_t head0 = k * tp.n_group / n_slices;
          const int64_t heads = (k + 1) * tp.n_group / n_slices - head0;
          const int64_t nq = n_rows * heads;
          const size_t job_floats = PartStateFloats(p1 - p0, nq, hd);
          if (p1 - p0 == 1 || decode == nullptr) {
            plan.items.push_back({s, tile, h, head0, heads, 0, -1});
          } else if (!spread || state_floats + job_floats > kMaxSpreadFloats) {
            plan.items.push_back({s, tile, h, head0, heads, kAllParts, -1});
          } else {
            const auto index = static_cast<int64_t>(plan.split_jobs.size());
            plan.split_jobs.push_back({p1 - p0, p0, nq, state_floats});
            state_floats += job_floats;
            for (int64_t c = p0; c < p1; ++c) {
              plan.items.push_back({s, tile, h, head0, heads, c, index});
            }
          }
        }
      }
    }
  }
  if (plan.states.size() < state_floats) plan.states.resize(state_floats);
  if (plan.pending_size < plan.split_jobs.size()) {
    plan.pending_size = std::max(plan.split_jobs.size(), 2 * plan.pending_size);
    plan.pending = std::make_unique<std::atomic<int64_t>[]>(plan.pending_size);
  }
  for (size_t j = 0; j < plan.split_jobs.size(); ++j) {
    plan.pending[j].store(plan.split_jobs[j].n_parts, std::memory_order_relaxed);
  }
  const auto n_items = static_cast<int64_t>(plan.items.size());
  std::atomic<int64_t> next{0};
  auto worker = [&](int part, int /*n*/) {
    for (;;) {
      const int64_t index = next.fetch_add(1, std::memory_order_relaxed);
      if (index >= n_items) return;
      const AttentionScratch::Plan::Item& it = plan.items[static_cast<size_t>(index)];
      const AttentionSeq& sq = seqs[it.seq];
      const int64_t rows_per_tile = rows_of[sq.decode_rows];
      TileJob job;
      job.block_table = sq.block_table;
      job.kv_head = it.kv_head;
      const int64_t row0 = it.tile * rows_per_tile;
      job.pos_start = sq.pos_start + row0;
      job.n_rows = std::min(rows_per_tile, sq.n_tokens - row0);
      job.row_stride = params.n_heads * hd;
      const int64_t offset = row0 * job.row_stride + (it.kv_head * tp.n_group + it.head0) * hd;
      job.q = sq.q + offset;
      job.out = sq.out + offset;
      TileParams jp = tp;
      jp.n_group = it.heads;
      if (it.split_job < 0 && it.part != kAllParts) {
        attend_of[sq.decode_rows](kv, job, jp, scratch->Get(part, TileScratchFloats(kv, job, jp)));
        continue;
      }
      // A job run whole here keeps its parts' states after the kernel's scratch.
      const size_t kernel_floats = TileScratchFloats(kv, job, jp);
      const auto [p0, p1] = part_range(job.pos_start, job.pos_start + job.n_rows);
      const int64_t nq = job.n_rows * jp.n_group;
      float* buf = scratch->Get(
          part, kernel_floats + (it.part == kAllParts ? PartStateFloats(p1 - p0, nq, hd) : 0));
      const AttendPartFn kernel = DecodePartKernel(level_of[sq.decode_rows], hd, nq);
      // Part c of a job whose states start at `states`.
      auto run_part = [&](const AttentionScratch::Plan::SplitJob& sp, float* states, int64_t c) {
        internal::DecodePart dp;
        dp.key_lo = c * part_keys;
        dp.key_hi = dp.key_lo + part_keys;
        const int64_t i = c - sp.first_part;
        dp.acc = states + i * sp.nq * hd;
        dp.ml = states + sp.n_parts * sp.nq * hd + i * sp.nq * 2;
        kernel(kv, job, jp, dp, buf);
      };
      if (it.split_job < 0) {  // every part here, then the merge
        const AttentionScratch::Plan::SplitJob sp{p1 - p0, p0, nq, 0};
        float* states = buf + kernel_floats;
        for (int64_t c = p0; c < p1; ++c) run_part(sp, states, c);
        MergeParts(sp, states, hd, jp.n_group, job.out, job.row_stride);
        continue;
      }
      const AttentionScratch::Plan::SplitJob& sp =
          plan.split_jobs[static_cast<size_t>(it.split_job)];
      run_part(sp, plan.states.data() + sp.offset, it.part);
      // The last part to finish merges (acq_rel: it sees every other part's state).
      if (plan.pending[it.split_job].fetch_sub(1, std::memory_order_acq_rel) == 1) {
        MergeParts(sp, plan.states.data() + sp.offset, hd, jp.n_group, job.out, job.row_stride);
      }
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
