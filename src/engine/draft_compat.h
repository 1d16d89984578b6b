// The check that a draft model can draft for a target (speculative method draft_model): both
// must speak the same tokenizer, so that a token id means the same text to both.
// Thread-safety: pure.
#pragma once

#include <cstdint>

#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace tachyon::engine {

// OK when the draft's tokenizer equals the target's: the same vocabulary size, every token's
// text and type (normal, control / special, user-defined, byte ...), the special ids (BOS, EOS,
// EOT, pad, unknown), whether BOS / EOS are added, and the end-of-generation ids; and the
// models' logits rows (`*_rows`, the n_vocab of each model) are equal. Errors: InvalidArgument
// naming the first difference ("token 42 is 'x' in the target and 'y' in the draft model").
Status CheckDraftVocabulary(const tokenizer::Tokenizer& target, int64_t target_rows,
                            const tokenizer::Tokenizer& draft, int64_t draft_rows);

}  // namespace tachyon::engine
