#include "server/engine_backend.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/model_adapter.h"
#include "engine/tokenizer_adapter.h"
#include "kv/kv_cache_manager.h"
#include "model/model.h"
#include "util/logging.h"
#include "util/thread_pool.h"

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

Result<std::string> ReadTemplateFile(const std::string& path) {
  if (path.size() > 5 && path.substr(path.size() - 5) == ".json") {
    return chat::ChatTemplateFromTokenizerConfig(path);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read chat template file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

Result<std::unique_ptr<EngineBackend>> EngineBackend::Create(const EngineBackendOptions& o) {
  std::unique_ptr<EngineBackend> b(new EngineBackend());
  b->options_ = o;
  ASSIGN_OR_RETURN(std::shared_ptr<model::Model> model,
                   model::Model::Load(o.model_path, model::LoadOptions{.quantize = o.quantize,
                                                                       .threads = o.threads}));
  ASSIGN_OR_RETURN(std::unique_ptr<tokenizer::Tokenizer> tok,
                   tokenizer::Tokenizer::FromGguf(model->file()));
  b->tokenizer_ = std::move(tok);

  std::optional<std::string> source;
  if (!o.chat_template_path.empty()) {
    ASSIGN_OR_RETURN(source, ReadTemplateFile(o.chat_template_path));
  } else {
    source = b->tokenizer_->chat_template();
  }
  if (source) {
    auto parsed = chat::ChatTemplate::Parse(*source);
    if (!parsed.ok()) return parsed.status().WithContext("chat template");
    b->template_ = std::move(*parsed);
    b->template_source_ = *source;
  }

  const model::ModelConfig& cfg = model->config();
  int64_t max_len = o.max_model_len > 0 ? o.max_model_len : cfg.n_ctx_train;
  if (max_len <= 0) max_len = 2048;
  const int64_t block = model::kDefaultBlockSize;
  if (Status st = kernels::CheckKvDtype(o.kv_dtype, cfg.head_dim); !st.ok()) {
    return st.WithContext("--kv-cache-dtype");
  }
  const int64_t per_block = static_cast<int64_t>(model->KvBytesPerBlock(block, o.kv_dtype));
  const int64_t blocks_per_seq = (max_len + block - 1) / block;
  int64_t budget = o.kv_cache_bytes;
  if (budget <= 0)
    budget = std::min<int64_t>(blocks_per_seq * o.max_num_seqs * per_block, 4LL << 30);
  int64_t num_blocks = kv::NumBlocksForBudget(budget, per_block);
  if (num_blocks < blocks_per_seq) {
    return InvalidArgument("KV cache budget of " + std::to_string(budget >> 20) + " MiB holds " +
                           std::to_string(num_blocks) +
                           " blocks, fewer than one "
                           "full context needs (" +
                           std::to_string(blocks_per_seq) + ")");
  }

  b->info_.name =
      o.served_name.empty() ? std::filesystem::path(o.model_path).stem().string() : o.served_name;
  b->info_.context_length = static_cast<int>(max_len);
  b->info_.vocab_size = static_cast<int>(cfg.n_vocab);
  b->info_.has_chat_template = b->template_.has_value();
  b->info_.max_live_sequences = o.max_num_seqs + o.max_queue;

  std::ostringstream summary;
  summary << cfg.arch << " model '" << cfg.name << "' (" << (model->weight_bytes() >> 20)
          << " MiB of weights), context " << max_len << ", KV cache " << num_blocks << " blocks of "
          << block << " tokens (" << ((num_blocks * per_block) >> 20) << " MiB, "
          << kernels::KvDtypeName(o.kv_dtype)
          << "), chat template: " << (b->template_ ? "yes" : "none");
  b->summary_ = summary.str();

  engine::EngineConfig ec;
  ec.scheduler.max_num_batched_tokens = o.max_num_batched_tokens;
  ec.scheduler.max_num_seqs = o.max_num_seqs;
  ec.kv.num_blocks = static_cast<int>(num_blocks);
  ec.kv.block_size = static_cast<int>(block);
  ec.kv.enable_prefix_caching = o.enable_prefix_caching;
  ec.scheduler.policy =
      o.priority_scheduling ? engine::SchedulePolicy::kPriority : engine::SchedulePolicy::kFcfs;
  ec.max_model_len = max_len;
  ec.eos_token_ids = b->tokenizer_->EogIds();
  for (int32_t id : o.extra_eos_token_ids) {
    if (id >= 0 && id < cfg.n_vocab &&
        std::find(ec.eos_token_ids.begin(), ec.eos_token_ids.end(), id) == ec.eos_token_ids.end()) {
      ec.eos_token_ids.push_back(id);
    }
  }
  ec.detokenizer = std::make_shared<engine::TokenizerDetokenizer>(b->tokenizer_);
  int threads = o.threads > 0 ? o.threads : HardwareThreads();
  ASSIGN_OR_RETURN(std::unique_ptr<engine::ModelAdapter> executor,
                   engine::ModelAdapter::Create(model, num_blocks, block, threads, o.kv_dtype));
  ASSIGN_OR_RETURN(b->core_, engine::EngineCore::Create(ec, std::move(executor)));
  b->ready_ = true;
  return b;
}

EngineBackend::~EngineBackend() {
  Shutdown();
}

void EngineBackend::Shutdown() {
  ready_ = false;
  if (core_) core_->Stop();
}

Result<std::vector<int32_t>> EngineBackend::Tokenize(std::string_view text,
                                                     bool add_special) const {
  return tokenizer_->Encode(text, add_special, /*parse_special=*/true);
}

Result<std::string> EngineBackend::Detokenize(std::span<const int32_t> ids) const {
  for (int32_t id : ids) {
    if (id < 0 || id >= tokenizer_->vocab_size()) {
      return InvalidArgument("token id " + std::to_string(id) + " is out of range");
    }
  }
  return tokenizer_->Decode(std::vector<int32_t>(ids.begin(), ids.end()), /*skip_special=*/true);
}

std::string EngineBackend::TokenBytes(int32_t id) const {
  return tokenizer_->TokenBytes(id);
}

Result<std::string> EngineBackend::ApplyChatTemplate(const nlohmann::ordered_json& context) const {
  if (!template_) return InvalidArgument("this model has no chat template");
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  for (const auto& [key, value] : context.items()) {
    if (key != "messages" && key != "tools" && key != "add_generation_prompt") extra[key] = value;
  }
  nlohmann::ordered_json ctx = chat::MakeChatContext(
      context.at("messages"), context.value("tools", nlohmann::ordered_json(nullptr)),
      context.value("add_generation_prompt", true), tokenizer_->bos_text(), tokenizer_->eos_text(),
      extra);
  auto text = template_->Render(ctx);
  if (!text.ok()) return InvalidArgument(text.status().message());
  return text;
}

Result<uint64_t> EngineBackend::Submit(GenerationRequest request, OutputCallback callback) {
  if (!ready_) return Unavailable("the engine is not running");
  // Admission counts sequences (a request of n choices holds n), like the engine's limits.
  const int64_t n = std::max(1, request.n);
  const int64_t limit = options_.max_num_seqs + options_.max_queue;
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

  auto id = core_->AddRequestWithCallback(
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
  core_->Abort(handle);
}

BackendMetrics EngineBackend::Metrics() const {
  engine::EngineMetrics m = core_->Metrics();
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
