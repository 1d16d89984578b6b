#include "server/engine_backend.h"

#include <algorithm>

namespace tachyon::server {
namespace {

GenerationChunk Convert(engine::RequestOutput& out) {
  GenerationChunk c;
  c.index = out.index;
  c.token_ids = std::move(out.token_ids);
  c.text = std::move(out.text);
  for (const auto& lp : out.logprobs) {
    TokenLogprob t{lp.token, lp.logprob, {}};
    for (const auto& top : lp.top) t.top.push_back({top.token, top.logprob});
    c.logprobs.push_back(std::move(t));
  }
  c.finished = out.finish_reason != engine::FinishReason::kNone;
  switch (out.finish_reason) {
    case engine::FinishReason::kLength:
      c.finish_reason = FinishReason::kLength;
      break;
    case engine::FinishReason::kAbort:
      c.finish_reason = FinishReason::kAbort;
      break;
    case engine::FinishReason::kError:
      c.error = Internal(out.error.ok() ? "the model failed" : out.error.message());
      break;
    default:
      c.finish_reason = FinishReason::kStop;
      break;
  }
  c.prompt_tokens = static_cast<int>(out.usage.prompt_tokens);
  c.cached_tokens = static_cast<int>(out.usage.cached_prompt_tokens);
  c.queue_seconds = out.queue_seconds;
  return c;
}

}  // namespace

Result<std::unique_ptr<EngineBackend>> EngineBackend::Create(engine::ServingEngine engine,
                                                             int max_queue) {
  if (!engine.tokenizer || !engine.core) {
    return InvalidArgument("the server needs an engine with a tokenizer");
  }
  std::unique_ptr<EngineBackend> b(new EngineBackend(std::move(engine)));
  const engine::EngineConfig& ec = b->se_.core->config();
  b->max_live_ = static_cast<int64_t>(ec.scheduler.max_num_seqs) + std::max(max_queue, 0);
  b->info_.name = b->se_.name;
  b->info_.context_length = static_cast<int>(b->se_.kv.max_model_len);
  b->info_.vocab_size = static_cast<int>(b->se_.core->n_vocab());
  b->info_.has_chat_template = b->se_.chat_template.has_value();
  b->info_.max_live_sequences = static_cast<int>(b->max_live_);
  b->ready_ = true;
  return b;
}

EngineBackend::~EngineBackend() {
  Shutdown();
}

void EngineBackend::Shutdown() {
  ready_ = false;
  if (se_.core) se_.core->Stop();
}

Result<std::vector<int32_t>> EngineBackend::Tokenize(std::string_view text,
                                                     bool add_special) const {
  return se_.tokenizer->Encode(text, add_special, /*parse_special=*/true);
}

Result<std::string> EngineBackend::Detokenize(std::span<const int32_t> ids) const {
  for (int32_t id : ids) {
    if (id < 0 || id >= se_.tokenizer->vocab_size()) {
      return InvalidArgument("token id " + std::to_string(id) + " is out of range");
    }
  }
  return se_.tokenizer->Decode(std::vector<int32_t>(ids.begin(), ids.end()), /*skip_special=*/true);
}

std::string EngineBackend::TokenBytes(int32_t id) const {
  return se_.tokenizer->TokenBytes(id);
}

Result<std::string> EngineBackend::ApplyChatTemplate(const nlohmann::ordered_json& context) const {
  if (!se_.chat_template) return InvalidArgument("this model has no chat template");
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  for (const auto& [key, value] : context.items()) {
    if (key != "messages" && key != "tools" && key != "add_generation_prompt") extra[key] = value;
  }
  nlohmann::ordered_json ctx = chat::MakeChatContext(
      context.at("messages"), context.value("tools", nlohmann::ordered_json(nullptr)),
      context.value("add_generation_prompt", true), se_.tokenizer->bos_text(),
      se_.tokenizer->eos_text(), extra);
  auto text = se_.chat_template->Render(ctx);
  if (!text.ok()) return InvalidArgument(text.status().message());
  return text;
}

Result<uint64_t> EngineBackend::Submit(GenerationRequest request, OutputCallback callback) {
  if (!ready_) return Unavailable("the engine is not running");
  // Admission counts sequences (a request of n choices holds n), like the engine's limits.
  const int64_t n = std::max(1, request.n);
  const int64_t limit = max_live_;
  if (n > limit) {
    return InvalidArgument("n = " + std::to_string(n) +
                           " exceeds what this server holds at once (" + std::to_string(limit) +
                           " sequences)");
  }
  const int64_t before = live_->fetch_add(n);  // released by the final output (or below)
  if (before + n > limit) {
    live_->fetch_sub(n);
    return ResourceExhausted("The server is busy (" + std::to_string(before) +
                             " sequences in flight); retry later.");
  }
  const SamplingOptions& s = request.sampling;
  engine::EngineRequest er;
  er.prompt_tokens = std::move(request.prompt_ids);
  sampling::SamplingParams& p = er.params;
  p.n = static_cast<int>(n);
  p.temperature = s.temperature;
  p.top_k = s.top_k;
  p.top_p = s.top_p;
  p.min_p = s.min_p;
  p.repetition_penalty = s.repetition_penalty;
  p.presence_penalty = s.presence_penalty;
  p.frequency_penalty = s.frequency_penalty;
  p.logit_bias.assign(s.logit_bias.begin(), s.logit_bias.end());
  p.seed = s.seed;
  p.max_tokens = s.max_tokens;
  p.stop = s.stop;
  p.stop_token_ids = s.stop_token_ids;
  p.ignore_eos = s.ignore_eos;
  er.priority = s.priority;
  p.logprobs = s.logprobs;
  const int64_t prompt_len = static_cast<int64_t>(er.prompt_tokens.size());

  auto id = se_.core->AddRequestWithCallback(
      std::move(er), [cb = std::move(callback), live = live_, n](engine::RequestOutput out) {
        const bool request_done = out.finished;  // every choice has finished
        cb(Convert(out));
        if (request_done) live->fetch_sub(n);
      });
  if (!id.ok()) {
    live_->fetch_sub(n);
    return id.status();
  }
  prompt_tokens_ += prompt_len;
  return *id;
}

void EngineBackend::Cancel(uint64_t handle) {
  se_.core->Abort(handle);
}

BackendMetrics EngineBackend::Metrics() const {
  engine::EngineMetrics m = se_.core->Metrics();
  BackendMetrics b;
  b.num_running = m.num_running;
  b.num_waiting = m.num_waiting;
  b.kv_blocks_total = m.kv.num_blocks;
  b.kv_blocks_used = m.kv.used_blocks;
  b.prefix_cache_queries = m.kv.prefix_query_tokens;
  b.prefix_cache_hits = m.kv.prefix_hit_tokens;
  b.prompt_tokens_total = prompt_tokens_;
  b.generation_tokens_total = m.generation_tokens;
  b.preemptions_total = m.num_preemptions;
  return b;
}

}  // namespace tachyon::server
