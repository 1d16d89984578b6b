// ModelRunner: turns one SchedulerOutput into one flat batch (model/batch.h) and runs it with
// one executor call. No policy: it computes exactly what the scheduler decided. Each slice's
// decode_start is its request's prompt length, so rows past the prompt get logits that do not
// depend on the rest of the step (TACHYON_DECODE_ROWS=0 leaves them unmarked, for A/B
// benchmarks of the cost at the AMX level).
// Thread-safety: none (engine thread).
#pragma once

#include <span>
#include <vector>

#include "engine/model_executor.h"
#include "engine/scheduler.h"

namespace tachyon::engine {

class ModelRunner {
 public:
  explicit ModelRunner(ModelExecutor* executor) : executor_(executor) {}  // not owned

  // Runs the step. Returns logits [rows, n_vocab], valid until the next call: out.seqs[i] has
  // 1 + num_draft_tokens rows from FirstRow(i) if it samples (its last known token's, then
  // each draft's), else 1 (its last new token's).
  Result<std::span<float>> Execute(const SchedulerOutput& out);
  int64_t FirstRow(size_t i) const { return first_row_[i]; }

  // The batch built by the last Execute (for tests and debugging).
  const model::Batch& last_batch() const { return batch_; }
  int32_t n_vocab() const { return executor_->n_vocab(); }

 private:
  ModelExecutor* executor_;
  model::Batch batch_;
  std::vector<float> logits_;
  std::vector<int64_t> first_row_;  // [out.seqs.size()]
};

}  // namespace tachyon::engine
