// The forward blocks of encoders (ModelConfig::encoder, model/bert.cc): embeddings with
// learned positions and token types, then post-norm layers with bidirectional attention over
// each sequence. Internal to model/ (Model::Pool runs them).
#pragma once

#include <cstdint>
#include <vector>

#include "model/batch.h"
#include "model/layers.h"
#include "model/weights.h"

namespace tachyon::model {

// s->x[t] = LayerNorm(token_embd[token] + position_embd[pos] + token_types[type]) for every
// token of ctx's step. `types`: [n_tokens] or empty (all type 0). REQUIRES: positions and
// types validated against the tables.
void EncoderEmbed(StepContext& ctx, const ModelWeights& w, const Batch& batch,
                  const std::vector<int32_t>& types);

// One encoder layer over s->x, in place:
//   x = LayerNorm(x + Wo·Attention(Wq·x + bq, Wk·x + bk, Wv·x + bv) + bo)
//   x = LayerNorm(x + Wdown·GELU(Wup·x + bup) + bdown)
// Every token attends to all tokens of its own sequence (K/V go through ctx.kv, whose block
// tables the step's sequences name). `bidir` holds one attention entry per token (see
// BidirectionalSeqs).
void EncoderLayer(StepContext& ctx, const LayerWeights& w, int64_t il,
                  const std::vector<kernels::AttentionSeq>& bidir);

// Bidirectional attention with the causal paged kernel: token j of a sequence of n tokens
// becomes its own one-token query at position n - 1 over the sequence's blocks, so it sees
// positions [0, n) once every K/V of the sequence is stored. [n_tokens] entries.
std::vector<kernels::AttentionSeq> BidirectionalSeqs(const StepContext& ctx);

}  // namespace tachyon::model
