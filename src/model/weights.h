// Weights of a decoder-only transformer, as views into the memory-mapped GGUF file, and the
// TensorSource that finds and validates them. Pointers stay valid while the GgufFile lives.
//
// A matrix is a kernels::Weight with `rows` output features of `cols` inputs (GGUF dims
// [cols, rows]). Vectors (norm weights, biases) are f32; a file that stores them in another
// type is converted once at load into storage owned by TensorSource.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/matmul.h"
#include "kernels/pack.h"
#include "model/pack_cache.h"
#include "util/status.h"

namespace tachyon::model {

struct LayerWeights {
  const float* attn_norm = nullptr;  // [n_embd]
  kernels::Weight wq;                // [n_embd] -> [n_heads * head_dim]
  kernels::Weight wk;                // [n_embd] -> [n_kv_heads * head_dim]
  kernels::Weight wv;                // [n_embd] -> [n_kv_heads * head_dim]
  kernels::Weight wo;                // [n_heads * head_dim] -> [n_embd]
  const float* bq = nullptr;         // [n_heads * head_dim], optional (qwen2)
  const float* bk = nullptr;         // [n_kv_heads * head_dim], optional
  const float* bv = nullptr;         // [n_kv_heads * head_dim], optional
  const float* q_norm = nullptr;     // [head_dim], optional (qwen3)
  const float* k_norm = nullptr;     // [head_dim], optional
  // [n_embd] each, when config.post_norms (Gemma): post_attention_norm, post_ffw_norm.
  const float* post_attn_norm = nullptr;
  const float* post_ffn_norm = nullptr;

  const float* ffn_norm = nullptr;   // [n_embd]
  // Encoder (post-norm) extras: output / FFN biases and the two LayerNorms (weight, bias).
  const float* bo = nullptr;              // [n_embd]
  const float* attn_out_norm = nullptr;   // [n_embd] LayerNorm after attention + residual
  const float* attn_out_norm_b = nullptr;  // [n_embd]
  const float* b_up = nullptr;            // [n_ff]
  const float* b_down = nullptr;          // [n_embd]
  const float* out_norm = nullptr;        // [n_embd] LayerNorm after FFN + residual
  const float* out_norm_b = nullptr;      // [n_embd]
  // Dense SwiGLU FFN.
  kernels::Weight w_gate;            // [n_embd] -> [n_ff]
  kernels::Weight w_up;              // [n_embd] -> [n_ff]
  kernels::Weight w_down;            // [n_ff] -> [n_embd]
  // Mixture of experts (when router.data != null): expert e's matrix is `experts_*` with
  // data advanced by e * rows * row_bytes.
  kernels::Weight router;            // [n_embd] -> [n_experts]
  kernels::Weight experts_gate;      // per expert [n_embd] -> [n_ff_expert]
  kernels::Weight experts_up;        // per expert [n_embd] -> [n_ff_expert]
  kernels::Weight experts_down;      // per expert [n_ff_expert] -> [n_embd]

  bool is_moe() const { return router.data != nullptr; }
};

struct ModelWeights {
  kernels::Weight token_embd;        // [n_embd] rows of n_vocab tokens
  const float* output_norm = nullptr;  // [n_embd]
  kernels::Weight output;            // [n_embd] -> [n_vocab] (= token_embd when tied)
  const float* rope_freqs = nullptr;  // [rot_dim / 2], optional (Llama 3 rope scaling)
  std::vector<LayerWeights> layers;  // [n_layers]
  // Encoders: learned positions, token types and the embedding LayerNorm.
  kernels::Weight position_embd;     // [n_embd] rows of n_ctx_train positions
  kernels::Weight token_types;       // [n_embd] rows of n_token_types
  const float* embd_norm = nullptr;    // [n_embd]
  const float* embd_norm_b = nullptr;  // [n_embd]
  // Classification head (cross-encoders): cls = pooler dense (tanh), cls_out = classifier.
  kernels::Weight cls;               // [n_embd] -> [n_embd], optional
  const float* cls_b = nullptr;      // [n_embd]
  kernels::Weight cls_out;           // [n_embd] -> [n_cls_out]
  const float* cls_out_b = nullptr;  // [n_cls_out]
};

// Expert `e` of a 3-D expert tensor as a plain matrix.
kernels::Weight ExpertSlice(const kernels::Weight& experts, int64_t e);

class TensorSource {
 public:
  // Packed weights are cached on disk per PackCacheOptions::FromEnv() (model/pack_cache.h).
  explicit TensorSource(const gguf::GgufFile& file)
      : TensorSource(file, PackCacheOptions::FromEnv()) {}
  TensorSource(const gguf::GgufFile& file, PackCacheOptions cache_options)
      : file_(file), cache_options_(std::move(cache_options)) {}
  // Waits for a cache file still being written (FinishLoad).
  ~TensorSource();
  TensorSource(const TensorSource&) = delete;
  TensorSource& operator=(const TensorSource&) = delete;

  bool Has(const std::string& name) const { return file_.FindTensor(name) != nullptr; }
  // The GGUF dims of a tensor (innermost first), or null when absent.
  const std::vector<int64_t>* Dims(const std::string& name) const {
    const gguf::TensorInfo* t = file_.FindTensor(name);
    return t ? &t->dims : nullptr;
  }
  // A 2-D matrix with GGUF dims exactly [cols, rows] of a type MatMul supports, repacked
  // for MatMul (see PackForMatMul).
  Result<kernels::Weight> Matrix(const std::string& name, int64_t cols, int64_t rows);
  // The same without repacking (a table read by rows, e.g. token embeddings).
  Result<kernels::Weight> Table(const std::string& name, int64_t cols, int64_t rows);
  // A copy of w whose `packed` points at a repacked copy owned by this source, when the type
  // has a packed layout (kernels/pack.h) and TACHYON_REPACK is not "0"; w itself otherwise.
  // The copy comes from the on-disk cache when it holds this tensor (w.data in the file),
  // else packing runs (on all hardware threads for large matrices).
  kernels::Weight PackForMatMul(const kernels::Weight& w);
  // Call once every matrix is loaded: when this load packed anything (a cache miss), writes
  // the packed-weight cache on a background thread (the model is usable at once; the
  // destructor waits for the write). Failing to write is logged, not an error. `wait`: write
  // before returning (tests). Matrices requested later are packed in memory, uncached.
  void FinishLoad(bool wait = false);
  // A 3-D stack of n matrices, GGUF dims [cols, rows, n].
  Result<kernels::Weight> Experts(const std::string& name, int64_t cols, int64_t rows, int64_t n);
  // A 1-D vector of n elements as f32.
  Result<const float*> Vector(const std::string& name, int64_t n);
  // Optional variants: null / empty Weight when the tensor is absent, an error if it is
  // present but wrong.
  Result<const float*> OptionalVector(const std::string& name, int64_t n);

  // Bytes of every tensor handed out so far (each counted once).
  uint64_t bytes_used() const { return bytes_used_; }
  // Bytes of repacked copies made so far (packed here or read from the cache).
  uint64_t bytes_packed() const { return bytes_packed_; }
  // Bytes of packed copies read from the on-disk cache.
  uint64_t bytes_from_cache() const { return bytes_from_cache_; }
  // The cache file in use ("" when there is none).
  std::string pack_cache_path() const { return cache_ ? cache_->path() : std::string(); }

 private:
  Result<const gguf::TensorInfo*> Find(const std::string& name, std::vector<int64_t> dims);
  Result<kernels::Weight> ToWeight(const gguf::TensorInfo& t, int64_t cols, int64_t rows);
  // Room for a packed matrix (64-byte aligned; null when out of memory). Matrices packed in
  // memory lie one after another, in load order, in 2 MiB-aligned slabs on transparent huge
  // pages (kernels::AllocateAligned), as the cache file is read: a decode step streams them
  // with fewer TLB misses than from 4 KiB pages (bench/kernels_bench.cc DecodeChain).
  uint8_t* AllocatePacked(size_t bytes);

  const gguf::GgufFile& file_;
  PackCacheOptions cache_options_;
  std::unique_ptr<PackCache> cache_;  // opened at the first packed matrix
  bool cache_opened_ = false;
  bool load_finished_ = false;                // FinishLoad ran: cache_ is not touched here
  std::thread cache_writer_;                   // reads cache_ and packed_ until joined
  std::deque<std::vector<float>> converted_;   // vectors converted to f32
  std::deque<kernels::AlignedBuffer> packed_;  // slabs of repacked matrices
  uint8_t* slab_next_ = nullptr;               // the free part of the last slab
  size_t slab_left_ = 0;
  uint64_t bytes_used_ = 0;
  uint64_t bytes_packed_ = 0;
  uint64_t bytes_from_cache_ = 0;
};

}  // namespace tachyon::model
