// Model: a loaded decoder-only transformer (GGUF, memory-mapped) that computes logits for a
// flat batch of tokens of several sequences over a paged KV cache.
//
//   ASSIGN_OR_RETURN(auto model, Model::Load("model.gguf"));
//   ASSIGN_OR_RETURN(auto kv, model->CreateKvCache(/*n_blocks=*/256));
//   Batch batch;  // see model/batch.h
//   ForwardOutput out;
//   RETURN_IF_ERROR(model->Forward(batch, kv.get(), &pool, &out));
//   const float* logits = out.Row(out.seq_first_row[0]);  // [n_vocab]
//
// Thread-safety: Load is thread-safe; a Model serves one Forward at a time (the engine
// thread); config() and the accessors may be read concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/attention.h"
#include "model/batch.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/layers.h"
#include "model/profile.h"
#include "model/weights.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace tachyon::model {

struct ArchDef;  // model/arch.h

inline constexpr int64_t kDefaultBlockSize = 16;

// Logits of one Forward call.
struct ForwardOutput {
  std::vector<float> logits;  // [n_rows, n_vocab] (grow-only; may be larger)
  int64_t n_rows = 0;
  int64_t n_vocab = 0;
  // Row of sequence s's first logits: it has num_logits rows (its last num_logits new
  // tokens, in order). [n_seqs]
  std::vector<int64_t> seq_first_row;
  const float* Row(int64_t r) const { return logits.data() + r * n_vocab; }
};

// Pooled results of one Model::Pool call, one row per sequence.
struct PoolOutput {
  int64_t dim = 0;            // n_embd, or n_cls_out for PoolingType::kRank
  std::vector<float> values;  // [n_seqs, dim]
  const float* Row(int64_t s) const { return values.data() + s * dim; }
};

// How Model::Load prepares the weights.
struct LoadOptions {
  // Quantize on load: "" keeps the stored types; "q8_0", "q4_0" or "q4_k" converts every
  // F32 / F16 / BF16 matrix with the per-tensor choices of `tachyon quantize --type` Q8_0,
  // Q4_0, Q4_K_M (model/hf_quantize.h: 1-D tensors stay F32, rows that do not fit the block
  // fall back); matrices already quantized are kept.
  std::string quantize;
  int threads = 0;  // threads for the conversion; <= 0: one per hardware thread
};

class Model {
 public:
  // Maps and validates the file: supported architecture, every tensor present with the
  // right shape and a supported type. Errors name the file and the key/tensor.
  // `path` is a GGUF file or a Hugging Face folder (model/hf_load.h).
  static Result<std::unique_ptr<Model>> Load(const std::string& path);
  static Result<std::unique_ptr<Model>> Load(const std::string& path, const LoadOptions& options);

  const ModelConfig& config() const { return config_; }
  const gguf::GgufFile& file() const { return *file_; }
  const ModelWeights& weights() const { return weights_; }
  // Bytes of all weight tensors the model uses.
  uint64_t weight_bytes() const { return weight_bytes_; }
  // Multiply-adds of the matrix multiplies one token goes through (every linear layer and the
  // output matrix; for mixture-of-experts layers the router and n_experts_used experts): the
  // work the int8 compute roofline of `tachyon bench` counts, 2 ops each.
  uint64_t matmul_macs_per_token() const;

  // Bytes one KV block of `block_size` positions takes (all layers, K and V) in `dtype`.
  // f16 (the default) takes half of f32, so a memory budget holds twice the blocks.
  size_t KvBytesPerBlock(int64_t block_size = kDefaultBlockSize,
                         KvDtype dtype = kDefaultKvDtype) const;
  // A KV cache of n_blocks blocks for this model. Errors: InvalidArgument when the dtype
  // cannot hold this model's head_dim (q8_0, q4_0, q4_1 need a multiple of 32),
  // ResourceExhausted.
  Result<std::unique_ptr<KvCache>> CreateKvCache(int64_t n_blocks,
                                                 int64_t block_size = kDefaultBlockSize,
                                                 KvDtype dtype = kDefaultKvDtype) const;
  // The model's layer groups for a hybrid KV cache (model/kv_cache.h): each layer's window
  // is config().sliding_window for a sliding layer, else 0. Models without sliding layers get
  // KvLayout::Single (one group, the plain cache); Gemma 3 its global and sliding groups.
  KvLayout HybridKvLayout() const;
  // Bytes one block of `layout` takes, and a cache in that layout. Forward then reads each
  // sequence's block table as one section per group (model/batch.h).
  size_t KvBytesPerBlock(const KvLayout& layout, int64_t block_size, KvDtype dtype) const;
  Result<std::unique_ptr<KvCache>> CreateKvCache(const KvLayout& layout, int64_t n_blocks,
                                                 int64_t block_size, KvDtype dtype) const;

  // Runs every token of `batch` through the model, writing each token's K/V into `kv` at its
  // position (through its sequence's block table), and fills `out` with the requested
  // logits: for each sequence in order, the rows of its last num_logits new tokens
  // (batch.h), in order. `pool` may be null (single-threaded).
  // Errors (InvalidArgument, nothing computed): token id out of range, a sequence slice
  // outside `tokens` or overlapping another, tokens not covered by a sequence, a block
  // table too short or naming a block outside the cache, a KV cache of another shape.
  Status Forward(const Batch& batch, KvCache* kv, ThreadPool* pool, ForwardOutput* out);

  // Pooling (embedding and reranking models): runs every sequence of `batch` whole
  // (pos_start 0, all its tokens in this call) and gives one row per sequence: the final
  // hidden states (decoders: after output_norm) pooled by `pooling` (kMean: mean over the
  // tokens, kCls: the first, kLast: the last), L2-normalised when
  // config().normalize_embeddings; kRank: the classification head's logits of the first
  // token (encoders with cls / cls.output). Encoders attend bidirectionally within a
  // sequence; decoders causally. K/V pass through `kv` (any blocks the batch names; nothing
  // in them is meaningful afterwards). Errors (InvalidArgument, nothing computed): those of
  // Forward, pos_start != 0, a position beyond an encoder's position table, a token type out
  // of range, kNone, kRank without a head. Same thread-safety as Forward (shares its state).
  Status Pool(const Batch& batch, PoolingType pooling, KvCache* kv, ThreadPool* pool,
              PoolOutput* out);

  // Per-op wall time accumulated by Forward since the last ResetProfile, when the
  // environment has TACHYON_PROFILE=1 (model/profile.h; FormatProfile prints it). Without
  // it the profile stays empty and Forward pays one branch per op.
  const OpProfile& profile() const { return profile_; }
  void ResetProfile() { profile_.Reset(); }
  // Turns profiling on or off regardless of the environment.
  void SetProfiling(bool on) { profiling_ = on; }
  // While set, Forward calls hook(l) on its calling thread as soon as layer l's K/V of every
  // token of the batch is stored, for l = 0, 1, ... in order, before later layers run (KV
  // transfer streams a prefill chunk layer by layer, engine/pd_export.h). The hook must not
  // touch the model. Empty: none (one branch per layer).
  void SetLayerKvHook(std::function<void(int64_t layer)> hook) { layer_kv_hook_ = std::move(hook); }
  // Forward computes the logits of tokens [0, n) only (the first n rows of the output
  // matrix, e.g. a draft model's frequent tokens; docs/speculative.md): out->n_vocab is n and
  // each row equals the first n entries of the full row, bit for bit. n <= 0 or >= n_vocab:
  // the whole vocabulary (the default).
  void SetLogitRows(int64_t n) { logit_rows_ = n > 0 && n < config_.n_vocab ? n : 0; }
  // The width of the logit rows Forward writes (config().n_vocab unless SetLogitRows).
  int64_t logit_rows() const { return logit_rows_ > 0 ? logit_rows_ : config_.n_vocab; }
  // Computes the norms and SiLU x up inside the matmuls' activation conversion (on by
  // default; TACHYON_FUSE=0) or as passes of their own: the same logits bit for bit.
  void SetFusedInputs(bool on) { ctx_.fuse_inputs = on; }

 private:
  Model() = default;
  Status LoadWeights(const ArchDef& def);
  // Validates the batch and lays out the step (StepContext): with decode_rows, the slices'
  // decode rows (SequenceSlice::decode_start) come first; without, the rows are the batch's.
  Status PrepareStep(const Batch& batch, KvCache* kv, ForwardOutput* out, bool decode_rows);
  void Embed(const Batch& batch, ThreadPool* pool);
  void ComputeLogits(ThreadPool* pool, ForwardOutput* out);

  std::unique_ptr<gguf::GgufFile> file_;
  std::unique_ptr<TensorSource> source_;
  ModelConfig config_;
  ModelWeights weights_;
  uint64_t weight_bytes_ = 0;

  // Per-step state, reused across calls.
  Scratch scratch_;
  StepContext ctx_;
  kernels::AttentionScratch attn_scratch_;
  ForwardOutput pool_logits_;               // Pool: PrepareStep's row bookkeeping (no logits)
  std::vector<int64_t> out_token_;          // [n_rows] step row of each logits row
  std::vector<float> out_x_;                // [n_rows, n_embd]
  std::vector<int64_t> token_row_;          // [n_tokens] step row of each batch token
  std::vector<int64_t> row_token_;          // [n_tokens] batch token of each step row
  std::vector<int64_t> seq_slice_;          // [n_seqs] the slice each attention sequence is part of
  std::vector<int64_t> slice_decode_rows_;  // [batch slices] decode rows of each
  std::vector<int64_t> logit_order_;        // [n_rows] output rows, decode rows' first
  std::vector<int64_t> logit_src_;          // [n_rows] their step rows
  std::vector<float> logits_tmp_;           // logits in logit_order_ when it is not the identity
  OpProfile profile_;
  bool profiling_ = ProfilingEnabled();
  int64_t logit_rows_ = 0;  // SetLogitRows; 0: all of n_vocab
  std::function<void(int64_t)> layer_kv_hook_;  // SetLayerKvHook
};

}  // namespace tachyon::model
