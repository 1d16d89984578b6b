// ModelExecutor: what the engine needs from a model, and nothing more.
//
// The engine owns block ids (kv/); the executor owns the KV storage indexed by them, sized for
// the pool's num_blocks x block_size at construction. Two implementations: the real model
// adapter and FakeModelExecutor (testing/fake_executor.h) for tests.
// Thread-safety: called from the engine thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "kv/block_store.h"
#include "model/batch.h"
#include "util/status.h"

namespace tachyon::engine {

class ModelExecutor {
 public:
  virtual ~ModelExecutor() = default;

  virtual int32_t n_vocab() const = 0;

  // Runs one flat batch: writes each sequence's new tokens' KV into its blocks and the logits
  // of its last num_logits new tokens (model/batch.h) into `logits`, row after row: sequence
  // 0's rows in token order, then sequence 1's, ... ([sum of num_logits, n_vocab]).
  // A sequence's cached positions [0, pos_start) may lie in blocks that other sequences of the
  // same batch complete (a prefix attached in flight, kv::KvCacheManager::AttachInFlight): in
  // every layer the K/V of every new token of the batch are stored before any sequence's
  // attention reads the cache (model/batch.h). The cached positions of its block at pos_start
  // may be copied, after those stores, from another sequence's block (SequenceSlice::copy_src).
  // REQUIRES: logits.size() == (sum of batch.seqs[i].num_logits) * n_vocab().
  // Errors: a malformed batch (InvalidArgument / Internal) or a model failure.
  virtual Status Execute(const model::Batch& batch, std::span<float> logits) = 0;

  // The KV storage as raw blocks (kv/block_store.h), for offload tiers and KV transfer; null
  // when the executor has none. Owned by the executor.
  virtual kv::BlockBytes* block_bytes() { return nullptr; }

  // Per-layer KV completion (KV transfer streams layer by layer, engine/pd_export.h): while
  // `hook` is set, Execute calls hook(l) on its calling thread as soon as layer l's K/V of
  // every token of the batch is in the blocks, for l = 0 .. block_bytes()->num_model_layers() - 1
  // in order, before the later layers are computed. Returns false when the executor cannot (the
  // caller then reads the KV after Execute). An empty hook clears it.
  virtual bool SetLayerKvHook(std::function<void(int64_t layer)> hook) {
    (void)hook;
    return false;
  }
};

}  // namespace tachyon::engine
