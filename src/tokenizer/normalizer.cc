// Normalizer steps (Hugging Face semantics).
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/pipeline.h"
#include "tokenizer/unicode.h"

namespace tachyon::tokenizer {
namespace {

std::string ReplaceAll(const std::string& text, const std::string& from, const std::string& to) {
  if (from.empty()) return text;
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (true) {
    const size_t hit = text.find(from, pos);
    if (hit == std::string::npos) break;
    out.append(text, pos, hit - pos);
    out.append(to);
    pos = hit + from.size();
  }
  out.append(text, pos, std::string::npos);
  return out;
}

std::string ReplaceRegex(const Regex& re, const std::string& text, const std::string& to) {
  std::vector<std::pair<size_t, size_t>> m;
  re.FindAll(text, &m);
  if (m.empty()) return text;
  std::string out;
  size_t pos = 0;
  for (auto [b, e] : m) {
    out.append(text, pos, b - pos);
    out.append(to);
    pos = e;
  }
  out.append(text, pos, std::string::npos);
  return out;
}

std::string StripAccents(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    uint32_t cp;
    const size_t n = DecodeUtf8(text, i, &cp);
    if (!IsNonspacingMark(cp)) out.append(text.substr(i, n));
    i += n;
  }
  return out;
}

std::string Strip(std::string_view text, bool left, bool right) {
  size_t b = 0, e = text.size();
  if (left) {
    while (b < e) {
      uint32_t cp;
      const size_t n = DecodeUtf8(text, b, &cp);
      if (!IsWhitespace(cp)) break;
      b += n;
    }
  }
  if (right) {
    while (e > b) {
      size_t s = e - 1;
      while (s > b && (static_cast<uint8_t>(text[s]) & 0xC0) == 0x80) --s;
      uint32_t cp;
      DecodeUtf8(text, s, &cp);
      if (!IsWhitespace(cp)) break;
      e = s;
    }
  }
  return std::string(text.substr(b, e - b));
}

// BertNormalizer: clean control characters, space out CJK ideographs, optionally strip
// accents (NFD + drop Mn) and lowercase.
std::string BertNormalize(const NormStep& s, const std::string& text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    uint32_t cp;
    const size_t n = DecodeUtf8(text, i, &cp);
    i += n;
    if (s.clean_text) {
      if (cp == 0 || cp == kReplacementChar || IsControl(cp)) continue;
      if (IsWhitespace(cp)) {
        out.push_back(' ');
        continue;
      }
    }
    if (s.chinese && IsCjk(cp)) {
      out.push_back(' ');
      AppendUtf8(cp, &out);
      out.push_back(' ');
      continue;
    }
    AppendUtf8(cp, &out);
  }
  if (s.strip_accents) out = StripAccents(Normalize(out, NormalForm::kNfd));
  if (s.lowercase) out = Lowercase(out);
  return out;
}

}  // namespace

std::string ApplyNormalizers(const std::vector<NormStep>& steps, std::string text) {
  for (const NormStep& s : steps) {
    switch (s.kind) {
      case NormStep::kNfc: text = Normalize(text, NormalForm::kNfc); break;
      case NormStep::kNfkc: text = Normalize(text, NormalForm::kNfkc); break;
      case NormStep::kNfd: text = Normalize(text, NormalForm::kNfd); break;
      case NormStep::kNfkd: text = Normalize(text, NormalForm::kNfkd); break;
      case NormStep::kLowercase: text = Lowercase(text); break;
      case NormStep::kReplace:
        text = s.regex ? ReplaceRegex(*s.regex, text, s.content)
                       : ReplaceAll(text, s.pattern, s.content);
        break;
      case NormStep::kPrepend:
        if (!text.empty()) text = s.content + text;
        break;
      case NormStep::kStrip: text = Strip(text, s.left, s.right); break;
      case NormStep::kStripAccents: text = StripAccents(text); break;
      case NormStep::kBert: text = BertNormalize(s, text); break;
    }
  }
  return text;
}

}  // namespace tachyon::tokenizer
