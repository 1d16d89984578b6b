// FakeModelExecutor: a deterministic stand-in for the model, for engine tests.
//
// Like a real model it stores every new token's "KV" (here: the token id and its position) in
// the slot its block table names, and computes a sequence's logits only from what it reads
// back from that sequence's blocks for positions [0, pos_start + n_tokens); each row asked for
// (the last num_logits new tokens) is a hash of the token history up to its position, so reusing
// the wrong blocks, wrong positions or mixing sequences changes the output. Reading a slot written
// for another position is an error, and so is writing one slot twice in a call. A slot written in
// the same call by another sequence may be read only as part of the reader's cached positions
// [0, pos_start) (a prefix block attached in flight, engine/model_executor.h), and only when that
// writer completes the block in this call: it wrote every position of the block from its own
// pos_start on, and the block's earlier slots hold their positions (written before the call);
// anything else reads KV that was not computed before the step, an error. Slot copies
// (SequenceSlice::copy_src) run after all writes of the call; they count as the reader's writes.
// Layer groups (kv/kv_groups.h): built with group windows, each block table is one section per
// group and every group stores every new token in its own blocks. Logits come from group 0
// (REQUIRES: window 0, full attention); each sliding group's blocks are read back for the
// positions its window shows the new tokens, and must hold exactly what group 0 holds there,
// so a block released too early or reused by another sequence is an error. Entries before a
// sliding group's window may be -1. Thread-safety: none (engine thread).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/model_executor.h"

namespace tachyon::engine {

class FakeModelExecutor : public ModelExecutor {
 public:
  FakeModelExecutor(int32_t n_vocab, int num_blocks, int block_size,
                    std::vector<int64_t> group_windows = {});

  int32_t n_vocab() const override { return n_vocab_; }
  Status Execute(const model::Batch& batch, std::span<float> logits) override;
  // Its slots as raw blocks: one chunk of block_size slots per block.
  kv::BlockBytes* block_bytes() override { return &bytes_; }
  // One layer per group: hook(g) for each group g once every new token's slot is written,
  // before any logits.
  bool SetLayerKvHook(std::function<void(int64_t layer)> hook) override {
    layer_kv_hook_ = std::move(hook);
    return true;
  }

  // The logits the fake produces after `history` (for tests that predict outputs).
  void LogitsFor(std::span<const int32_t> history, std::span<float> out) const;

  int64_t num_calls() const { return num_calls_; }
  int64_t num_tokens_computed() const { return num_tokens_; }
  size_t max_batch_seqs() const { return max_batch_seqs_; }

 private:
  struct Slot {
    int32_t token = -1;
    int64_t pos = -1;   // -1: never written
    int64_t call = -1;  // the stamp of the Execute call that wrote it (unique per process)
    size_t writer = 0;  // index of the writing sequence in that call's batch
    bool copied = false;  // written by a slot copy (SequenceSlice::copy_src)
  };
  static constexpr uint64_t kHashStart = 0x1234567;
  void LogitsFromHash(uint64_t h, std::span<float> out) const;
  Status CheckSequence(const model::Batch& batch, const model::SequenceSlice& s) const;
  // Whether sequence `seq` (slice s) may read `slot` (in `block`) for position `pos` (above).
  bool Readable(const model::Batch& batch, const Slot& slot, int32_t block, int64_t pos,
                const model::SequenceSlice& s, size_t seq) const;
  // Applies the batch's slot copies (SequenceSlice::copy_src) after its writes: each copied
  // slot must hold its position, written by a sequence (not by another copy of the call).
  Status CopySlots(const model::Batch& batch);
  // Checks group g's slots for positions [from, end) against the tokens group 0 read.
  Status CheckWindow(const model::Batch& batch, const model::SequenceSlice& s, size_t seq, int g,
                     int64_t from, const std::vector<int32_t>& tokens) const;

  class SlotBytes : public kv::BlockBytes {
   public:
    explicit SlotBytes(FakeModelExecutor* f) : f_(f) {}
    int64_t num_chunks() const override { return 1; }
    size_t chunk_bytes() const override { return sizeof(Slot) * f_->block_size_; }
    int64_t num_layers() const override { return 1; }
    // Its "model layers" are its groups, one per page.
    int64_t num_model_layers() const override {
      return static_cast<int64_t>(f_->windows_.size());
    }
    LayerPlace PlaceOf(int64_t model_layer) const override {
      return {static_cast<int>(model_layer), 0};
    }
    std::span<uint8_t> Chunk(int32_t block, int64_t) override {
      return {reinterpret_cast<uint8_t*>(f_->kv_.data() + size_t(block) * f_->block_size_),
              chunk_bytes()};
    }

   private:
    FakeModelExecutor* f_;
  };

  int32_t n_vocab_;
  int num_blocks_;
  int block_size_;
  std::vector<int64_t> windows_;  // [groups]; {0} without groups
  std::vector<Slot> kv_;          // [num_blocks * block_size]
  std::vector<int32_t> history_;  // tokens group 0 read in the current sequence (groups > 1)
  int64_t num_calls_ = 0;
  int64_t call_stamp_ = 0;  // the current Execute call's
  int64_t num_tokens_ = 0;
  size_t max_batch_seqs_ = 0;
  SlotBytes bytes_{this};
  std::function<void(int64_t)> layer_kv_hook_;
};

}  // namespace tachyon::engine
