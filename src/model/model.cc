#include "model/model.h"

#include <chrono>
#include <cmath>
#include <cstring>

#include "kernels/fused_rows.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/arch.h"
#include "model/hf_convert.h"
#include "model/hf_load.h"

namespace tachyon::model {

namespace {
constexpr int64_t kMaxPosition = int64_t{1} << 40;
constexpr int64_t kMaxVocab = int64_t{1} << 24;
}  // namespace

Result<std::unique_ptr<Model>> Model::Load(const std::string& path, const LoadOptions& options) {
  if (!options.quantize.empty()) return LoadQuantized(path, options);
  return Load(path);
}

Result<std::unique_ptr<Model>> Model::Load(const std::string& path) {
  if (IsHfModelFolder(path)) return LoadHfModel(path);  // config.json + safetensors
  ASSIGN_OR_RETURN(gguf::GgufFile file, gguf::GgufFile::Open(path));
  std::unique_ptr<Model> m(new Model());
  m->file_ = std::make_unique<gguf::GgufFile>(std::move(file));
  const std::string arch = m->file_->Architecture();
  if (arch.empty()) return InvalidArgument(path + ": missing metadata key general.architecture");
  const ArchDef* def = FindArch(arch);
  if (def == nullptr) {
    return Unimplemented(path + ": unsupported architecture '" + arch +
                         "' (supported: " + SupportedArchNames() + ")");
  }
  ASSIGN_OR_RETURN(m->config_, ReadBaseConfig(*m->file_, arch));
  RETURN_IF_ERROR(def->configure(ArchKeys(*m->file_, arch), &m->config_));
  m->source_ = std::make_unique<TensorSource>(*m->file_);
  RETURN_IF_ERROR(m->LoadWeights(*def));
  for (int64_t il = 0; il < m->config_.n_layers; ++il) {
    m->weights_.layers.emplace_back();
    RETURN_IF_ERROR(def->load_layer(*m->source_, m->config_, il, &m->weights_.layers.back()));
  }
  m->source_->FinishLoad();  // writes the packed-weight cache after a miss
  m->weight_bytes_ = m->source_->bytes_used();
  return m;
}

uint64_t Model::matmul_macs_per_token() const {
  auto macs = [](const kernels::Weight& w) {
    return static_cast<uint64_t>(w.rows) * static_cast<uint64_t>(w.cols);
  };
  uint64_t total = macs(weights_.output);
  for (const LayerWeights& l : weights_.layers) {
    total += macs(l.wq) + macs(l.wk) + macs(l.wv) + macs(l.wo);
    if (l.is_moe()) {
      // experts_* describe one expert's matrix (ExpertSlice); a token runs n_experts_used.
      const uint64_t per_expert = macs(l.experts_gate) + macs(l.experts_up) + macs(l.experts_down);
      total += macs(l.router) + per_expert * static_cast<uint64_t>(config_.n_experts_used);
    } else {
      total += macs(l.w_gate) + macs(l.w_up) + macs(l.w_down);
    }
  }
  return total;
}

Status Model::LoadWeights(const ArchDef& def) {
  ModelConfig& c = config_;
  TensorSource& src = *source_;
  const std::string& path = file_->path();
  const gguf::TensorInfo* embd = file_->FindTensor("token_embd.weight");
  if (embd == nullptr) return InvalidArgument(path + ": missing tensor token_embd.weight");
  if (embd->dims.size() != 2 || embd->dims[0] != c.n_embd || embd->dims[1] <= 0 ||
      embd->dims[1] > kMaxVocab) {
    return InvalidArgument(path + ": tensor token_embd.weight must have shape [" +
                           std::to_string(c.n_embd) + ", n_vocab]");
  }
  c.n_vocab = embd->dims[1];
  ArchKeys keys(*file_, c.arch);
  if (std::optional<int64_t> v = file_->GetInt(keys.Key("vocab_size")); v && *v != c.n_vocab) {
    return InvalidArgument(path + ": " + keys.Key("vocab_size") + " = " + std::to_string(*v) +
                           " but token_embd.weight has " + std::to_string(c.n_vocab) + " rows");
  }
  ASSIGN_OR_RETURN(weights_.token_embd, src.Table("token_embd.weight", c.n_embd, c.n_vocab));
  if (def.load_globals != nullptr) return def.load_globals(src, &c, &weights_);
  ASSIGN_OR_RETURN(weights_.output_norm, src.Vector("output_norm.weight", c.n_embd));
  c.tied_output = !src.Has("output.weight");
  if (c.tied_output) {
    weights_.output = src.PackForMatMul(weights_.token_embd);
  } else {
    ASSIGN_OR_RETURN(weights_.output, src.Matrix("output.weight", c.n_embd, c.n_vocab));
  }
  ASSIGN_OR_RETURN(weights_.rope_freqs, src.OptionalVector("rope_freqs.weight", c.rot_dim / 2));
  return ComputeRopeFrequencies(keys, weights_.rope_freqs, &c);
}

size_t Model::KvBytesPerBlock(int64_t block_size, KvDtype dtype) const {
  return KvCache::BytesPerBlock(config_.n_layers, block_size, config_.n_kv_heads, config_.head_dim,
                                dtype);
}

Result<std::unique_ptr<KvCache>> Model::CreateKvCache(int64_t n_blocks, int64_t block_size,
                                                      KvDtype dtype) const {
  return KvCache::Create(config_.n_layers, n_blocks, block_size, config_.n_kv_heads,
                         config_.head_dim, dtype);
}

namespace {

// Every layer whose group keeps only a window must attend within that window.
Status CheckKvLayout(const ModelConfig& c, const KvLayout& layout) {
  if (layout.n_layers() != c.n_layers) {
    return InvalidArgument("KV cache layout has " + std::to_string(layout.n_layers()) +
                           " layers, the model " + std::to_string(c.n_layers));
  }
  for (int64_t il = 0; il < c.n_layers; ++il) {
    const int64_t w = layout.group_window[layout.layer_group[il]];
    if (w != 0 && (!c.IsSlidingLayer(il) || w < c.sliding_window)) {
      return InvalidArgument("KV cache layout: layer " + std::to_string(il) +
                             " cannot keep only a window of " + std::to_string(w) + " positions");
    }
  }
  return OkStatus();
}

}  // namespace

KvLayout Model::HybridKvLayout() const {
  std::vector<int64_t> windows(static_cast<size_t>(config_.n_layers));
  for (int64_t il = 0; il < config_.n_layers; ++il) {
    windows[il] = config_.IsSlidingLayer(il) ? config_.sliding_window : 0;
  }
  return KvLayout::Hybrid(windows);
}

size_t Model::KvBytesPerBlock(const KvLayout& layout, int64_t block_size, KvDtype dtype) const {
  return KvCache::BytesPerBlock(layout, block_size, config_.n_kv_heads, config_.head_dim, dtype);
}

Result<std::unique_ptr<KvCache>> Model::CreateKvCache(const KvLayout& layout, int64_t n_blocks,
                                                      int64_t block_size, KvDtype dtype) const {
  RETURN_IF_ERROR(CheckKvLayout(config_, layout));
  return KvCache::Create(layout, n_blocks, block_size, config_.n_kv_heads, config_.head_dim, dtype);
}

Status Model::PrepareStep(const Batch& batch, KvCache* kv, ForwardOutput* out, bool decode_rows) {
  const ModelConfig& c = config_;
  if (kv == nullptr || kv->n_layers() != c.n_layers || kv->n_kv_heads() != c.n_kv_heads ||
      kv->head_dim() != c.head_dim) {
    return InvalidArgument("Forward: KV cache does not match the model's shape");
  }
  if (kv->n_groups() > 1 || kv->layout().group_window[0] > 0) {
    RETURN_IF_ERROR(CheckKvLayout(c, kv->layout()).WithContext("Forward"));
  }
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  if (n == 0 || batch.seqs.empty()) return InvalidArgument("Forward: empty batch");
  for (int64_t i = 0; i < n; ++i) {
    if (batch.tokens[i] < 0 || batch.tokens[i] >= c.n_vocab) {
      return InvalidArgument("Forward: token id " + std::to_string(batch.tokens[i]) + " at index " +
                             std::to_string(i) + " is outside the vocabulary [0, " +
                             std::to_string(c.n_vocab) + ")");
    }
  }
  const int64_t bs = kv->block_size();
  // Layer groups (model/kv_cache.h): each table is n_groups sections, one per group.
  const int64_t n_groups = kv->n_groups();
  const KvLayout& layout = kv->layout();
  // Validation; token_row_ marks the tokens some sequence covers.
  token_row_.assign(n, -1);
  std::vector<int64_t>& n_decode_of = slice_decode_rows_;  // [n_seqs] decode rows per slice
  n_decode_of.assign(batch.seqs.size(), 0);
  int64_t n_decode = 0;
  for (size_t si = 0; si < batch.seqs.size(); ++si) {
    const SequenceSlice& sq = batch.seqs[si];
    const std::string where = "Forward: sequence " + std::to_string(si);
    if (sq.n_tokens < 1 || sq.token_start < 0 || sq.token_start > n - sq.n_tokens) {
      return InvalidArgument(where + ": tokens [" + std::to_string(sq.token_start) + ", +" +
                             std::to_string(sq.n_tokens) + ") are outside the batch");
    }
    if (sq.pos_start < 0 || sq.pos_start > kMaxPosition) {
      return InvalidArgument(where + ": bad pos_start " + std::to_string(sq.pos_start));
    }
    const int64_t end = sq.pos_start + sq.n_tokens;
    const int64_t need_blocks = (end + bs - 1) / bs;
    const int64_t table_len = static_cast<int64_t>(sq.block_table.size());
    if (table_len % n_groups != 0) {
      return InvalidArgument(where + ": block table of " + std::to_string(table_len) +
                             " entries is not " + std::to_string(n_groups) +
                             " equal sections (one per KV layer group)");
    }
    const int64_t section = table_len / n_groups;
    if (section < need_blocks) {
      return InvalidArgument(where + ": block table has " + std::to_string(section) +
                             " blocks, positions up to " + std::to_string(end) + " need " +
                             std::to_string(need_blocks));
    }
    for (int64_t g = 0; g < n_groups; ++g) {
      // A sliding group's blocks before its window of pos_start are never read (may be -1).
      const int64_t w = layout.group_window[g];
      const int64_t live = w > 0 ? std::max<int64_t>(0, sq.pos_start - w + 1) / bs : 0;
      for (int64_t b = 0; b < need_blocks; ++b) {
        const int32_t id = sq.block_table[g * section + b];
        if ((id < 0 && b >= live) || id >= kv->n_blocks()) {
          return InvalidArgument(where + ": block id " + std::to_string(id) +
                                 " is outside the KV cache [0, " + std::to_string(kv->n_blocks()) +
                                 ")");
        }
      }
    }
    for (int64_t t = sq.token_start; t < sq.token_start + sq.n_tokens; ++t) {
      if (token_row_[t] != -1) {
        return InvalidArgument(where + ": token " + std::to_string(t) +
                               " already belongs to another sequence");
      }
      token_row_[t] = 0;
    }
    if (sq.copy_src >= 0 &&
        (n_groups != 1 || sq.pos_start % bs == 0 || sq.copy_src >= kv->n_blocks())) {
      return InvalidArgument(where + ": bad slot copy from block " + std::to_string(sq.copy_src) +
                             " (one KV group, pos_start inside a block)");
    }
    if (sq.num_logits < 1 || sq.num_logits > sq.n_tokens) {
      return InvalidArgument(where + ": asks for logits of " + std::to_string(sq.num_logits) +
                             " tokens, it has " + std::to_string(sq.n_tokens) + " new tokens");
    }
    if (decode_rows && sq.decode_start < end) {
      n_decode_of[si] = end - std::max(sq.decode_start, sq.pos_start);
      n_decode += n_decode_of[si];
    }
  }
  for (int64_t t = 0; t < n; ++t) {
    if (token_row_[t] == -1) {
      return InvalidArgument("Forward: token " + std::to_string(t) + " belongs to no sequence");
    }
  }
  scratch_.Reserve(c, n);
  ctx_.config = &config_;
  ctx_.s = &scratch_;
  ctx_.kv = kv;
  ctx_.attn_scratch = &attn_scratch_;
  ctx_.n_tokens = n;
  ctx_.n_decode_rows = n_decode;
  ctx_.positions.resize(n);
  ctx_.seqs.clear();
  ctx_.copies.clear();
  for (const SequenceSlice& sq : batch.seqs) {
    if (sq.copy_src >= 0) {
      ctx_.copies.push_back({sq.copy_src, sq.block_table[sq.pos_start / bs], sq.pos_start % bs});
    }
  }
  ctx_.kv_slot.resize(n * n_groups);
  row_token_.resize(n);
  seq_slice_.clear();
  // The step's rows: the batch's decode rows first, then its other rows, each set in batch
  // order (the identity when no prompt row comes before a decode row). Each part of a slice
  // (its prompt rows, its decode rows) stays contiguous and attends as a sequence of its own:
  // its earlier positions, the other part's included, are in the cache by then.
  for (size_t si = 0; si < batch.seqs.size(); ++si) {
    const SequenceSlice& sq = batch.seqs[si];
    for (int64_t j = sq.n_tokens - n_decode_of[si]; j < sq.n_tokens; ++j) {
      token_row_[sq.token_start + j] = 1;
    }
  }
  int64_t next_row[2] = {n_decode, 0};  // [0]: prompt rows, [1]: decode rows
  for (int64_t t = 0; t < n; ++t) {
    const int64_t r = next_row[token_row_[t]]++;
    token_row_[t] = r;
    row_token_[r] = t;
  }
  for (size_t si = 0; si < batch.seqs.size(); ++si) {
    const SequenceSlice& sq = batch.seqs[si];
    const int64_t section = static_cast<int64_t>(sq.block_table.size()) / n_groups;
    const int64_t n_prompt = sq.n_tokens - n_decode_of[si];
    for (int part = 0; part < 2; ++part) {
      const int64_t j0 = part == 0 ? 0 : n_prompt, j1 = part == 0 ? n_prompt : sq.n_tokens;
      if (j0 == j1) continue;
      const int64_t row0 = token_row_[sq.token_start + j0];
      for (int64_t j = j0; j < j1; ++j) {
        const int64_t pos = sq.pos_start + j, r = row0 + (j - j0);
        ctx_.positions[r] = pos;
        for (int64_t g = 0; g < n_groups; ++g) {
          ctx_.kv_slot[g * n + r] = int64_t{sq.block_table[g * section + pos / bs]} * bs + pos % bs;
        }
      }
      kernels::AttentionSeq as;
      as.block_table = sq.block_table.data();
      as.pos_start = sq.pos_start + j0;
      as.n_tokens = j1 - j0;
      as.q = scratch_.q.data() + row0 * c.q_dim();
      as.out = scratch_.attn.data() + row0 * c.q_dim();
      as.decode_rows = part == 1;
      ctx_.seqs.push_back(as);
      seq_slice_.push_back(static_cast<int64_t>(si));
    }
  }
  // Logits rows: per slice in order (ForwardOutput); out_token_ names each one's step row.
  out_token_.clear();
  out->seq_first_row.clear();
  for (const SequenceSlice& sq : batch.seqs) {
    out->seq_first_row.push_back(static_cast<int64_t>(out_token_.size()));
    for (int64_t j = sq.n_tokens - sq.num_logits; j < sq.n_tokens; ++j) {
      out_token_.push_back(token_row_[sq.token_start + j]);
    }
  }
  // Group g's sequences follow group 0's, with their table pointers on section g.
  const size_t n_seqs = ctx_.seqs.size();
  for (int64_t g = 1; g < n_groups; ++g) {
    for (size_t i = 0; i < n_seqs; ++i) {
      kernels::AttentionSeq as = ctx_.seqs[i];
      const std::vector<int32_t>& bt = batch.seqs[seq_slice_[i]].block_table;
      as.block_table = bt.data() + g * (static_cast<int64_t>(bt.size()) / n_groups);
      ctx_.seqs.push_back(as);
    }
  }
  ctx_.n_seqs = static_cast<int64_t>(n_seqs);
  return OkStatus();
}

void Model::Embed(const Batch& batch, ThreadPool* pool) {
  const kernels::Weight& e = weights_.token_embd;
  const int64_t d = config_.n_embd;
  const float scale = config_.embd_scale;
  float* x = scratch_.x.data();
  auto embed = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const uint8_t* row =
          static_cast<const uint8_t*>(e.data) + batch.tokens[row_token_[i]] * e.row_bytes;
      float* xi = x + i * d;
      kernels::DequantizeRow(e.type, row, xi, d);
      if (scale != 1.0f) {
        for (int64_t j = 0; j < d; ++j) xi[j] *= scale;
      }
    }
  };
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  if (pool != nullptr && n > 16) {
    pool->ParallelFor(n, embed, 8);
  } else {
    embed(0, n);
  }
}

void Model::ComputeLogits(ThreadPool* pool, ForwardOutput* out) {
  const ModelConfig& c = config_;
  const int64_t rows = static_cast<int64_t>(out_token_.size());
  // The decode rows' logits first (one matmul call may take them with decode_rows), then the
  // others: logit_order_[k] is the output row computed k-th, logit_src_[k] its step row.
  logit_order_.clear();
  for (int pass = 0; pass < 2; ++pass) {
    for (int64_t r = 0; r < rows; ++r) {
      if ((out_token_[r] < ctx_.n_decode_rows) == (pass == 0)) logit_order_.push_back(r);
    }
  }
  int64_t n_decode = 0;
  bool in_order = true;
  logit_src_.resize(rows);
  for (int64_t k = 0; k < rows; ++k) {
    logit_src_[k] = out_token_[logit_order_[k]];
    n_decode += logit_src_[k] < ctx_.n_decode_rows;
    in_order = in_order && logit_order_[k] == k;
  }
  // The output norm of each gathered row runs inside the matmul's activation conversion
  // (kernels/fused_rows.h), or as a gather + RmsNorm pass when fusion is off.
  const kernels::RmsNormRows normed(scratch_.x.data(), nullptr, weights_.output_norm, c.n_embd,
                                    c.rms_eps, logit_src_.data());
  if (!ctx_.fuse_inputs) {
    if (out_x_.size() < static_cast<size_t>(rows * c.n_embd)) out_x_.resize(rows * c.n_embd);
    for (int64_t r = 0; r < rows; ++r) normed.Row(r, out_x_.data() + r * c.n_embd);
  }
  const int64_t n_vocab = logit_rows();
  if (out->logits.size() < static_cast<size_t>(rows * n_vocab)) {
    out->logits.resize(rows * n_vocab);
  }
  out->n_rows = rows;
  out->n_vocab = n_vocab;
  const size_t row_floats = static_cast<size_t>(n_vocab);
  if (!in_order && logits_tmp_.size() < static_cast<size_t>(rows) * row_floats) {
    logits_tmp_.resize(static_cast<size_t>(rows) * row_floats);
  }
  float* y = in_order ? out->logits.data() : logits_tmp_.data();
  // A prefix of the output matrix's rows is a matrix of its own (the GGUF rows and the packed
  // tiles are both row-major; a partial last tile computes only its first rows).
  kernels::Weight output = weights_.output;
  output.rows = n_vocab;
  const kernels::Weight* ws[] = {&output};
  float* ys[] = {y};
  if (ctx_.fuse_inputs) {
    kernels::MatMulMultiRows(ws, normed, rows, ys, pool, n_decode);
  } else {
    kernels::MatMulMulti(ws, out_x_.data(), rows, ys, pool, n_decode);
  }
  if (!in_order) {
    for (int64_t k = 0; k < rows; ++k) {
      std::memcpy(out->logits.data() + logit_order_[k] * row_floats, y + k * row_floats,
                  row_floats * sizeof(float));
    }
  }
  if (const float cap = c.final_logit_softcap; cap > 0) {
    float* l = out->logits.data();
    for (int64_t i = 0; i < rows * n_vocab; ++i) l[i] = cap * std::tanh(l[i] / cap);
  }
}

Status Model::Forward(const Batch& batch, KvCache* kv, ThreadPool* pool, ForwardOutput* out) {
  const bool profiling = profiling_;
  const auto t0 =
      profiling ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  double ops_before = 0;
  if (profiling) {
    for (double s : profile_.seconds) ops_before += s;
  }
  if (config_.encoder) {
    return InvalidArgument("Forward: " + config_.name +
                           " is an encoder (embeddings / scores only); use Pool");
  }
  RETURN_IF_ERROR(PrepareStep(batch, kv, out, /*decode_rows=*/true));
  ctx_.pool = pool;
  ctx_.prof = profiling ? &profile_ : nullptr;
  ctx_.pending_residual = false;
  {
    OpTimer t(ctx_.prof, OpKind::kEmbed);
    Embed(batch, pool);
  }
  for (int64_t il = 0; il < config_.n_layers; ++il) {
    const LayerWeights& w = weights_.layers[il];
    AttentionBlock(ctx_, w, il);
    if (layer_kv_hook_) layer_kv_hook_(il);
    FfnBlock(ctx_, w);
  }
  FinishLayers(ctx_);
  {
    OpTimer t(ctx_.prof, OpKind::kLogits);
    ComputeLogits(pool, out);
  }
  if (profiling) {
    const double total =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double ops_after = 0;
    for (double s : profile_.seconds) ops_after += s;
    // Whatever no timed region covered (validation, gathers) counts as "other".
    profile_.seconds[static_cast<int>(OpKind::kOther)] += total - (ops_after - ops_before);
    profile_.total_seconds += total;
    profile_.forwards += 1;
    profile_.tokens += static_cast<int64_t>(batch.tokens.size());
  }
  return OkStatus();
}

}  // namespace tachyon::model
