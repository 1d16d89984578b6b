// ModelAdapter: the ModelExecutor over a real model::Model and its paged KvCache.
//
// It owns the KV storage (num_blocks x block_size positions, sized by the caller, typically
// from kv::NumBlocksForBudget(budget, model.KvBytesPerBlock(block_size))) and a compute
// thread pool; the model may be shared (it must outlive the adapter).
// Thread-safety: engine thread only, like every ModelExecutor.
#pragma once

#include <memory>

#include "engine/model_executor.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "util/thread_pool.h"

namespace tachyon::engine {

class ModelAdapter : public ModelExecutor {
 public:
  // n_threads <= 0: one per hardware thread. Errors: from KV cache creation (e.g. memory, a
  // dtype that cannot hold the model's head_dim).
  static Result<std::unique_ptr<ModelAdapter>> Create(
      std::shared_ptr<model::Model> model, int64_t num_blocks, int64_t block_size, int n_threads,
      model::KvDtype kv_dtype = model::kDefaultKvDtype);
  // The same with the KV cache in `layout`'s layer groups (Model::HybridKvLayout); the
  // engine's block tables then have one section per group (kv::KvCacheConfig::group_windows).
  static Result<std::unique_ptr<ModelAdapter>> Create(std::shared_ptr<model::Model> model,
                                                      const model::KvLayout& layout,
                                                      int64_t num_blocks, int64_t block_size,
                                                      int n_threads, model::KvDtype kv_dtype);
  // The same, computing on `pool`, shared with another adapter driven by the same thread (a
  // draft model beside its target): one set of compute threads for both.
  static Result<std::unique_ptr<ModelAdapter>> CreateOnPool(std::shared_ptr<model::Model> model,
                                                            const model::KvLayout& layout,
                                                            int64_t num_blocks, int64_t block_size,
                                                            std::shared_ptr<ThreadPool> pool,
                                                            model::KvDtype kv_dtype);

  // The width of the model's logit rows (model::Model::logit_rows: n_vocab unless the model
  // computes a prefix of the vocabulary only, as a draft model may).
  int32_t n_vocab() const override { return static_cast<int32_t>(model_->logit_rows()); }
  Status Execute(const model::Batch& batch, std::span<float> logits) override;
  kv::BlockBytes* block_bytes() override { return bytes_.get(); }
  // Model::SetLayerKvHook (plain single-group caches only: a group's page holds several
  // layers' slots otherwise, which BlockBytes::num_layers does not describe).
  bool SetLayerKvHook(std::function<void(int64_t layer)> hook) override;

  const model::Model& model() const { return *model_; }
  const std::shared_ptr<ThreadPool>& pool() const { return pool_; }

 private:
  ModelAdapter(std::shared_ptr<model::Model> model, std::unique_ptr<model::KvCache> kv,
               std::shared_ptr<ThreadPool> pool);

  std::shared_ptr<model::Model> model_;
  std::unique_ptr<model::KvCache> kv_;
  std::unique_ptr<kv::BlockBytes> bytes_;  // over kv_ (KvCache::BlockChunk)
  std::shared_ptr<ThreadPool> pool_;
  model::ForwardOutput out_;
  std::function<void(int64_t)> layer_kv_hook_;  // handed to the model during Execute
};

}  // namespace tachyon::engine
