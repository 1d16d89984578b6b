// Added tokens (special and user-defined) and the splitting of text around them, as Hugging
// Face tokenizers does: leftmost-longest match, lstrip/rstrip swallow neighbouring whitespace,
// single_word only matches whole words. Immutable after Build(); thread-safe to use.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tachyon::tokenizer {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;      // control token: skipped by parse_special=false / skip_special
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;   // matched in normalized text (else in raw text)
  // What is searched for: content, or for normalized tokens the normalized content
  // (set by the loader; empty means content).
  std::string match;
  const std::string& pattern() const { return match.empty() ? content : match; }
};

class AddedTokens {
 public:
  // A later Add with the same id replaces the earlier one.
  void Add(AddedToken token);
  // Builds the matchers; call once after the last Add.
  void Build();
  // Mutable access for loaders (e.g. to set `match`); call Build() afterwards.
  std::vector<AddedToken>& mutable_tokens() { return tokens_; }

  bool empty() const { return tokens_.empty(); }
  const std::vector<AddedToken>& tokens() const { return tokens_; }
  const AddedToken* ById(int32_t id) const;

  struct Segment {
    size_t begin = 0, end = 0;  // byte range in the text (a text segment)
    int32_t id = -1;            // >= 0: an added token
  };
  // Byte ranges [first, second) of a text, sorted and disjoint.
  using Ranges = std::vector<std::pair<size_t, size_t>>;

  // Splits `text` into text segments and added tokens, matching the tokens whose
  // `normalized` flag equals `normalized`. parse_special=false ignores special tokens; with
  // `special_ranges` a special token matches only where its text lies wholly inside one of
  // those ranges. Text segments are never empty.
  void Split(std::string_view text, bool normalized, bool parse_special, std::vector<Segment>* out,
             const Ranges* special_ranges = nullptr) const;

 private:
  struct Matcher {
    std::array<std::vector<int>, 256> by_first_byte;  // indexes into tokens_, longest first
    bool any = false;
  };
  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  Matcher raw_, normalized_;
};

}  // namespace tachyon::tokenizer
