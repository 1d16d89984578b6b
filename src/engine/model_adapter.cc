#include "engine/model_adapter.h"

#include <algorithm>

namespace tachyon::engine {
namespace {
class CacheBytes : public kv::BlockBytes {
 public:
  explicit CacheBytes(const model::KvCache* kv) : kv_(kv) {}
  int64_t num_chunks() const override { return kv_->num_chunks(); }
  size_t chunk_bytes() const override { return kv_->chunk_bytes(); }
  int64_t num_layers() const override { return kv_->layout().layers_per_block; }
  int64_t num_model_layers() const override { return kv_->layout().n_layers(); }
  LayerPlace PlaceOf(int64_t model_layer) const override {
    return {kv_->layout().layer_group[model_layer], kv_->layout().layer_slot[model_layer]};
  }
  std::span<uint8_t> Chunk(int32_t block, int64_t chunk) override {
    return kv_->BlockChunk(block, chunk);
  }

 private:
  const model::KvCache* kv_;
};
}  // namespace

Result<std::unique_ptr<ModelAdapter>> ModelAdapter::Create(std::shared_ptr<model::Model> model,
                                                           int64_t num_blocks, int64_t block_size,
                                                           int n_threads, model::KvDtype kv_dtype) {
  if (!model) return InvalidArgument("model adapter: no model");
  const model::KvLayout layout = model::KvLayout::Single(model->config().n_layers);
  return Create(std::move(model), layout, num_blocks, block_size, n_threads, kv_dtype);
}

Result<std::unique_ptr<ModelAdapter>> ModelAdapter::Create(std::shared_ptr<model::Model> model,
                                                           const model::KvLayout& layout,
                                                           int64_t num_blocks, int64_t block_size,
                                                           int n_threads, model::KvDtype kv_dtype) {
  return CreateOnPool(std::move(model), layout, num_blocks, block_size,
                      std::make_shared<ThreadPool>(n_threads), kv_dtype);
}

Result<std::unique_ptr<ModelAdapter>> ModelAdapter::CreateOnPool(
    std::shared_ptr<model::Model> model, const model::KvLayout& layout, int64_t num_blocks,
    int64_t block_size, std::shared_ptr<ThreadPool> pool, model::KvDtype kv_dtype) {
  if (!model) return InvalidArgument("model adapter: no model");
  if (!pool) return InvalidArgument("model adapter: no thread pool");
  ASSIGN_OR_RETURN(std::unique_ptr<model::KvCache> kv,
                   model->CreateKvCache(layout, num_blocks, block_size, kv_dtype));
  return std::unique_ptr<ModelAdapter>(
      new ModelAdapter(std::move(model), std::move(kv), std::move(pool)));
}

ModelAdapter::ModelAdapter(std::shared_ptr<model::Model> model, std::unique_ptr<model::KvCache> kv,
                           std::shared_ptr<ThreadPool> pool)
    : model_(std::move(model)),
      kv_(std::move(kv)),
      bytes_(std::make_unique<CacheBytes>(kv_.get())),
      pool_(std::move(pool)) {}

Status ModelAdapter::Execute(const model::Batch& batch, std::span<float> logits) {
  const size_t n_vocab = static_cast<size_t>(model_->logit_rows());
  size_t rows = 0;
  for (const model::SequenceSlice& s : batch.seqs) rows += static_cast<size_t>(s.num_logits);
  if (logits.size() != rows * n_vocab) {
    return InvalidArgument("model adapter: logits buffer has the wrong size");
  }
  // The model may be shared with another adapter: the hook is its only during this call.
  if (layer_kv_hook_) model_->SetLayerKvHook(layer_kv_hook_);
  const Status forward = model_->Forward(batch, kv_.get(), pool_.get(), &out_);
  if (layer_kv_hook_) model_->SetLayerKvHook(nullptr);
  RETURN_IF_ERROR(forward);
  // Forward lays the requested rows out exactly as the executor contract asks.
  const float* src = out_.Row(0);
  std::copy(src, src + rows * n_vocab, logits.begin());
  return OkStatus();
}

bool ModelAdapter::SetLayerKvHook(std::function<void(int64_t layer)> hook) {
  if (kv_->n_groups() != 1) return false;
  layer_kv_hook_ = std::move(hook);
  return true;
}

}  // namespace tachyon::engine
