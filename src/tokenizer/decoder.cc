// Decoder steps (Hugging Face semantics): each maps the list of token strings.
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/pipeline.h"
#include "tokenizer/unicode.h"

namespace tachyon::tokenizer {
namespace {

std::string ReplaceAll(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  if (from.empty()) return std::string(text);
  size_t pos = 0;
  while (true) {
    const size_t hit = text.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(text.substr(pos));
  return out;
}


std::vector<std::string> ByteLevelDecode(const std::vector<std::string>& tokens) {
  std::string bytes;
  for (const std::string& t : tokens) {
    const size_t mark = bytes.size();
    if (!ByteLevelToBytes(t, &bytes)) {
      bytes.resize(mark);
      bytes += t;
    }
  }
  return {Utf8Lossy(bytes)};
}

std::vector<std::string> ByteFallbackDecode(std::vector<std::string> tokens) {
  std::vector<std::string> out;
  std::string pending;
  size_t pending_count = 0;
  auto flush = [&]() {
    if (pending_count == 0) return;
    if (IsValidUtf8(pending)) {
      out.push_back(pending);
    } else {
      for (size_t i = 0; i < pending_count; ++i) out.push_back(CodepointToUtf8(kReplacementChar));
    }
    pending.clear();
    pending_count = 0;
  };
  for (std::string& t : tokens) {
    const int b = ParseByteToken(t);
    if (b >= 0) {
      pending.push_back(static_cast<char>(b));
      ++pending_count;
    } else {
      flush();
      out.push_back(std::move(t));
    }
  }
  flush();
  return out;
}

std::string StripChars(const std::string& t, const std::string& content, int start, int stop) {
  size_t b = 0, e = t.size();
  for (int i = 0; i < start && !content.empty() && t.compare(b, content.size(), content) == 0 &&
                  b + content.size() <= e;
       ++i) {
    b += content.size();
  }
  for (int i = 0; i < stop && !content.empty() && e >= b + content.size() &&
                  t.compare(e - content.size(), content.size(), content) == 0;
       ++i) {
    e -= content.size();
  }
  return t.substr(b, e - b);
}

}  // namespace

std::string CleanupTokenizationSpaces(std::string text) {
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."},   {" ?", "?"},     {" !", "!"},     {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"},   {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) text = ReplaceAll(text, from, to);
  return text;
}

std::string ApplyDecoders(const std::vector<DecStep>& steps, std::vector<std::string> tokens) {
  for (const DecStep& s : steps) {
    switch (s.kind) {
      case DecStep::kByteLevel:
        tokens = ByteLevelDecode(tokens);
        break;
      case DecStep::kReplace:
        for (std::string& t : tokens) t = ReplaceAll(t, s.pattern, s.content);
        break;
      case DecStep::kByteFallback:
        tokens = ByteFallbackDecode(std::move(tokens));
        break;
      case DecStep::kFuse: {
        std::string all;
        for (const std::string& t : tokens) all += t;
        tokens.assign(1, std::move(all));
        break;
      }
      case DecStep::kStrip:
        for (std::string& t : tokens) t = StripChars(t, s.content, s.start, s.stop);
        break;
      case DecStep::kMetaspace:
        for (size_t i = 0; i < tokens.size(); ++i) {
          // In the first token every replacement character is dropped (the prefix space).
          tokens[i] = ReplaceAll(tokens[i], s.replacement, i == 0 && s.prepend ? "" : " ");
        }
        break;
      case DecStep::kWordPiece:
        for (size_t i = 0; i < tokens.size(); ++i) {
          std::string& t = tokens[i];
          if (i != 0) {
            if (t.compare(0, s.prefix.size(), s.prefix) == 0) {
              t.erase(0, s.prefix.size());
            } else {
              t.insert(0, 1, ' ');
            }
          }
          if (s.cleanup) t = CleanupTokenizationSpaces(std::move(t));
        }
        break;
      case DecStep::kGgufWordPiece: {
        // GGUF BERT spellings: "▁word" starts a word, other pieces continue it.
        std::string all;
        for (const std::string& t : tokens) all += ReplaceAll(t, "\xE2\x96\x81", " ");
        if (!all.empty() && all[0] == ' ') all.erase(0, 1);
        tokens.assign(1, std::move(all));
        break;
      }
    }
  }
  return [&] {
    std::string all;
    for (const std::string& t : tokens) all += t;
    return all;
  }();
}

int ParseByteToken(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  int v = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = t[i];
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'A' && c <= 'F') {
      d = c - 'A' + 10;
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return -1;
    }
    v = v * 16 + d;
  }
  return v;
}

}  // namespace tachyon::tokenizer
