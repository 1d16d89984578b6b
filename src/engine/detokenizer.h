// Detokenizer: the engine's view of incremental detokenization (ids -> text deltas), so the
// engine does not depend on a tokenizer implementation. TokenizerDetokenizer adapts
// tokenizer::IncrementalDetokenizer; tests use a fake vocabulary (FakeDetokenizer).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tachyon::engine {

// One output stream's decoding state. Used by one thread at a time.
class TextDecoder {
 public:
  virtual ~TextDecoder() = default;
  // Adds one generated id; returns the newly completed text (may be empty).
  virtual std::string Push(int32_t id) = 0;
  // Ends the stream; returns text still held back (e.g. an incomplete UTF-8 sequence).
  virtual std::string Flush() = 0;
  // Declares the prompt the generated text continues (called once, before any Push), so
  // the first token's text is a continuation (e.g. keeps a SentencePiece leading space).
  virtual void SetContext(const std::vector<int32_t>& prompt) {}
};

// A factory of decoders. Thread-safety: NewDecoder may be called from any thread.
class Detokenizer {
 public:
  virtual ~Detokenizer() = default;
  virtual std::unique_ptr<TextDecoder> NewDecoder() const = 0;
};

// A vocabulary of literal pieces: id i decodes to pieces[i] (ids out of range decode to "").
// For tests and for the fake engine the server's tests run against.
class FakeDetokenizer : public Detokenizer {
 public:
  explicit FakeDetokenizer(std::vector<std::string> pieces) : pieces_(std::move(pieces)) {}
  std::unique_ptr<TextDecoder> NewDecoder() const override;
  const std::vector<std::string>& pieces() const { return pieces_; }

 private:
  std::vector<std::string> pieces_;
};

}  // namespace tachyon::engine
