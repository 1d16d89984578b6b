// Pre-tokenizer steps (Hugging Face semantics): each step splits every current piece.
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/pipeline.h"
#include "tokenizer/unicode.h"

namespace tachyon::tokenizer {

const char kGpt2Pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

namespace {

using Range = std::pair<size_t, size_t>;

// Turns match ranges into the pieces a split behaviour keeps.
void SplitByMatches(const std::string& text, const std::vector<Range>& matches,
                    SplitBehavior behavior, bool invert, std::vector<std::string>* out) {
  // Alternating (range, is_match) list covering the text (scratch reused per thread).
  thread_local std::vector<std::pair<Range, bool>> parts;
  thread_local std::vector<Range> kept;
  parts.clear();
  kept.clear();
  size_t prev = 0;
  for (auto [b, e] : matches) {
    if (b > prev) parts.push_back({{prev, b}, invert});
    parts.push_back({{b, e}, !invert});
    prev = e;
  }
  if (prev < text.size()) parts.push_back({{prev, text.size()}, invert});

  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (auto& [r, m] : parts) {
        if (!m) kept.push_back(r);
      }
      break;
    case SplitBehavior::kIsolated:
      for (auto& [r, m] : parts) kept.push_back(r);
      break;
    case SplitBehavior::kMergedWithPrevious: {
      bool prev_match = false;
      for (auto& [r, m] : parts) {
        if (m && !prev_match && !kept.empty()) {
          kept.back().second = r.second;
        } else {
          kept.push_back(r);
        }
        prev_match = m;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool next_match = false;
      std::vector<Range> rev;
      for (size_t i = parts.size(); i-- > 0;) {
        auto& [r, m] = parts[i];
        if (m && !next_match && !rev.empty()) {
          rev.back().first = r.first;
        } else {
          rev.push_back(r);
        }
        next_match = m;
      }
      kept.assign(rev.rbegin(), rev.rend());
      break;
    }
    case SplitBehavior::kContiguous: {
      bool prev_match = false;
      for (auto& [r, m] : parts) {
        if (m == prev_match && !kept.empty()) {
          kept.back().second = r.second;
        } else {
          kept.push_back(r);
        }
        prev_match = m;
      }
      break;
    }
  }
  for (auto [b, e] : kept) {
    if (e > b) out->emplace_back(text, b, e - b);
  }
}

// Matches of single characters satisfying `pred`.
template <typename Pred>
std::vector<Range> CharMatches(const std::string& text, Pred pred) {
  std::vector<Range> m;
  size_t i = 0;
  while (i < text.size()) {
    uint32_t cp;
    const size_t n = DecodeUtf8(text, i, &cp);
    if (pred(cp)) m.push_back({i, i + n});
    i += n;
  }
  return m;
}

std::string ReplaceSpaces(const std::string& text, const std::string& with) {
  std::string out;
  out.reserve(text.size() + 8);
  for (char c : text) {
    if (c == ' ') {
      out += with;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

void ApplyStep(const PreStep& s, std::string piece, bool at_start,
               std::vector<std::string>* out) {
  thread_local std::vector<Range> m;
  m.clear();
  switch (s.kind) {
    case PreStep::kSplit:
      s.regex->FindAll(piece, &m);
      SplitByMatches(piece, m, s.behavior, s.invert, out);
      return;
    case PreStep::kByteLevel:
      if (s.add_prefix_space && (piece.empty() || piece[0] != ' ')) piece.insert(0, 1, ' ');
      if (!s.regex) {
        out->push_back(std::move(piece));
        return;
      }
      s.regex->FindAll(piece, &m);
      SplitByMatches(piece, m, SplitBehavior::kIsolated, false, out);
      return;
    case PreStep::kMetaspace: {
      std::string t = ReplaceSpaces(piece, s.replacement);
      const bool want = s.prepend == PreStep::kAlways || (s.prepend == PreStep::kFirst && at_start);
      if (want && t.compare(0, s.replacement.size(), s.replacement) != 0) t = s.replacement + t;
      if (!s.split) {
        out->push_back(std::move(t));
        return;
      }
      size_t pos = 0;
      while ((pos = t.find(s.replacement, pos)) != std::string::npos) {
        m.push_back({pos, pos + s.replacement.size()});
        pos += s.replacement.size();
      }
      SplitByMatches(t, m, SplitBehavior::kMergedWithNext, false, out);
      return;
    }
    case PreStep::kDigits:
      m = CharMatches(piece, IsNumeric);
      SplitByMatches(piece, m,
                     s.individual_digits ? SplitBehavior::kIsolated : SplitBehavior::kContiguous,
                     false, out);
      return;
    case PreStep::kPunctuation:
      m = CharMatches(piece, [](uint32_t c) { return IsAsciiPunctuation(c) || IsPunctuation(c); });
      SplitByMatches(piece, m, s.behavior, false, out);
      return;
    case PreStep::kWhitespace:
      s.regex->FindAll(piece, &m);
      SplitByMatches(piece, m, SplitBehavior::kRemoved, true, out);
      return;
    case PreStep::kWhitespaceSplit:
      m = CharMatches(piece, IsWhitespace);
      SplitByMatches(piece, m, SplitBehavior::kRemoved, false, out);
      return;
    case PreStep::kCharDelimiter: {
      size_t pos = 0;
      while ((pos = piece.find(s.replacement, pos)) != std::string::npos) {
        m.push_back({pos, pos + s.replacement.size()});
        pos += s.replacement.size();
      }
      SplitByMatches(piece, m, SplitBehavior::kRemoved, false, out);
      return;
    }
    case PreStep::kBert: {
      std::vector<std::string> words;
      m = CharMatches(piece, IsWhitespace);
      SplitByMatches(piece, m, SplitBehavior::kRemoved, false, &words);
      for (const std::string& w : words) {
        auto pm = CharMatches(w, [](uint32_t c) { return IsAsciiPunctuation(c) || IsPunctuation(c); });
        SplitByMatches(w, pm, SplitBehavior::kIsolated, false, out);
      }
      return;
    }
  }
}

}  // namespace

void ApplyPreTokenizers(const std::vector<PreStep>& steps, std::string text, bool at_start,
                        std::vector<std::string>* pieces) {
  if (steps.empty()) {
    if (!text.empty()) pieces->push_back(std::move(text));
    return;
  }
  std::vector<std::string> cur;
  cur.push_back(std::move(text));
  std::vector<std::string> next;
  for (size_t k = 0; k < steps.size(); ++k) {
    const PreStep& st = steps[k];
    // ByteLevel without regex or prefix space only marks pieces as bytes: nothing to do.
    if (st.kind == PreStep::kByteLevel && !st.regex && !st.add_prefix_space) continue;
    next.clear();
    for (size_t i = 0; i < cur.size(); ++i) {
      ApplyStep(steps[k], std::move(cur[i]), at_start && i == 0, &next);
    }
    cur.swap(next);
  }
  for (auto& p : cur) {
    if (!p.empty()) pieces->push_back(std::move(p));
  }
}

}  // namespace tachyon::tokenizer
