// TriggeredGrammar: a constraint that starts when a trigger text appears in the output.
//
// Until the trigger, generation is free: every token of the vocabulary may be sampled (EOS
// too, where `free_may_end`), except tokens whose bytes would complete the trigger before
// their last byte (the constrained part must start on a token boundary; such a token's
// shorter spellings remain allowed). Once the output's bytes end with the trigger, the inner
// grammar's matcher takes over from the next token. Used for tool_choice "auto" (free text
// until "<tool_call>", then the call grammar) and for reasoning models (free until "</think>",
// then the request's constraint). Triggers compose: the inner grammar may be a TriggeredGrammar.
//
// TriggerTable holds what the free phase needs for one vocabulary and trigger (each token's
// bytes, and per partial-match state the tokens that would complete the trigger mid-token); it
// is built once (a pass over the vocabulary) and shared. Both classes are immutable and
// thread-safe; the matchers follow grammar/matcher.h (one owner at a time, Rollback supported).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "util/status.h"

namespace tachyon::server {

class TriggerTable {
 public:
  // `token_bytes[id]`: token id's output bytes ("" for tokens with none). InvalidArgument for
  // an empty trigger or one longer than 64 bytes.
  static Result<std::shared_ptr<const TriggerTable>> Build(
      std::shared_ptr<const std::vector<std::string>> token_bytes, std::string trigger);

  const std::string& trigger() const { return trigger_; }
  int32_t vocab_size() const { return static_cast<int32_t>(bytes_->size()); }
  // The partial-match state after `byte` from state `k` (0 <= k < trigger size); the trigger's
  // size = complete.
  int Next(int k, unsigned char byte) const { return next_[static_cast<size_t>(k) * 256 + byte]; }
  // The state after token `id`'s bytes from state `k`; `mid` set when the trigger completes
  // before the last byte.
  int AfterToken(int k, int32_t id, bool* mid) const;
  // Tokens that would complete the trigger before their last byte, from state k.
  const std::vector<int32_t>& banned(int k) const { return banned_[static_cast<size_t>(k)]; }

 private:
  TriggerTable() = default;
  std::shared_ptr<const std::vector<std::string>> bytes_;
  std::string trigger_;
  std::vector<uint8_t> next_;                 // [trigger size, 256]
  std::vector<std::vector<int32_t>> banned_;  // per state k < trigger size
};

class TriggeredGrammar : public grammar::CompiledGrammar {
 public:
  // REQUIRES: table and inner non-null.
  TriggeredGrammar(std::shared_ptr<const TriggerTable> table,
                   std::shared_ptr<const grammar::CompiledGrammar> inner, bool free_may_end);
  std::unique_ptr<grammar::TokenMatcher> NewMatcher() const override;

 private:
  std::shared_ptr<const TriggerTable> table_;
  std::shared_ptr<const grammar::CompiledGrammar> inner_;
  bool free_may_end_;
};

}  // namespace tachyon::server
