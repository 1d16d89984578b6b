// Internal: the tokenizer pipeline shared by every source format. A loader (hf_loader.cc,
// gguf_loader.cc) fills a Pipeline; tokenizer.cc runs it:
//   text -> split on added tokens -> normalize -> pre-tokenize -> model -> post-process
//   ids  -> tokens -> decoders -> text
// Every step is plain data (a kind plus its arguments) so loaders stay declarative.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/regex.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::tokenizer {

// Hash that lets unordered maps keyed by std::string be searched with a string_view.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};
using StringIdMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

struct Vocab {
  std::vector<std::string> tokens;  // id -> spelling
  std::vector<TokenType> types;     // id -> type
  std::vector<float> scores;        // id -> score (SentencePiece); may be empty
  StringIdMap index;                // spelling -> id

  int32_t size() const { return static_cast<int32_t>(tokens.size()); }
  int32_t Find(std::string_view text) const {
    auto it = index.find(text);
    return it == index.end() ? -1 : it->second;
  }
};

// ---- normalizers ----
struct NormStep {
  enum Kind { kNfc, kNfkc, kNfd, kNfkd, kLowercase, kReplace, kPrepend, kStrip, kStripAccents,
              kBert } kind;
  std::string pattern, content;              // Replace (literal pattern), Prepend (content)
  std::shared_ptr<Regex> regex;              // Replace with a regex pattern
  bool left = false, right = false;          // Strip
  bool clean_text = true, chinese = true, strip_accents = false, lowercase = false;  // Bert
};
std::string ApplyNormalizers(const std::vector<NormStep>& steps, std::string text);

// ---- pre-tokenizers ----
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
struct PreStep {
  enum Kind { kSplit, kByteLevel, kMetaspace, kDigits, kPunctuation, kWhitespace,
              kWhitespaceSplit, kBert, kCharDelimiter } kind;
  std::shared_ptr<Regex> regex;   // Split (regex or escaped literal); ByteLevel's GPT-2 regex
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  bool add_prefix_space = false;  // ByteLevel
  std::string replacement;        // Metaspace; CharDelimiter's delimiter
  enum Prepend { kAlways, kFirst, kNever } prepend = kAlways;  // Metaspace
  bool split = true;              // Metaspace
  bool individual_digits = false; // Digits
};
// The GPT-2 split pattern (ByteLevel use_regex, GGUF "gpt-2" and others).
extern const char kGpt2Pattern[];

// Splits `text` into pieces. `at_start`: the text begins the whole input (Metaspace "first").
void ApplyPreTokenizers(const std::vector<PreStep>& steps, std::string text, bool at_start,
                        std::vector<std::string>* pieces);

// ---- models ----
class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of one pre-tokenized piece.
  virtual void Encode(std::string_view piece, std::vector<int32_t>* out) const = 0;
};

// ---- decoders ----
struct DecStep {
  enum Kind { kByteLevel, kReplace, kByteFallback, kFuse, kStrip, kMetaspace, kWordPiece,
              kGgufWordPiece } kind;
  std::string pattern, content;  // Replace; Strip content
  int start = 0, stop = 0;       // Strip
  std::string replacement;       // Metaspace
  bool prepend = true;           // Metaspace: strip the space it prepended to the first token
  std::string prefix = "##";     // WordPiece
  bool cleanup = true;           // WordPiece
};
// Runs the decoders over token spellings and joins the result.
std::string ApplyDecoders(const std::vector<DecStep>& steps, std::vector<std::string> tokens);
// The byte a "<0xXX>" byte-token spelling stands for (two hex digits, either case), or -1 for
// anything else, a malformed spelling such as "<0xZZ>" included (it is then ordinary text).
int ParseByteToken(std::string_view spelling);
// BERT-style clean-up of tokenization spaces (" ." -> ".", " n't" -> "n't", ...).
std::string CleanupTokenizationSpaces(std::string text);

// ---- the whole pipeline ----
struct Pipeline {
  std::string kind;  // "llama", "gpt2", "bert", "hf-bpe", "hf-wordpiece"
  Vocab vocab;
  AddedTokens added;
  std::vector<NormStep> normalizers;
  std::vector<PreStep> pre_tokenizers;
  std::unique_ptr<Model> model;
  std::vector<DecStep> decoders;
  // Post-processing for a single sequence: ids before and after the text.
  std::vector<int32_t> prefix_ids, suffix_ids;
  bool add_bos = false, add_eos = false;
  int32_t bos = -1, eos = -1, eot = -1, pad = -1, unk = -1;
  std::vector<int32_t> eog;  // sorted
  std::optional<std::string> chat_template;
  std::string bos_text, eos_text;
  bool clean_up_spaces = false;  // tokenizer_config.json clean_up_tokenization_spaces
  bool byte_level = false;   // raw-byte pieces (ByteLevel pre-tokenizer)
  // GGUF byte-level vocabularies store user-defined tokens as plain text: decode them
  // literally instead of through the byte alphabet.
  bool literal_user_defined = false;

  // `special_ranges` (may be null): special tokens match only inside these byte ranges of
  // `text` (see AddedTokens::Split); REQUIRES: `text` is valid UTF-8 when given.
  void Encode(std::string_view text, bool add_special, bool parse_special,
              std::vector<int32_t>* out,
              const AddedTokens::Ranges* special_ranges = nullptr) const;
  std::string Decode(const std::vector<int32_t>& ids, bool skip_special) const;
  // Fills eog from eos/eot and the usual end-of-turn spellings; sorts.
  void FinishSpecials();
};

}  // namespace tachyon::tokenizer
