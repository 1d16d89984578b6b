// Shared transformer layers: tensor loaders used by the architecture files, and the forward
// blocks that Model::Forward runs over one flat batch. Internal to model/.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/attention.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/profile.h"
#include "model/weights.h"
#include "util/thread_pool.h"

namespace tachyon::model {

// attn_norm, attn_q/k/v/output; biases if config.qkv_bias; q/k norms if config.qk_norm;
// post_attention_norm if config.post_norms.
Status LoadAttention(TensorSource& src, const ModelConfig& c, int64_t il, LayerWeights* w);
// ffn_norm, ffn_gate/up/down; post_ffw_norm if config.post_norms.
Status LoadDenseFfn(TensorSource& src, const ModelConfig& c, int64_t il, LayerWeights* w);
// ffn_norm, ffn_gate_inp (router), ffn_gate_exps/up_exps/down_exps.
Status LoadMoeFfn(TensorSource& src, const ModelConfig& c, int64_t il, LayerWeights* w);

// Grow-only activation buffers of one step (sized for the largest batch seen so far).
struct Scratch {
  std::vector<float> x;     // [n, n_embd] residual stream
  std::vector<float> xn;    // [n, n_embd] normalised input of a block
  std::vector<float> q;     // [n, q_dim]
  std::vector<float> k;     // [n, kv_dim]
  std::vector<float> v;     // [n, kv_dim]
  std::vector<float> attn;  // [n, q_dim]
  std::vector<float> tmp;   // [n, n_embd] block output
  std::vector<float> gate;  // [n, max(n_ff, n_ff_expert)]
  std::vector<float> up;    // [n, max(n_ff, n_ff_expert)]
  // MoE
  std::vector<float> router;        // [n, n_experts]
  std::vector<int32_t> expert_ids;  // [n, n_experts_used]
  std::vector<float> expert_wts;    // [n, n_experts_used]
  std::vector<int32_t> rows;        // [n] tokens routed to the current expert
  std::vector<float> rows_w;        // [n] their weights
  std::vector<float> ex_in;         // [n, n_embd] gathered inputs
  std::vector<float> ex_out;        // [n, n_embd]

  void Reserve(const ModelConfig& c, int64_t n_tokens);
};

// Whether StepContext::fuse_inputs starts on: yes unless the environment has TACHYON_FUSE=0
// (read once; for A/B benchmarks).
bool FuseInputsByDefault();

// What the blocks need to know about the current step.
struct StepContext {
  const ModelConfig* config = nullptr;
  ThreadPool* pool = nullptr;
  Scratch* s = nullptr;
  KvCache* kv = nullptr;
  kernels::AttentionScratch* attn_scratch = nullptr;
  int64_t n_tokens = 0;
  // Rows [0, n_decode_rows) are decode rows (model/batch.h, decode_start): every matmul passes
  // their count (kernels/matmul.h) and their attention sequences are marked decode_rows.
  int64_t n_decode_rows = 0;
  std::vector<int64_t> positions;  // [n_tokens]
  // Per KV layer group g (model/kv_cache.h; one group for most models), group-major:
  std::vector<int64_t> kv_slot;             // [n_groups, n_tokens] block * block_size + slot
  std::vector<kernels::AttentionSeq> seqs;  // [n_groups, n_seqs]; q / out into s->q / s->attn
  int64_t n_seqs = 0;
  // Slot copies (SequenceSlice::copy_src): in each layer, after the stores, before attention.
  struct SlotCopy {
    int32_t src, dst;
    int64_t n;
  };
  std::vector<SlotCopy> copies;
  std::vector<float> rope_cs;      // [n_tokens, rot_dim] RoPE cos/sin pairs,
                                   // computed by layer 0's AttentionBlock
  std::vector<float> rope_cs_swa;  // the same with config.rope_inv_freq_swa (when set)
  OpProfile* prof = nullptr;       // per-op wall time when profiling, else null
  // True while s->tmp holds a block output not yet added to s->x: the next norm adds it in
  // the same pass (kernels::AddRmsNorm); FinishLayers adds it before the output norm.
  bool pending_residual = false;
  // Whether the norms and SiLU x up are computed inside the matmuls' activation conversion
  // (kernels::MatMulMultiRows, kernels/fused_rows.h) instead of as passes of their own; the
  // results are the same bit for bit. Model::SetFusedInputs; TACHYON_FUSE=0 turns it off.
  bool fuse_inputs = FuseInputsByDefault();
};

// x += Wo · Attention(RoPE(Wq·xn), RoPE(Wk·xn), Wv·xn) with xn = RmsNorm(x) (the block
// output RmsNorm'd again with config.post_norms); stores this step's K/V in the cache.
// Sliding layers (config.IsSlidingLayer) see only the last sliding_window positions.
void AttentionBlock(StepContext& ctx, const LayerWeights& w, int64_t il);
// x += FFN(RmsNorm(x)), dense SwiGLU / GeGLU (config.ffn_act) or mixture of experts; the
// dense output RmsNorm'd again with config.post_norms.
void FfnBlock(StepContext& ctx, const LayerWeights& w);
// Completes x after the last block (adds a pending residual).
void FinishLayers(StepContext& ctx);

}  // namespace tachyon::model
