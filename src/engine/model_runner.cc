#include "engine/model_runner.h"

#include <cstdlib>
#include <string>

namespace tachyon::engine {

namespace {

// Whether the steps mark decode rows (model/batch.h, decode_start): yes unless the environment
// has TACHYON_DECODE_ROWS=0 (read once; for A/B benchmarks of what batch invariance costs at
// the AMX level).
bool MarkDecodeRows() {
  static const bool on = [] {
    const char* v = std::getenv("TACHYON_DECODE_ROWS");
    return v == nullptr || std::string(v) != "0";
  }();
  return on;
}

}  // namespace

Result<std::span<float>> ModelRunner::Execute(const SchedulerOutput& out) {
  batch_.tokens.clear();
  batch_.seqs.clear();
  batch_.tokens.reserve(out.num_tokens);
  first_row_.clear();
  int64_t rows = 0;
  for (const ScheduledSeq& s : out.seqs) {
    model::SequenceSlice slice;
    slice.token_start = static_cast<int64_t>(batch_.tokens.size());
    slice.n_tokens = s.num_new_tokens;
    slice.pos_start = s.pos_start;
    slice.block_table = s.block_table;
    slice.copy_src = s.copy_src;
    // A step that samples and verifies k drafts needs the rows of the last known token and of
    // each draft.
    slice.num_logits = s.sample ? 1 + s.num_draft_tokens : 1;
    // Rows past the prompt (decode, verify, recomputed outputs) get logits that do not depend
    // on the rest of the step (model/batch.h), so drafts cannot change greedy text.
    if (MarkDecodeRows()) slice.decode_start = s.request->num_prompt_tokens;
    const auto& t = s.request->tokens;
    const int64_t known = s.num_new_tokens - s.num_draft_tokens;
    batch_.tokens.insert(batch_.tokens.end(), t.begin() + s.pos_start,
                         t.begin() + s.pos_start + known);
    const auto& d = s.request->draft_tokens;
    batch_.tokens.insert(batch_.tokens.end(), d.begin(), d.begin() + s.num_draft_tokens);
    first_row_.push_back(rows);
    rows += slice.num_logits;
    batch_.seqs.push_back(std::move(slice));
  }
  logits_.resize(static_cast<size_t>(rows) * static_cast<size_t>(executor_->n_vocab()));
  RETURN_IF_ERROR(executor_->Execute(batch_, logits_));
  return std::span<float>(logits_);
}

}  // namespace tachyon::engine
