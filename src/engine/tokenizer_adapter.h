// TokenizerDetokenizer: the engine's Detokenizer over tokenizer::Tokenizer, streaming through
// tokenizer::IncrementalDetokenizer (complete UTF-8 only; special tokens skipped).
// Thread-safety: NewDecoder may be called from any thread (the tokenizer is immutable).
#pragma once

#include <memory>

#include "engine/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::engine {

class TokenizerDetokenizer : public Detokenizer {
 public:
  explicit TokenizerDetokenizer(std::shared_ptr<const tokenizer::Tokenizer> tokenizer)
      : tokenizer_(std::move(tokenizer)) {}
  std::unique_ptr<TextDecoder> NewDecoder() const override;

 private:
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
};

}  // namespace tachyon::engine
