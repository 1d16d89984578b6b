// ModelRunner: turns one SchedulerOutput into one flat batch (model/batch.h) and runs it with
// one executor call. No policy: it computes exactly what the scheduler decided.
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

  // Runs the step. Returns logits [out.seqs.size(), n_vocab] (row i: the last new token of
  // out.seqs[i]), valid until the next call.
  Result<std::span<float>> Execute(const SchedulerOutput& out);

  // The batch built by the last Execute (for tests and debugging).
  const model::Batch& last_batch() const { return batch_; }
  int32_t n_vocab() const { return executor_->n_vocab(); }

 private:
  ModelExecutor* executor_;
  model::Batch batch_;
  std::vector<float> logits_;
};

}  // namespace tachyon::engine
