#include "engine/pooling_engine.h"

#include <algorithm>

#include "util/logging.h"

namespace tachyon::engine {

namespace {
int64_t Blocks(int64_t tokens) {
  return (tokens + model::kDefaultBlockSize - 1) / model::kDefaultBlockSize;
}
}  // namespace

Result<std::unique_ptr<PoolingEngine>> PoolingEngine::Create(std::shared_ptr<model::Model> model,
                                                             PoolingEngineConfig config) {
  const model::ModelConfig& c = model->config();
  if (config.pooling == model::PoolingType::kNone) {
    return InvalidArgument(c.name + ": no pooling type for a pooling engine");
  }
  if (config.pooling == model::PoolingType::kRank && c.n_cls_out == 0) {
    return InvalidArgument(c.name + ": rank pooling needs a classification head");
  }
  if (config.max_tokens <= 0)
    config.max_tokens = c.max_pool_tokens > 0 ? c.max_pool_tokens : c.n_ctx_train;
  if (c.encoder) config.max_tokens = std::min(config.max_tokens, c.n_ctx_train);
  if (config.max_batch_tokens < config.max_tokens) {
    return InvalidArgument("the pooling token budget (" + std::to_string(config.max_batch_tokens) +
                           ") is smaller than the longest input (" +
                           std::to_string(config.max_tokens) + " tokens)");
  }
  config.max_batch_seqs = std::max(config.max_batch_seqs, 1);
  std::unique_ptr<PoolingEngine> e(new PoolingEngine(std::move(model), config));
  // Every sequence of a step may waste part of one block.
  const int64_t blocks = Blocks(config.max_batch_tokens) + config.max_batch_seqs;
  ASSIGN_OR_RETURN(e->kv_,
                   e->model_->CreateKvCache(blocks, model::kDefaultBlockSize, config.kv_dtype));
  e->pool_ = std::make_unique<ThreadPool>(config.threads);
  e->thread_ = std::thread([p = e.get()] { p->Loop(); });
  return e;
}

PoolingEngine::PoolingEngine(std::shared_ptr<model::Model> model, PoolingEngineConfig config)
    : model_(std::move(model)), config_(config) {}

PoolingEngine::~PoolingEngine() {
  Stop();
}

int64_t PoolingEngine::dim() const {
  return config_.pooling == model::PoolingType::kRank ? model_->config().n_cls_out
                                                      : model_->config().n_embd;
}

Status PoolingEngine::Submit(PoolingRequest request, PoolingCallback callback) {
  const model::ModelConfig& c = model_->config();
  const int64_t n = static_cast<int64_t>(request.tokens.size());
  if (n == 0) return InvalidArgument("the input is empty");
  if (n > config_.max_tokens) {
    return InvalidArgument("the input has " + std::to_string(n) + " tokens, more than the " +
                           std::to_string(config_.max_tokens) + " this model takes");
  }
  for (int32_t id : request.tokens) {
    if (id < 0 || id >= c.n_vocab) {
      return InvalidArgument("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                             std::to_string(c.n_vocab) + ")");
    }
  }
  if (!request.token_types.empty()) {
    if (static_cast<int64_t>(request.token_types.size()) != n) {
      return InvalidArgument("token_types must have one entry per token");
    }
    for (int32_t t : request.token_types) {
      if (t < 0 || t >= std::max<int64_t>(c.n_token_types, 1)) {
        return InvalidArgument("token type " + std::to_string(t) + " is out of range");
      }
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return Unavailable("the engine is stopping");
  if (static_cast<int>(queue_.size()) >= config_.max_queue) {
    return ResourceExhausted("The server is busy (" + std::to_string(queue_.size()) +
                             " requests waiting); retry later.");
  }
  queue_.push_back({std::move(request), std::move(callback), std::chrono::steady_clock::now()});
  metrics_.prompt_tokens_received += n;
  metrics_.num_waiting = static_cast<int>(queue_.size());
  cv_.notify_one();
  return OkStatus();
}

void PoolingEngine::Stop() {
  std::deque<Pending> failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    failed.swap(queue_);
    metrics_.num_waiting = 0;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  for (Pending& p : failed) {
    PoolingResult r;
    r.status = Unavailable("the engine stopped");
    p.callback(std::move(r));
  }
}

EngineMetrics PoolingEngine::Metrics() const {
  std::lock_guard<std::mutex> lock(mu_);
  return metrics_;
}

void PoolingEngine::Loop() {
  std::vector<Pending> step;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      int64_t tokens = 0;
      while (!queue_.empty() && static_cast<int>(step.size()) < config_.max_batch_seqs) {
        const int64_t n = static_cast<int64_t>(queue_.front().request.tokens.size());
        if (!step.empty() && tokens + n > config_.max_batch_tokens) break;
        tokens += n;
        step.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      metrics_.num_waiting = static_cast<int>(queue_.size());
      metrics_.num_running = static_cast<int>(step.size());
    }
    RunStep(step);
    step.clear();
  }
}

void PoolingEngine::RunStep(std::vector<Pending>& step) {
  const auto start = std::chrono::steady_clock::now();
  model::Batch batch;
  bool any_types = false;
  for (const Pending& p : step) any_types = any_types || !p.request.token_types.empty();
  int32_t next_block = 0;
  for (const Pending& p : step) {
    const auto& ids = p.request.tokens;
    model::SequenceSlice s;
    s.token_start = static_cast<int64_t>(batch.tokens.size());
    s.n_tokens = static_cast<int64_t>(ids.size());
    for (int64_t b = 0; b < Blocks(s.n_tokens); ++b) s.block_table.push_back(next_block++);
    batch.tokens.insert(batch.tokens.end(), ids.begin(), ids.end());
    if (any_types) {
      if (p.request.token_types.empty()) {
        batch.token_types.insert(batch.token_types.end(), ids.size(), 0);
      } else {
        batch.token_types.insert(batch.token_types.end(), p.request.token_types.begin(),
                                 p.request.token_types.end());
      }
    }
    batch.seqs.push_back(std::move(s));
  }
  Status st = model_->Pool(batch, config_.pooling, kv_.get(), pool_.get(), &out_);
  const auto end = std::chrono::steady_clock::now();
  if (!st.ok()) TLOG(ERROR) << "pooling step failed: " << st.message();
  {  // before the callbacks: a client that has its answer sees this step counted
    std::lock_guard<std::mutex> lock(mu_);
    metrics_.num_steps += 1;
    metrics_.num_running = 0;
    metrics_.prompt_tokens_computed += static_cast<int64_t>(batch.tokens.size());
    metrics_.requests_finished += static_cast<int64_t>(step.size());
    metrics_.forward_seconds += std::chrono::duration<double>(end - start).count();
  }
  for (size_t i = 0; i < step.size(); ++i) {
    PoolingResult r;
    r.status = st;
    r.n_tokens = static_cast<int64_t>(step[i].request.tokens.size());
    r.queue_seconds = std::chrono::duration<double>(start - step[i].arrival).count();
    if (st.ok()) r.values.assign(out_.Row(int64_t(i)), out_.Row(int64_t(i)) + out_.dim);
    step[i].callback(std::move(r));
  }
}

}  // namespace tachyon::engine
