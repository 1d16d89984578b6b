// The flat batch that Model::Forward consumes (the contract between engine/ and model/).
//
// One step's new tokens of every scheduled sequence are laid end to end in `tokens`, so each
// linear layer is one matmul over all of them. Each sequence names the KV blocks that hold
// (and will hold) its keys/values: block_table[i] is the pool block id of positions
// [i * block_size, (i + 1) * block_size). Attention for a sequence covers its cached positions
// [0, pos_start) plus its new tokens (causal). Cached positions may be written by another
// sequence of the same batch (two tables naming one block: a shared prefix computed in this
// step): in each layer the K/V of every new token are stored before any attention of that
// layer runs. The engine owns block ids (kv/); the model owns the KV storage indexed by those
// ids.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace tachyon::model {

struct SequenceSlice {
  int64_t token_start = 0;  // index of this sequence's first new token in Batch::tokens
  int64_t n_tokens = 0;     // new tokens this step (>= 1)
  int64_t pos_start = 0;    // position of the first new token (= tokens already in KV)
  // Covers positions [0, pos_start + n_tokens). With a KV cache of G layer groups
  // (model/kv_cache.h) it is G sections of equal length, section g = group g's table; a
  // sliding group's entries for blocks before its window of pos_start are never read and may
  // be -1.
  std::vector<int32_t> block_table;
  // Logits rows for the last num_logits new tokens (1: only the last, as a decode or the end
  // of a prompt needs; n_tokens: every new token; k + 1: a speculative verify of k drafts).
  // REQUIRES: 1 <= num_logits <= n_tokens.
  int64_t num_logits = 1;
  // Positions from decode_start on are decode rows: the sequence's tokens past its prompt
  // (generated tokens, recomputed ones after a preemption, speculative drafts being verified);
  // the engine sets it to the prompt's length. Batch invariance: a decode row's logits (and
  // K/V) are the same bits whatever else the step computes (other sequences, drafts, prompt
  // chunks); at the AMX level they take the AVX-512 kernels (kernels/matmul.h). The other rows
  // keep the AMX thresholds. Default: no decode rows.
  int64_t decode_start = std::numeric_limits<int64_t>::max();
  // >= 0: the cached positions of this sequence's block at pos_start (its first
  // pos_start % block_size slots) are copied from block copy_src's same slots in every layer,
  // after the step's new K/V are stored and before attention reads the cache: a prompt's
  // partial block another sequence holds (computed before the step, or in it). -1: none.
  // REQUIRES: pos_start % block_size > 0; one KV layer group; copy_src is not itself a copy's
  // destination in the same batch.
  int32_t copy_src = -1;
};

struct Batch {
  std::vector<int32_t> tokens;  // [n_tokens_total]
  std::vector<SequenceSlice> seqs;
  // Encoders (Model::Pool): the token type (segment) of each token, [n_tokens_total]; empty
  // means type 0 everywhere.
  std::vector<int32_t> token_types;
};

}  // namespace tachyon::model
