// TokenMatcher: one request's position in a grammar, over a Vocabulary's tokens.
//
// Thread-safety: not thread-safe; one owner at a time (the engine may hand a matcher to a mask
// worker during a forward pass and take it back afterwards). Many matchers of one
// CompiledGrammar may run concurrently on different threads.
#pragma once

#include <cstdint>
#include <span>

namespace tachyon::grammar {

class TokenMatcher {
 public:
  virtual ~TokenMatcher() = default;

  // Writes the set of tokens allowed next. bitmask: ceil(n_vocab / 32) words (n_vocab = the
  // Vocabulary's size()); bit (t % 32) of word t / 32 set = token t allowed. Every word is
  // written. End-of-generation ids are set only where CanTerminate(); tokens without bytes
  // (special/control tokens) are never set. REQUIRES: bitmask.size() >= ceil(n_vocab / 32).
  virtual void FillNextTokenBitmask(std::span<uint32_t> bitmask) = 0;

  // Advances by one token; returns false and leaves the state unchanged if the token is not
  // allowed (out of range ids included). An end-of-generation id is accepted only where
  // CanTerminate(); afterwards IsTerminated() holds and nothing else is accepted.
  virtual bool AcceptToken(int32_t token) = 0;

  // Undoes the last n accepted tokens. REQUIRES: 0 <= n <= number of tokens accepted so far
  // (and not yet rolled back).
  virtual void Rollback(int n) = 0;

  // The bytes accepted so far form a complete sentence of the grammar (EOS may follow).
  virtual bool CanTerminate() const = 0;

  // Nothing but EOS can follow (or EOS was accepted): the engine finishes the request.
  virtual bool IsTerminated() const = 0;

  // Length-aware masks: at most n more tokens will be accepted from here (a request's
  // max_tokens less what it generated). From then on every mask leaves out the tokens after
  // which the grammar could no longer reach an end within the tokens left, so a grammar
  // whose shortest completion fits the budget always ends by it (grammar/length_limit.h).
  // Masks change only where the budget is that tight (distances count bytes, an upper bound on
  // tokens): an output that ends with that much room is the same with or without it. The limit is a
  // position, so Rollback gives rolled-back tokens' budget back. n < 0: no limit (the default).
  // Matchers that cannot honour it ignore it (test fakes).
  virtual void SetTokenLimit(int64_t n) { (void)n; }
};

}  // namespace tachyon::grammar
