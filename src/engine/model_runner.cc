#include "engine/model_runner.h"

namespace tachyon::engine {

Result<std::span<float>> ModelRunner::Execute(const SchedulerOutput& out) {
  batch_.tokens.clear();
  batch_.seqs.clear();
  batch_.tokens.reserve(out.num_tokens);
  for (const ScheduledSeq& s : out.seqs) {
    model::SequenceSlice slice;
    slice.token_start = static_cast<int64_t>(batch_.tokens.size());
    slice.n_tokens = s.num_new_tokens;
    slice.pos_start = s.pos_start;
    slice.block_table = s.block_table;
    const auto& t = s.request->tokens;
    batch_.tokens.insert(batch_.tokens.end(), t.begin() + s.pos_start,
                         t.begin() + s.pos_start + s.num_new_tokens);
    batch_.seqs.push_back(std::move(slice));
  }
  logits_.resize(out.seqs.size() * static_cast<size_t>(executor_->n_vocab()));
  RETURN_IF_ERROR(executor_->Execute(batch_, logits_));
  return std::span<float>(logits_);
}

}  // namespace tachyon::engine
