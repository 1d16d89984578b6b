#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace tachyon::tokenizer {
namespace {

// Code point ending at byte `end` (exclusive) of text.
uint32_t CodepointBefore(std::string_view text, size_t end, size_t* start) {
  size_t s = end - 1;
  while (s > 0 && (static_cast<uint8_t>(text[s]) & 0xC0) == 0x80 && end - s < 4) --s;
  uint32_t cp;
  DecodeUtf8(text, s, &cp);
  *start = s;
  return cp;
}

bool IsWordChar(uint32_t cp) { return cp == '_' || IsAlphabetic(cp) || IsNumeric(cp); }

// Whether [begin, end) lies inside one range of `ranges` (sorted, disjoint).
bool Inside(const AddedTokens::Ranges& ranges, size_t begin, size_t end) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), begin,
                             [](size_t pos, const auto& r) { return pos < r.second; });
  return it != ranges.end() && it->first <= begin && end <= it->second;
}

}  // namespace

void AddedTokens::Add(AddedToken token) {
  if (token.content.empty()) return;
  auto it = by_id_.find(token.id);
  if (it != by_id_.end()) {
    tokens_[it->second] = std::move(token);
  } else {
    by_id_[token.id] = tokens_.size();
    tokens_.push_back(std::move(token));
  }
}

void AddedTokens::Build() {
  raw_ = Matcher();
  normalized_ = Matcher();
  for (size_t i = 0; i < tokens_.size(); ++i) {
    Matcher& m = tokens_[i].normalized ? normalized_ : raw_;
    if (tokens_[i].pattern().empty()) continue;
    m.by_first_byte[static_cast<uint8_t>(tokens_[i].pattern()[0])].push_back(static_cast<int>(i));
    m.any = true;
  }
  for (Matcher* m : {&raw_, &normalized_}) {
    for (auto& list : m->by_first_byte) {
      std::stable_sort(list.begin(), list.end(), [&](int a, int b) {
        return tokens_[a].pattern().size() > tokens_[b].pattern().size();
      });
    }
  }
}

const AddedToken* AddedTokens::ById(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

void AddedTokens::Split(std::string_view text, bool normalized, bool parse_special,
                        std::vector<Segment>* out, const Ranges* special_ranges) const {
  const Matcher& m = normalized ? normalized_ : raw_;
  size_t seg_begin = 0;  // start of the pending text segment
  size_t pos = 0;
  auto emit_text = [&](size_t b, size_t e) {
    if (e > b) out->push_back({b, e, -1});
  };
  if (m.any) {
    while (pos < text.size()) {
      const auto& cands = m.by_first_byte[static_cast<uint8_t>(text[pos])];
      const AddedToken* hit = nullptr;
      for (int idx : cands) {
        const AddedToken& t = tokens_[idx];
        if (t.special && !parse_special) continue;
        const std::string& pat = t.pattern();
        if (text.size() - pos < pat.size()) continue;
        if (text.compare(pos, pat.size(), pat) != 0) continue;
        if (t.special && special_ranges && !Inside(*special_ranges, pos, pos + pat.size())) {
          continue;
        }
        if (t.single_word) {
          size_t s;
          if (pos > 0 && IsWordChar(CodepointBefore(text, pos, &s))) continue;
          const size_t end = pos + pat.size();
          if (end < text.size()) {
            uint32_t cp;
            DecodeUtf8(text, end, &cp);
            if (IsWordChar(cp)) continue;
          }
        }
        hit = &t;
        break;
      }
      if (hit == nullptr) {
        ++pos;
        continue;
      }
      size_t start = pos, end = pos + hit->pattern().size();
      if (hit->lstrip) {
        while (start > seg_begin) {
          size_t s;
          if (!IsWhitespace(CodepointBefore(text, start, &s))) break;
          start = s;
        }
      }
      if (hit->rstrip) {
        while (end < text.size()) {
          uint32_t cp;
          const size_t n = DecodeUtf8(text, end, &cp);
          if (!IsWhitespace(cp)) break;
          end += n;
        }
      }
      emit_text(seg_begin, start);
      out->push_back({start, end, hit->id});
      seg_begin = pos = end;
    }
  }
  emit_text(seg_begin, text.size());
}

}  // namespace tachyon::tokenizer
