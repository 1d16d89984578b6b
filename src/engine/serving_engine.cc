#include "engine/serving_engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

#include "engine/draft_compat.h"
#include "engine/model_adapter.h"
#include "engine/tokenizer_adapter.h"
#include "hub/resolve.h"
#include "kv/host_tier.h"
#include "model/arch.h"
#include "util/logging.h"
#include "util/thread_pool.h"

namespace tachyon::engine {
namespace {

// The offload tiers of --kv-offload-memory / --kv-offload-dir, fastest first (the host tier
// spills into the disk tier). The disk tier's identity covers the model's files and the KV
// format, so a directory written for another model or format is never served.
Result<std::vector<std::shared_ptr<kv::BlockStore>>> OffloadTiers(const ServingOptions& o,
                                                                  const std::string& model_path,
                                                                  const model::KvLayout& layout,
                                                                  int64_t block_size) {
  std::vector<std::shared_ptr<kv::BlockStore>> tiers;
  std::shared_ptr<kv::BlockStore> disk;
  if (!o.kv_offload_dir.empty()) {
    std::ostringstream format;
    format << "kv=" << kernels::KvDtypeName(o.kv_dtype) << ";block=" << block_size
           << ";layers_per_block=" << layout.layers_per_block << ";windows=";
    for (int64_t w : layout.group_window) format << w << ",";
    ASSIGN_OR_RETURN(kv::BlockHash identity, kv::ModelKvIdentity(model_path, format.str()));
    ASSIGN_OR_RETURN(std::unique_ptr<kv::DiskTier> d,
                     kv::DiskTier::Open(o.kv_offload_dir, o.kv_offload_disk, identity));
    TLOG(INFO) << "disk KV tier " << o.kv_offload_dir << ": " << d->scanned_blocks()
               << " blocks of this model, " << d->ignored_files() << " other files ignored, "
               << d->removed_files() << " bad files removed";
    disk = std::move(d);
  }
  if (o.kv_offload_memory > 0) {
    tiers.push_back(std::make_shared<kv::HostTier>(o.kv_offload_memory, disk));
  }
  if (disk) tiers.push_back(disk);
  return tiers;
}

// The publisher's generation_config.json: defaults for sampling parameters a request leaves
// unset (out-of-range values are ignored); `applied` lists them ("" for none).
SamplingDefaults DefaultsFromGenerationConfig(const hub::GenerationDefaults& g,
                                              std::string* applied_out) {
  SamplingDefaults d;
  std::string applied;
  auto note = [&](const char* name, double v) {
    applied += std::string(applied.empty() ? "" : ", ") + name + "=" + std::to_string(v);
  };
  if (g.do_sample.has_value() && !*g.do_sample) {
    d.temperature = 0;
    applied = "greedy (do_sample=false)";
  } else if (g.temperature && *g.temperature >= 0 && *g.temperature <= 2) {
    d.temperature = *g.temperature;
    note("temperature", d.temperature);
  }
  if (g.top_p && *g.top_p > 0 && *g.top_p <= 1) note("top_p", d.top_p = *g.top_p);
  if (g.top_k && *g.top_k > 0) note("top_k", d.top_k = *g.top_k);
  if (g.min_p && *g.min_p >= 0 && *g.min_p <= 1) note("min_p", d.min_p = *g.min_p);
  if (g.repetition_penalty && *g.repetition_penalty > 0 && *g.repetition_penalty <= 10) {
    note("repetition_penalty", d.repetition_penalty = *g.repetition_penalty);
  }
  if (g.max_new_tokens && *g.max_new_tokens > 0) {
    note("max_tokens", d.max_tokens = *g.max_new_tokens);
  }
  *applied_out = applied;
  return d;
}

// The tokenizer's end-of-generation ids plus `extra` (generation_config.json), each once,
// ids outside [0, n_vocab) dropped.
std::vector<int32_t> MergeEosIds(std::vector<int32_t> ids, const std::vector<int32_t>& extra,
                                 int64_t n_vocab) {
  for (int32_t id : extra) {
    if (id >= 0 && id < n_vocab && std::find(ids.begin(), ids.end(), id) == ids.end()) {
      ids.push_back(id);
    }
  }
  return ids;
}

Result<model::PoolingType> EffectivePooling(const std::string& flag, const model::ModelConfig& c) {
  if (flag.empty()) return c.pooling;
  for (model::PoolingType p : {model::PoolingType::kNone, model::PoolingType::kMean,
                               model::PoolingType::kCls, model::PoolingType::kLast,
                               model::PoolingType::kRank}) {
    if (flag != model::PoolingTypeName(p)) continue;
    if (p == model::PoolingType::kNone && c.encoder) {
      return InvalidArgument("--pooling none: " + c.name + " is an encoder (it cannot generate)");
    }
    if (p == model::PoolingType::kRank && c.n_cls_out == 0) {
      return InvalidArgument("--pooling rank: " + c.name + " has no classification head");
    }
    return p;
  }
  return InvalidArgument("--pooling: '" + flag + "' is not one of none, mean, cls, last, rank");
}

// The pooling engine of a pooling model, in place of the KV sizing and EngineCore.
Status BuildPooler(const ServingOptions& o, ServingEngine* se) {
  const model::ModelConfig& cfg = se->model->config();
  PoolingEngineConfig pc;
  pc.pooling = se->pooling;
  // The model's own limit (sentence-transformers max_seq_length), lowered by --max-model-len.
  pc.max_tokens = cfg.max_pool_tokens > 0 ? cfg.max_pool_tokens : cfg.n_ctx_train;
  if (o.max_model_len > 0) pc.max_tokens = std::min<int64_t>(pc.max_tokens, o.max_model_len);
  pc.max_batch_tokens = std::max<int64_t>(o.max_num_batched_tokens, pc.max_tokens);
  pc.max_batch_seqs = o.max_num_seqs;
  pc.threads = se->threads;
  pc.kv_dtype = cfg.encoder ? model::KvDtype::kF32 : o.kv_dtype;  // encoders: a small pool
  ASSIGN_OR_RETURN(se->pooler, PoolingEngine::Create(se->model, pc));
  se->kv.max_model_len = se->pooler->config().max_tokens;
  se->block_size = model::kDefaultBlockSize;
  std::ostringstream summary;
  summary << cfg.arch << " model '" << cfg.name << "' (" << (se->model->weight_bytes() >> 20)
          << " MiB of weights), pooling " << model::PoolingTypeName(se->pooling)
          << (se->pooling != model::PoolingType::kRank && cfg.normalize_embeddings
                  ? " (normalised)"
                  : "")
          << ", " << se->pooler->dim() << " values per input, inputs up to "
          << se->kv.max_model_len << " tokens, " << pc.max_batch_tokens << " tokens per step";
  se->summary = summary.str();
  return OkStatus();
}

struct LoadedModel {
  hub::ResolvedModel resolved;
  std::shared_ptr<model::Model> model;
};

// A model as every entry point loads it: resolved (file, folder or Hub name), then its weights
// (--quantize, --threads).
Result<LoadedModel> LoadModel(const std::string& name, const ServingOptions& o) {
  LoadedModel m;
  ASSIGN_OR_RETURN(m.resolved, hub::ResolveModel(name));
  ASSIGN_OR_RETURN(
      m.model, model::Model::Load(m.resolved.model_path, model::LoadOptions{.quantize = o.quantize,
                                                                            .threads = o.threads}));
  return m;
}

// Method draft_model: the draft model, loaded like the target, checked against it.
Result<std::shared_ptr<model::Model>> LoadDraftModel(const ServingOptions& o,
                                                     const ServingEngine& se) {
  if (!se.tokenizer) {
    return InvalidArgument("speculative method draft_model needs the target's tokenizer");
  }
  ASSIGN_OR_RETURN(LoadedModel d, LoadModel(o.speculative.model, o));
  const model::ModelConfig& dc = d.model->config();
  if (dc.encoder || dc.pooling != model::PoolingType::kNone) {
    return InvalidArgument(dc.name + " is a pooling model: it cannot draft tokens");
  }
  auto tok = tokenizer::Tokenizer::FromGguf(d.model->file());
  if (!tok.ok()) return tok.status().WithContext("draft model " + d.resolved.model_path);
  RETURN_IF_ERROR(
      CheckDraftVocabulary(*se.tokenizer, se.model->config().n_vocab, **tok, dc.n_vocab));
  if (Status st = kernels::CheckKvDtype(o.kv_dtype, dc.head_dim); !st.ok()) {
    return st.WithContext("--kv-cache-dtype (draft model)");
  }
  d.model->SetLogitRows(o.speculative.draft_vocab_size);
  return d.model;
}

}  // namespace

Result<ServingEngine> BuildServingEngine(const ServingOptions& o) {
  // Read before the weights are paged in: MemAvailable counts page cache as available, and
  // the weights are subtracted from it once (kv_sizing.h).
  const int64_t available = ReadAvailableMemory();
  const auto t0 = std::chrono::steady_clock::now();
  ServingEngine se;
  ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(o.model, o));
  const hub::ResolvedModel& resolved = loaded.resolved;
  se.model = std::move(loaded.model);
  se.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  se.name = o.served_name.empty() ? resolved.name : o.served_name;
  const model::ModelConfig& cfg = se.model->config();

  auto tok = tokenizer::Tokenizer::FromGguf(se.model->file());
  if (tok.ok()) {
    se.tokenizer = std::move(tok).value();
  } else if (o.require_tokenizer) {
    return tok.status();
  } else {
    TLOG(WARN) << "no tokenizer (" << tok.status().message() << "): outputs carry no text";
  }

  std::optional<std::string> source;
  if (!o.chat_template_path.empty()) {
    ASSIGN_OR_RETURN(source, chat::ReadChatTemplateFile(o.chat_template_path));
  } else if (se.tokenizer) {
    source = se.tokenizer->chat_template();
  }
  if (!source && se.tokenizer) {  // the architecture's own format (Gemma files carry none)
    const model::ArchDef* arch = model::FindArch(cfg.arch);
    if (arch != nullptr && arch->chat_template != nullptr) source = arch->chat_template;
  }
  if (source) {
    auto parsed = chat::ChatTemplate::Parse(*source);
    if (!parsed.ok()) return parsed.status().WithContext("chat template");
    se.chat_template = std::move(*parsed);
    se.chat_template_source = *source;
  }

  std::vector<int32_t> extra_eos;
  if (o.use_generation_config) {
    se.sampling_defaults =
        DefaultsFromGenerationConfig(resolved.generation, &se.generation_config_note);
    extra_eos = resolved.generation.eos_token_ids;
  }
  se.eos_token_ids = MergeEosIds(se.tokenizer ? se.tokenizer->EogIds() : std::vector<int32_t>{},
                                 extra_eos, cfg.n_vocab);

  if (Status st = kernels::CheckKvDtype(o.kv_dtype, cfg.head_dim); !st.ok()) {
    return st.WithContext("--kv-cache-dtype");
  }
  ASSIGN_OR_RETURN(se.pooling, EffectivePooling(o.pooling, cfg));
  if (se.pooling != model::PoolingType::kNone) {
    se.threads = o.threads > 0 ? o.threads : HardwareThreads();
    RETURN_IF_ERROR(BuildPooler(o, &se));
    return se;
  }
  se.block_size = model::kDefaultBlockSize;
  se.kv_layout =
      o.hybrid_kv_cache ? se.model->HybridKvLayout() : model::KvLayout::Single(cfg.n_layers);
  std::shared_ptr<model::Model> draft;
  model::KvLayout draft_layout;
  if (o.speculative.method == spec::SpecMethod::kDraftModel) {
    ASSIGN_OR_RETURN(draft, LoadDraftModel(o, se));
    draft_layout = o.hybrid_kv_cache ? draft->HybridKvLayout()
                                     : model::KvLayout::Single(draft->config().n_layers);
  }
  // With a draft model its pool comes out of the same budget (kv_sizing.h), and the context is
  // what both models were trained for.
  const KvSizingInput in{
      .bytes_per_block =
          static_cast<int64_t>(se.model->KvBytesPerBlock(se.kv_layout, se.block_size, o.kv_dtype)),
      .block_size = se.block_size,
      .trained_context =
          draft ? std::min(cfg.n_ctx_train, draft->config().n_ctx_train) : cfg.n_ctx_train,
      .max_model_len = o.max_model_len,
      .extra_tokens = o.context_extra_tokens,
      .max_num_seqs = o.max_num_seqs,
      .explicit_bytes = o.kv_cache_bytes,
      .explicit_blocks = o.kv_cache_blocks,
      .available_bytes = available,
      .weight_bytes =
          static_cast<int64_t>(se.model->weight_bytes() + (draft ? draft->weight_bytes() : 0)),
      .memory_fraction = o.kv_memory_fraction,
      .group_windows = se.kv_layout.group_window,
      .max_chunk_tokens = o.max_num_batched_tokens,
      .draft_bytes_per_block =
          draft ? static_cast<int64_t>(
                      draft->KvBytesPerBlock(draft_layout, se.block_size, o.kv_dtype))
                : 0,
      .draft_group_windows = draft_layout.group_window};
  ASSIGN_OR_RETURN(se.kv, SizeKvCache(in));
  if (se.kv.lowered) {
    TLOG(WARN) << "max-model-len lowered from the model's " << cfg.n_ctx_train << " to "
               << se.kv.max_model_len << " tokens: the KV cache budget of "
               << (se.kv.budget_bytes >> 20) << " MiB holds no more (set --kv-cache-memory, "
               << "--kv-cache-memory-fraction or --max-model-len)";
  }

  EngineConfig ec;
  ec.scheduler.max_num_batched_tokens = o.max_num_batched_tokens;
  ec.scheduler.max_num_seqs = o.max_num_seqs;
  ec.scheduler.short_prefill_tokens = o.short_prefill_tokens;
  ec.scheduler.max_prefill_tokens_while_decoding = o.max_prefill_tokens_while_decoding;
  ec.scheduler.policy = o.priority_scheduling ? SchedulePolicy::kPriority : SchedulePolicy::kFcfs;
  ec.burst_gather_quiet = std::chrono::microseconds(std::llround(o.burst_gather_ms * 1e3));
  ec.burst_gather_max = std::chrono::microseconds(std::llround(o.burst_gather_max_ms * 1e3));
  ec.kv.num_blocks = static_cast<int>(se.kv.num_blocks);
  ec.kv.block_size = static_cast<int>(se.block_size);
  ec.kv.enable_prefix_caching = o.enable_prefix_caching;
  ec.kv.group_windows = se.kv_layout.group_window;
  se.kv_events = o.kv_events;
  ec.kv.event_sink = se.kv_events.get();
  ec.max_model_len = se.kv.max_model_len;
  ec.eos_token_ids = se.eos_token_ids;
  if (se.tokenizer) ec.detokenizer = std::make_shared<TokenizerDetokenizer>(se.tokenizer);
  ec.speculative = o.speculative;
  ec.kv_stores = o.kv_stores;
  ASSIGN_OR_RETURN(std::vector<std::shared_ptr<kv::BlockStore>> tiers,
                   OffloadTiers(o, resolved.model_path, se.kv_layout, se.block_size));
  ec.kv_stores.insert(ec.kv_stores.end(), tiers.begin(), tiers.end());
  se.threads = o.threads > 0 ? o.threads : HardwareThreads();
  ASSIGN_OR_RETURN(std::unique_ptr<ModelAdapter> executor,
                   ModelAdapter::Create(se.model, se.kv_layout, se.kv.num_blocks, se.block_size,
                                        se.threads, o.kv_dtype));
  std::unique_ptr<ModelAdapter> draft_executor;
  if (draft) {
    ec.draft_num_blocks = static_cast<int>(se.kv.draft_num_blocks);
    ec.draft_group_windows = draft_layout.group_window;
    ASSIGN_OR_RETURN(draft_executor, ModelAdapter::CreateOnPool(
                                         draft, draft_layout, se.kv.draft_num_blocks,
                                         se.block_size, executor->pool(), o.kv_dtype));
  }
  ASSIGN_OR_RETURN(se.core, EngineCore::Create(ec, std::move(executor), std::move(draft_executor)));

  std::ostringstream summary;
  summary << cfg.arch << " model '" << cfg.name << "' (" << (se.model->weight_bytes() >> 20)
          << " MiB of weights), context " << se.kv.max_model_len << ", KV cache "
          << se.kv.num_blocks << " blocks of " << se.block_size << " tokens ("
          << (se.kv.budget_bytes >> 20) << " MiB, " << kernels::KvDtypeName(o.kv_dtype);
  if (se.kv_layout.n_groups() > 1 || se.kv_layout.group_window[0] > 0) {
    int sliding = 0;
    for (int64_t w : se.kv_layout.group_window) sliding += w > 0;
    summary << ", " << se.kv_layout.n_groups() << " layer groups of "
            << se.kv_layout.layers_per_block << " layers, " << sliding << " keeping a window of "
            << cfg.sliding_window << " positions";
  }
  summary << "), chat template: " << (se.chat_template ? "yes" : "none");
  if (o.kv_offload_memory > 0)
    summary << ", host KV tier " << (o.kv_offload_memory >> 20) << " MiB";
  if (!o.kv_offload_dir.empty()) {
    summary << ", disk KV tier " << (o.kv_offload_disk >> 20) << " MiB in " << o.kv_offload_dir;
  }
  if (o.speculative.enabled()) {
    summary << ", speculative " << spec::SpecMethodName(o.speculative.method)
            << " k=" << o.speculative.num_speculative_tokens;
    if (draft) {
      summary << " (draft '" << draft->config().name << "', " << (draft->weight_bytes() >> 20)
              << " MiB, its own KV pool of " << se.kv.draft_num_blocks << " blocks)";
    }
  }
  se.summary = summary.str();
  return se;
}

}  // namespace tachyon::engine
