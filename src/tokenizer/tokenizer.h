// Tokenizer: text <-> token ids for the model families tachyon serves.
//
// Sources: a GGUF file's tokenizer.ggml.* metadata (models "llama" = SentencePiece-style BPE
// by scores with byte fallback, "gpt2" = byte-level BPE with merges and a pre-tokenizer chosen
// by tokenizer.ggml.pre, "bert" = WordPiece), or a Hugging Face tokenizer.json (+ the
// tokenizer_config.json beside it). Anything a file uses that is not implemented fails at load
// with an error naming it; a tokenizer never silently tokenizes differently.
//
// Thread-safety: a loaded Tokenizer is immutable; Encode/Decode may be called concurrently from
// any number of threads. An IncrementalDetokenizer is one stream's state (one thread at a time).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace tachyon::gguf {
class GgufFile;
}

namespace tachyon::tokenizer {

// Kind of a vocabulary entry (numbering follows GGUF tokenizer.ggml.token_type).
enum class TokenType : uint8_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,       // special tokens: BOS, EOS, <|im_start|> ...
  kUserDefined = 4,   // added tokens that are not special (always matched whole in text)
  kUnused = 5,
  kByte = 6,          // byte-fallback pieces <0xXX>
};

struct EncodeOptions {
  // Add BOS/EOS (or the tokenizer's post-processor template) around the text.
  bool add_special = true;
  // Text equal to a special (control) token becomes that token. false: special-token text is
  // tokenized as plain text (use for untrusted user content). Non-special added tokens are
  // matched in both modes, as Hugging Face does.
  bool parse_special = true;
};

// One piece of a text for Tokenizer::EncodeSegments.
struct TextSegment {
  std::string_view text;
  // false: special-token text in this piece is plain text (untrusted content).
  bool parse_special = true;
};

class Pipeline;  // internal (tokenizer/pipeline.h)

class Tokenizer {
 public:
  // From a parsed GGUF file's tokenizer.ggml.* keys (the file may be freed afterwards).
  static Result<std::unique_ptr<Tokenizer>> FromGguf(const gguf::GgufFile& file);
  // From tokenizer.json text; `config_json` is tokenizer_config.json's text or "" if none.
  // `name` is used in error messages.
  static Result<std::unique_ptr<Tokenizer>> FromHfJson(std::string_view tokenizer_json,
                                                       std::string_view config_json,
                                                       const std::string& name);
  // PATH is a .gguf file, a tokenizer.json, or a folder holding tokenizer.json (and maybe
  // tokenizer_config.json).
  static Result<std::unique_ptr<Tokenizer>> FromFile(const std::string& path);

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Text (any bytes; embedded NULs are text) to ids. Invalid UTF-8 is first replaced by
  // U+FFFD (each maximal invalid subpart), as the reference only accepts valid strings.
  std::vector<int32_t> Encode(std::string_view text, bool add_special = true,
                              bool parse_special = true) const;
  std::vector<int32_t> Encode(std::string_view text, const EncodeOptions& options) const {
    return Encode(text, options.add_special, options.parse_special);
  }

  // Encodes the concatenation of `segments` as one text: splitting, normalization,
  // pre-tokenization and merges run across segment boundaries exactly as Encode does, except
  // that a special (control) token is recognised only where its whole text lies inside
  // parse_special segments (consecutive ones count as one). The ids therefore equal
  // Encode(concatenation, add_special, true) whenever no special token's text overlaps a
  // parse_special=false segment; special-token text there is plain text, as with
  // parse_special=false. A normalized special token (rare) matches only in a stretch of text
  // between other added tokens that lies wholly inside parse_special segments. Invalid
  // UTF-8 is replaced segment by segment.
  std::vector<int32_t> EncodeSegments(std::span<const TextSegment> segments,
                                      bool add_special) const;

  // Ids to text through the tokenizer's decoder. skip_special drops control tokens (and other
  // special added tokens). Ids outside [0, vocab_size) are skipped. Invalid UTF-8 that the
  // tokens produce becomes U+FFFD.
  std::string Decode(const std::vector<int32_t>& ids, bool skip_special = false) const;

  // Raw bytes that `id` contributes when decoded in the middle of a text (no leading-space
  // stripping; byte pieces give their byte). For streaming and stop-string matching.
  std::string TokenBytes(int32_t id) const;

  int32_t vocab_size() const;
  // The vocabulary's own spelling of a token ("Ġhello", "▁the", "<0x0A>"); "" if out of range.
  std::string_view TokenText(int32_t id) const;
  // Id of a token by its vocabulary spelling, or -1.
  int32_t TokenId(std::string_view text) const;
  TokenType token_type(int32_t id) const;
  // True for control / special added tokens (those skip_special drops).
  bool IsSpecial(int32_t id) const;

  // Special ids; -1 when the tokenizer has none.
  int32_t bos_id() const;
  int32_t eos_id() const;
  int32_t eot_id() const;
  int32_t pad_id() const;
  int32_t unk_id() const;
  // Whether Encode(add_special=true) adds BOS / EOS.
  bool add_bos() const;
  bool add_eos() const;
  // End-of-generation ids: EOS, EOT and the usual end markers present in the vocabulary
  // (<|eot_id|>, <|im_end|>, <|end|>, <end_of_turn>, ...), sorted, no duplicates.
  std::vector<int32_t> EogIds() const;
  bool IsEog(int32_t id) const;

  // Chat template from GGUF tokenizer.chat_template or tokenizer_config.json; nullopt if none.
  std::optional<std::string> chat_template() const;
  // Text of BOS / EOS as a chat template sees them ("" if none).
  std::string bos_text() const;
  std::string eos_text() const;

  // tokenizer_config.json's clean_up_tokenization_spaces (Python transformers applies
  // CleanUpTokenizationSpaces after decoding when set; the Rust library does not).
  bool clean_up_tokenization_spaces() const;
  // " ." -> ".", " ," -> ",", " n't" -> "n't", " 's" -> "'s", ... (transformers' rules).
  static std::string CleanUpTokenizationSpaces(std::string text);

  // "llama", "gpt2", "bert" (GGUF) or "hf-bpe", "hf-wordpiece" ...: for logs and inspect.
  std::string_view kind() const;

  const Pipeline& pipeline() const { return *pipeline_; }

 private:
  explicit Tokenizer(std::unique_ptr<Pipeline> pipeline);
  std::unique_ptr<Pipeline> pipeline_;
};

// Streaming decode: feed ids one at a time, get back only complete UTF-8 text. The
// concatenation of every Push() and the final Flush() equals
// tokenizer.Decode(all ids, skip_special) exactly (including SentencePiece's leading-space
// stripping). Incomplete UTF-8 sequences are held back until complete; bytes that can never
// complete become U+FFFD. With SentencePiece byte fallback a run of <0xXX> pieces decodes as
// a unit, so it is held back until a non-byte token (or Flush) ends it. Cost per Push is
// constant (a short window is re-decoded). Holds a reference to the tokenizer, which must
// outlive it. Flush() ends the stream.
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special = true);

  // Adds one id; returns the newly completed text (may be empty).
  std::string Push(int32_t id);
  // Ends the stream: returns whatever is still held back.
  std::string Flush();
  // Declares the text that comes before the first pushed id (e.g. the prompt), so the first
  // token decodes as a continuation (SentencePiece keeps its leading space). Its text is
  // never returned. REQUIRES: nothing pushed yet.
  void SetContext(const std::vector<int32_t>& context);
  // All ids pushed so far.
  const std::vector<int32_t>& ids() const { return ids_; }

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::vector<int32_t> ids_;
  size_t prefix_offset_ = 0;   // ids_[prefix_offset_..] are decoded for context
  size_t emitted_bytes_ = 0;   // bytes of Decode(ids_[prefix_offset_..]) already returned
};

}  // namespace tachyon::tokenizer
