#include "engine/testing/fake_executor.h"

#include <algorithm>
#include <atomic>
#include <string>

#include "util/logging.h"

namespace tachyon::engine {
namespace {
// Process-wide, so KV slots loaded from another fake (an offload tier across a restart) never
// carry the stamp of the current call.
std::atomic<int64_t> next_call_stamp{0};

uint64_t Mix(uint64_t h, uint64_t x) {
  h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdULL;
  return h ^ (h >> 33);
}
}  // namespace

FakeModelExecutor::FakeModelExecutor(int32_t n_vocab, int num_blocks, int block_size,
                                     std::vector<int64_t> group_windows)
    : n_vocab_(n_vocab),
      num_blocks_(num_blocks),
      block_size_(block_size),
      windows_(group_windows.empty() ? std::vector<int64_t>{0} : std::move(group_windows)),
      kv_(static_cast<size_t>(num_blocks) * block_size) {
  CHECK(windows_[0] == 0) << "fake executor: group 0 must be full attention";
}

namespace {
// The first block a sliding group (window w) must hold for a step starting at pos_start.
int64_t LiveBlock(int64_t w, int64_t pos_start, int block_size) {
  return w > 0 ? std::max<int64_t>(0, pos_start - w + 1) / block_size : 0;
}
}  // namespace

void FakeModelExecutor::LogitsFor(std::span<const int32_t> history, std::span<float> out) const {
  uint64_t h = kHashStart;
  for (size_t i = 0; i < history.size(); ++i) h = Mix(h, static_cast<uint64_t>(history[i]) + i);
  LogitsFromHash(h, out);
}

void FakeModelExecutor::LogitsFromHash(uint64_t h, std::span<float> out) const {
  for (int32_t v = 0; v < n_vocab_; ++v) {
    out[v] = static_cast<float>(Mix(h, v) % 10007) / 1000.0f - 5.0f;
  }
}

Status FakeModelExecutor::CheckSequence(const model::Batch& batch,
                                        const model::SequenceSlice& s) const {
  if (s.num_logits < 1 || s.num_logits > s.n_tokens) {
    return InvalidArgument("fake executor: a sequence asks for " + std::to_string(s.num_logits) +
                           " logits rows with " + std::to_string(s.n_tokens) + " new tokens");
  }
  if (s.n_tokens < 1 || s.token_start < 0 ||
      s.token_start + s.n_tokens > static_cast<int64_t>(batch.tokens.size())) {
    return InvalidArgument("fake executor: sequence token range out of the batch");
  }
  const int64_t end = s.pos_start + s.n_tokens;
  const size_t groups = windows_.size();
  if (s.block_table.size() % groups != 0) {
    return InvalidArgument("fake executor: block table is not one section per group");
  }
  const int64_t section = static_cast<int64_t>(s.block_table.size() / groups);
  if (section * block_size_ < end) {
    return InvalidArgument("fake executor: block table covers " + std::to_string(section) +
                           " blocks, need position " + std::to_string(end - 1));
  }
  for (size_t g = 0; g < groups; ++g) {
    const int64_t live = LiveBlock(windows_[g], s.pos_start, block_size_);
    for (int64_t i = 0; i < section; ++i) {
      const int32_t b = s.block_table[g * section + i];
      if ((b < 0 && !(i < live && b == -1)) || b >= num_blocks_) {
        return InvalidArgument("fake executor: block id " + std::to_string(b) + " out of range");
      }
    }
  }
  return OkStatus();
}

bool FakeModelExecutor::Readable(const model::Batch& batch, const Slot& slot, int32_t block,
                                 int64_t pos, const model::SequenceSlice& s, size_t seq) const {
  if (slot.call != call_stamp_ || slot.writer == seq) return true;
  // Written in this call by another sequence: only in the reader's cached positions, in a block
  // that writer completes now (it writes the block's positions from its pos_start on; the
  // block's earlier positions it computed before).
  if (pos >= s.pos_start) return false;
  const int64_t writer_start = batch.seqs[slot.writer].pos_start;
  const size_t base = static_cast<size_t>(block) * block_size_;
  const int64_t first = pos - pos % block_size_;
  for (int j = 0; j < block_size_; ++j) {
    const Slot& o = kv_[base + j];
    if (o.pos != first + j) return false;
    if (first + j >= writer_start && (o.call != call_stamp_ || o.writer != slot.writer)) {
      return false;
    }
  }
  return true;
}

Status FakeModelExecutor::CheckWindow(const model::Batch& batch, const model::SequenceSlice& s,
                                      size_t seq, int g, int64_t from,
                                      const std::vector<int32_t>& tokens) const {
  const int64_t section = static_cast<int64_t>(s.block_table.size() / windows_.size());
  for (int64_t pos = from; pos < s.pos_start + s.n_tokens; ++pos) {
    const int32_t block = s.block_table[g * section + pos / block_size_];
    const Slot& slot = kv_[static_cast<size_t>(block) * block_size_ + pos % block_size_];
    if (slot.pos != pos || slot.token != tokens[pos] ||
        !Readable(batch, slot, block, pos, s, seq)) {
      return Internal("fake executor: group " + std::to_string(g) + " block " +
                      std::to_string(block) + " does not hold position " + std::to_string(pos) +
                      " of sequence " + std::to_string(seq) + " (window " +
                      std::to_string(windows_[g]) + ")");
    }
  }
  return OkStatus();
}

Status FakeModelExecutor::CopySlots(const model::Batch& batch) {
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const model::SequenceSlice& s = batch.seqs[i];
    if (s.copy_src < 0) continue;
    const int64_t n = s.pos_start % block_size_;
    if (windows_.size() != 1 || n == 0 || s.copy_src >= num_blocks_) {
      return InvalidArgument("fake executor: bad slot copy from block " +
                             std::to_string(s.copy_src));
    }
    const size_t from = static_cast<size_t>(s.copy_src) * block_size_;
    const size_t to = static_cast<size_t>(s.block_table[s.pos_start / block_size_]) * block_size_;
    for (int64_t j = 0; j < n; ++j) {
      const Slot& src = kv_[from + j];
      Slot& dst = kv_[to + j];
      const int64_t pos = s.pos_start - n + j;
      if (src.pos != pos || (src.call == call_stamp_ && src.copied)) {
        return Internal("fake executor: copy from block " + std::to_string(s.copy_src) +
                        ": its slot " + std::to_string(j) + " does not hold position " +
                        std::to_string(pos) + " computed by a sequence");
      }
      if (dst.call == call_stamp_) {
        return Internal("fake executor: block position " + std::to_string(pos) +
                        " is written twice in one step");
      }
      dst = src;
      dst.call = call_stamp_;
      dst.writer = i;
      dst.copied = true;
    }
  }
  return OkStatus();
}

Status FakeModelExecutor::Execute(const model::Batch& batch, std::span<float> logits) {
  size_t rows = 0;
  for (const model::SequenceSlice& s : batch.seqs) {
    RETURN_IF_ERROR(CheckSequence(batch, s));
    rows += static_cast<size_t>(s.num_logits);
  }
  if (logits.size() != rows * static_cast<size_t>(n_vocab_)) {
    return InvalidArgument("fake executor: logits buffer has the wrong size");
  }
  ++num_calls_;
  call_stamp_ = next_call_stamp.fetch_add(1) + 1;
  max_batch_seqs_ = std::max(max_batch_seqs_, batch.seqs.size());
  // Write every sequence's new KV first (in every group), then read, as a model does layer by
  // layer.
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const model::SequenceSlice& s = batch.seqs[i];
    const size_t section = s.block_table.size() / windows_.size();
    for (size_t g = 0; g < windows_.size(); ++g) {
      for (int64_t j = 0; j < s.n_tokens; ++j) {
        const int64_t pos = s.pos_start + j;
        const int32_t block = s.block_table[g * section + pos / block_size_];
        Slot& slot = kv_[static_cast<size_t>(block) * block_size_ + pos % block_size_];
        if (slot.call == call_stamp_) {
          return Internal("fake executor: block " + std::to_string(block) + " position " +
                          std::to_string(pos) + " is written twice in one step");
        }
        slot.token = batch.tokens[s.token_start + j];
        slot.pos = pos;
        slot.call = call_stamp_;
        slot.writer = i;
        slot.copied = false;
      }
    }
    num_tokens_ += s.n_tokens;
  }
  RETURN_IF_ERROR(CopySlots(batch));
  // Each group's one "layer" is stored (bytes_.num_model_layers()).
  for (size_t g = 0; layer_kv_hook_ && g < windows_.size(); ++g) layer_kv_hook_(int64_t(g));
  size_t row = 0;
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const model::SequenceSlice& s = batch.seqs[i];
    const int64_t end = s.pos_start + s.n_tokens;
    const int64_t first_logits = end - s.num_logits;  // position of the first row asked for
    if (windows_.size() > 1 && history_.size() < static_cast<size_t>(end)) history_.resize(end);
    uint64_t h = kHashStart;
    for (int64_t pos = 0; pos < end; ++pos) {
      const int32_t block = s.block_table[pos / block_size_];
      const Slot& slot = kv_[static_cast<size_t>(block) * block_size_ + pos % block_size_];
      if (slot.pos != pos) {
        return Internal("fake executor: block " + std::to_string(block) + " holds position " +
                        std::to_string(slot.pos) + " where position " + std::to_string(pos) +
                        " was expected");
      }
      if (!Readable(batch, slot, block, pos, s, i)) {
        return Internal("fake executor: position " + std::to_string(pos) + " of sequence " +
                        std::to_string(i) +
                        " reads KV another sequence writes in this step, in a block it does not "
                        "complete");
      }
      h = Mix(h, static_cast<uint64_t>(slot.token) + static_cast<uint64_t>(pos));
      if (pos >= first_logits) LogitsFromHash(h, logits.subspan(row++ * n_vocab_, n_vocab_));
      if (windows_.size() > 1) history_[pos] = slot.token;
    }
    for (size_t g = 1; g < windows_.size(); ++g) {
      const int64_t w = windows_[g];
      const int64_t from = w > 0 ? std::max<int64_t>(0, s.pos_start - w + 1) : 0;
      RETURN_IF_ERROR(CheckWindow(batch, s, i, static_cast<int>(g), from, history_));
    }
  }
  return OkStatus();
}

}  // namespace tachyon::engine
