// IncrementalDetokenizer: decodes a window of recent ids and returns what it adds to the
// text already returned. The window restarts after each emission (keeping the previous
// tokens as context), so the cost per token stays constant and decoders that depend on the
// start of the text (SentencePiece's leading-space strip) see the same context as a one-shot
// decode.
#include <string>

#include "tokenizer/pipeline.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace tachyon::tokenizer {
namespace {

bool EndsWithReplacement(const std::string& s) {
  return s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0;
}

// True when the tokenizer's decoders group runs of <0xXX> byte tokens (ByteFallback): the
// whole run decodes as one unit, so it is held back until the run ends.
bool GroupsByteTokens(const Tokenizer& t) {
  for (const DecStep& d : t.pipeline().decoders) {
    if (d.kind == DecStep::kByteFallback) return true;
  }
  return false;
}

bool IsByteToken(std::string_view s) { return ParseByteToken(s) >= 0; }

}  // namespace

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {}

std::string IncrementalDetokenizer::Push(int32_t id) {
  ids_.push_back(id);
  if (GroupsByteTokens(tokenizer_) && IsByteToken(tokenizer_.TokenText(id))) return "";
  const std::vector<int32_t> window(ids_.begin() + static_cast<std::ptrdiff_t>(prefix_offset_),
                                    ids_.end());
  const std::string text = tokenizer_.Decode(window, skip_special_);
  if (text.size() <= emitted_bytes_) return "";
  if (EndsWithReplacement(text)) {
    // Hold back while the raw bytes end in a UTF-8 sequence that later tokens may complete.
    std::string tail;
    const size_t from = ids_.size() > 4 ? ids_.size() - 4 : prefix_offset_;
    for (size_t i = std::max(from, prefix_offset_); i < ids_.size(); ++i) {
      if (skip_special_ && tokenizer_.IsSpecial(ids_[i])) continue;
      tail += tokenizer_.TokenBytes(ids_[i]);
    }
    if (IncompleteUtf8Tail(tail) > 0) return "";
  }
  std::string out = text.substr(emitted_bytes_);
  // Restart the window at the last token that the decode does not drop, so the next decode
  // has real context (a dropped special token would let a leading-space strip misfire).
  size_t keep_from = ids_.size();
  for (size_t i = ids_.size(); i-- > prefix_offset_;) {
    if (!(skip_special_ && tokenizer_.IsSpecial(ids_[i])) && ids_[i] >= 0 &&
        ids_[i] < tokenizer_.vocab_size()) {
      keep_from = i;
      break;
    }
  }
  if (keep_from == ids_.size()) {
    emitted_bytes_ = text.size();
    return out;
  }
  const std::vector<int32_t> ctx(ids_.begin() + static_cast<std::ptrdiff_t>(keep_from), ids_.end());
  prefix_offset_ = keep_from;
  emitted_bytes_ = tokenizer_.Decode(ctx, skip_special_).size();
  return out;
}

void IncrementalDetokenizer::SetContext(const std::vector<int32_t>& context) {
  // The last token that a decode keeps is enough context for the leading-space rule.
  for (size_t i = context.size(); i-- > 0;) {
    const int32_t id = context[i];
    if (id < 0 || id >= tokenizer_.vocab_size() || (skip_special_ && tokenizer_.IsSpecial(id))) {
      continue;
    }
    ids_.assign(1, id);
    prefix_offset_ = 0;
    emitted_bytes_ = tokenizer_.Decode(ids_, skip_special_).size();
    return;
  }
}

std::string IncrementalDetokenizer::Flush() {
  const std::vector<int32_t> window(ids_.begin() + static_cast<std::ptrdiff_t>(prefix_offset_),
                                    ids_.end());
  const std::string text = tokenizer_.Decode(window, skip_special_);
  std::string out = text.size() > emitted_bytes_ ? text.substr(emitted_bytes_) : "";
  prefix_offset_ = ids_.size();
  emitted_bytes_ = 0;
  return out;
}

}  // namespace tachyon::tokenizer
