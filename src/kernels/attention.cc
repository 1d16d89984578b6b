// Paged attention: scalar reference, run-time dispatch and the threaded batch driver.
#include "kernels/attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "util/cpu_features.h"

namespace tachyon::kernels {

namespace {

// Row of K or V for position `pos` and KV head `kv_head`.
inline const float* KvRow(const float* base, const PagedKv& kv, const int32_t* block_table,
                          int64_t pos, int64_t kv_head) {
  const int64_t block = block_table[pos / kv.block_size];
  const int64_t slot = pos % kv.block_size;
  return base + ((block * kv.block_size + slot) * kv.n_kv_heads + kv_head) * kv.head_dim;
}

}  // namespace

void AttendGroupReference(const PagedKv& kv, const GroupJob& job, int64_t n_group, float scale,
                          float* scores) {
  const int64_t n_ctx = job.ctx_end - job.ctx_begin;
  const int64_t hd = kv.head_dim;
  for (int64_t g = 0; g < n_group; ++g) {
    const float* q = job.q + g * hd;
    float* s = scores + g * n_ctx;
    float max_s = -INFINITY;
    for (int64_t t = 0; t < n_ctx; ++t) {
      const float* k = KvRow(kv.k, kv, job.block_table, job.ctx_begin + t, job.kv_head);
      double dot = 0;
      for (int64_t d = 0; d < hd; ++d) dot += static_cast<double>(q[d]) * k[d];
      s[t] = static_cast<float>(dot) * scale;
      max_s = std::max(max_s, s[t]);
    }
    double sum = 0;
    for (int64_t t = 0; t < n_ctx; ++t) {
      s[t] = std::exp(s[t] - max_s);
      sum += s[t];
    }
    const float inv = static_cast<float>(1.0 / sum);
    float* out = job.out + g * hd;
    std::fill(out, out + hd, 0.0f);
    for (int64_t t = 0; t < n_ctx; ++t) {
      const float* v = KvRow(kv.v, kv, job.block_table, job.ctx_begin + t, job.kv_head);
      const float w = s[t] * inv;
      for (int64_t d = 0; d < hd; ++d) out[d] += w * v[d];
    }
  }
}

AttendGroupFn BestAttendGroup() {
  switch (BestSimdLevel()) {
    case SimdLevel::kAvx512:
      return AttendGroupAvx512;
    case SimdLevel::kAvx2:
      return AttendGroupAvx2;
    case SimdLevel::kScalar:
      break;
  }
  return AttendGroupReference;
}

void AttentionScratch::EnsureThreads(int n_threads) {
  if (static_cast<int>(per_thread_.size()) < n_threads) per_thread_.resize(n_threads);
}

float* AttentionScratch::Get(int tid, size_t n) {
  std::vector<float>& buf = per_thread_[tid];
  if (buf.size() < n) buf.resize(std::max(n, buf.size() * 2));
  return buf.data();
}

void PagedAttention(const PagedKv& kv, const AttentionParams& params, const AttentionSeq* seqs,
                    int64_t n_seqs, ThreadPool* pool, AttentionScratch* scratch) {
  static const AttendGroupFn attend = BestAttendGroup();
  const int64_t n_kv = kv.n_kv_heads;
  const int64_t n_group = params.n_heads / n_kv;
  const int64_t hd = kv.head_dim;
  const int n_threads = pool ? pool->num_threads() : 1;
  scratch->EnsureThreads(n_threads);
  // Work items: (sequence, token, kv head), numbered sequence by sequence.
  int64_t n_items = 0;
  for (int64_t s = 0; s < n_seqs; ++s) n_items += seqs[s].n_tokens * n_kv;

  std::atomic<int64_t> next{0};
  auto worker = [&](int tid, int /*nt*/) {
    int64_t seq = 0, seq_first_item = 0;
    for (;;) {
      const int64_t item = next.fetch_add(1, std::memory_order_relaxed);
      if (item >= n_items) return;
      // Items are handed out in increasing order, so the sequence only moves forward.
      while (item >= seq_first_item + seqs[seq].n_tokens * n_kv) {
        seq_first_item += seqs[seq].n_tokens * n_kv;
        ++seq;
      }
      const AttentionSeq& sq = seqs[seq];
      const int64_t local = item - seq_first_item;
      const int64_t token = local / n_kv, kv_head = local % n_kv;
      const int64_t pos = sq.pos_start + token;
      GroupJob job;
      job.block_table = sq.block_table;
      job.kv_head = kv_head;
      job.ctx_end = pos + 1;
      job.ctx_begin =
          params.sliding_window > 0 ? std::max<int64_t>(0, pos + 1 - params.sliding_window) : 0;
      const int64_t offset = (token * params.n_heads + kv_head * n_group) * hd;
      job.q = sq.q + offset;
      job.out = sq.out + offset;
      float* scores = scratch->Get(tid, static_cast<size_t>(n_group * (job.ctx_end - job.ctx_begin)));
      attend(kv, job, n_group, params.scale, scores);
    }
  };
  if (pool && n_items > 1) {
    pool->Run(worker);
  } else {
    worker(0, 1);
  }
}

}  // namespace tachyon::kernels
