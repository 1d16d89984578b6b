#include "grammar/regex.h"

#include <algorithm>
#include <string>
#include <vector>

#include "grammar/utf8_ranges.h"
#include "tokenizer/unicode.h"

namespace tachyon::grammar {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace = {{'\t', '\r'}, {' ', ' '}};  // \t \n \v \f \r and space

Ranges Complement(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  uint32_t next = 0;
  for (auto [lo, hi] : r) {
    if (lo > next) out.push_back({next, lo - 1});
    next = std::max(next, hi + 1);
  }
  if (next <= 0x10FFFF) out.push_back({next, 0x10FFFF});
  return out;
}

class RegexParser {
 public:
  RegexParser(std::string_view s, GrammarBuilder* b, Deadline& d) : s_(s), b_(*b), deadline_(d) {}

  Status Parse(int32_t* root) {
    std::vector<Sequence> alts;
    RETURN_IF_ERROR(ParseAlternation(0, &alts));
    if (pos_ < s_.size()) return Error("unmatched ')'");
    *root = b_.RuleId("root");
    b_.MarkDefined(*root, "regex");
    for (auto& a : alts) b_.AddAlternative(*root, std::move(a));
    return OkStatus();
  }

 private:
  Status Error(const std::string& msg) const {
    return InvalidArgument("regex: " + msg + " at offset " + std::to_string(pos_));
  }
  Status Unsupported(const std::string& what) const {
    return InvalidArgument("regex: " + what + " is not supported (offset " + std::to_string(pos_) +
                           ")");
  }
  bool Eof() const { return pos_ >= s_.size(); }
  char Peek(size_t k = 0) const { return pos_ + k < s_.size() ? s_[pos_ + k] : '\0'; }

  Status ParseAlternation(int depth, std::vector<Sequence>* alts) {
    if (depth > 200) return Error("groups nested too deeply");
    while (true) {
      alts->emplace_back();
      RETURN_IF_ERROR(ParseBranch(depth, &alts->back()));
      if (Peek() != '|' || Eof()) return OkStatus();
      ++pos_;
    }
  }

  Status ParseBranch(int depth, Sequence* seq) {
    const size_t start = pos_;
    while (!Eof() && Peek() != '|' && Peek() != ')') {
      if (deadline_.Expired()) return deadline_.Error();
      const char c = Peek();
      if (c == '^') {
        if (depth != 0 || pos_ != start) return Unsupported("'^' other than at the start");
        ++pos_;
        continue;
      }
      if (c == '$') {
        ++pos_;
        if (depth != 0 || !(Eof() || Peek() == '|')) {
          --pos_;
          return Unsupported("'$' other than at the end");
        }
        continue;
      }
      Sequence atom;
      RETURN_IF_ERROR(ParseAtom(depth, &atom));
      RETURN_IF_ERROR(ParseQuantifiers(std::move(atom), seq));
    }
    return OkStatus();
  }

  Status ParseQuantifiers(Sequence atom, Sequence* seq) {
    while (!Eof()) {
      const char c = Peek();
      int min, max;
      if (c == '*' || c == '+' || c == '?') {
        ++pos_;
        min = c == '+' ? 1 : 0;
        max = c == '?' ? 1 : -1;
      } else if (c == '{' && IsCountedRepeat()) {
        ++pos_;
        RETURN_IF_ERROR(ParseCount(&min, &max));
      } else {
        break;
      }
      if (Peek() == '?') {
        ++pos_;  // lazy: same language
      } else if (Peek() == '+') {
        return Unsupported("a possessive quantifier");
      }
      Sequence rep;
      RETURN_IF_ERROR(b_.AppendRepeat(std::move(atom), min, max, "regex", &rep, deadline_));
      atom = std::move(rep);
    }
    seq->insert(seq->end(), atom.begin(), atom.end());
    return OkStatus();
  }

  // '{' starts a counted repetition only as {m}, {m,}, {m,n} or {,n} (else it is a literal).
  bool IsCountedRepeat() const {
    size_t p = pos_ + 1;
    bool digits = false, comma = false;
    for (; p < s_.size() && s_[p] != '}'; ++p) {
      if (s_[p] >= '0' && s_[p] <= '9') {
        digits = true;
      } else if (s_[p] == ',' && !comma) {
        comma = true;
      } else {
        return false;
      }
    }
    return p < s_.size() && digits;
  }

  Status ParseCount(int* min, int* max) {
    auto number = [&](int* out) -> Status {
      long v = -1;
      while (Peek() >= '0' && Peek() <= '9') {
        v = (v < 0 ? 0 : v) * 10 + (Peek() - '0');
        if (v > GrammarBuilder::kMaxRepeat) return Error("repetition count above the limit");
        ++pos_;
      }
      *out = static_cast<int>(v);
      return OkStatus();
    };
    int lo, hi;
    RETURN_IF_ERROR(number(&lo));
    if (Peek() == ',') {
      ++pos_;
      RETURN_IF_ERROR(number(&hi));
    } else {
      hi = lo;
    }
    ++pos_;  // '}'
    *min = lo < 0 ? 0 : lo;
    *max = hi;
    if (hi >= 0 && hi < *min) return Error("repetition {m,n} with n < m");
    return OkStatus();
  }

  Status ParseAtom(int depth, Sequence* out) {
    const char c = Peek();
    if (c == '(') {
      ++pos_;
      if (Peek() == '?') {
        const char k = Peek(1);
        if (k == ':') {
          pos_ += 2;
        } else if (k == '=' || k == '!') {
          return Unsupported("lookahead");
        } else if (k == '<' && (Peek(2) == '=' || Peek(2) == '!')) {
          return Unsupported("lookbehind");
        } else if (k == '<' || (k == 'P' && Peek(2) == '<')) {
          const size_t close = s_.find('>', pos_);
          if (close == std::string_view::npos) return Error("unterminated group name");
          pos_ = close + 1;
        } else if (k == 'P' && Peek(2) == '=') {
          return Unsupported("a backreference");
        } else {
          return Unsupported("an inline flag or group extension '(?" + std::string(1, k) + "'");
        }
      }
      std::vector<Sequence> alts;
      RETURN_IF_ERROR(ParseAlternation(depth + 1, &alts));
      if (Peek() != ')') return Error("unclosed '('");
      ++pos_;
      out->push_back(b_.Group(std::move(alts), "regex"));
      return OkStatus();
    }
    if (c == '[') return ParseClass(out);
    if (c == '.') {
      ++pos_;
      return b_.AppendCharClass({{'\n', '\n'}}, true, "regex", out);
    }
    if (c == '*' || c == '+' || c == '?') return Error("nothing to repeat");
    if (c == '\\') {
      Ranges r;
      bool is_class;
      uint32_t cp;
      RETURN_IF_ERROR(ParseEscape(false, &cp, &r, &is_class));
      if (is_class) return b_.AppendCharClass(std::move(r), false, "regex", out);
      std::string bytes;
      tokenizer::AppendUtf8(cp, &bytes);
      b_.AppendLiteral(bytes, out);
      return OkStatus();
    }
    const size_t at = pos_;
    if (DecodeUtf8(s_, &pos_) < 0) return Error("invalid UTF-8");
    b_.AppendLiteral(s_.substr(at, pos_ - at), out);
    return OkStatus();
  }

  // After a backslash: a character (*cp) or a class (*ranges, *is_class).
  Status ParseEscape(bool in_class, uint32_t* cp, Ranges* ranges, bool* is_class) {
    ++pos_;
    if (Eof()) return Error("trailing backslash");
    const char e = s_[pos_++];
    *is_class = false;
    switch (e) {
      case 'd':
        *ranges = kDigit;
        *is_class = true;
        return OkStatus();
      case 'D':
        *ranges = Complement(kDigit);
        *is_class = true;
        return OkStatus();
      case 'w':
        *ranges = kWord;
        *is_class = true;
        return OkStatus();
      case 'W':
        *ranges = Complement(kWord);
        *is_class = true;
        return OkStatus();
      case 's':
        *ranges = kSpace;
        *is_class = true;
        return OkStatus();
      case 'S':
        *ranges = Complement(kSpace);
        *is_class = true;
        return OkStatus();
      case 'n':
        *cp = '\n';
        return OkStatus();
      case 'r':
        *cp = '\r';
        return OkStatus();
      case 't':
        *cp = '\t';
        return OkStatus();
      case 'f':
        *cp = '\f';
        return OkStatus();
      case 'v':
        *cp = '\v';
        return OkStatus();
      case '0':
        *cp = 0;
        return OkStatus();
      case 'b':
        if (in_class) {
          *cp = '\b';
          return OkStatus();
        }
        return Unsupported("a word boundary (\\b)");
      case 'B':
        return Unsupported("a word boundary (\\B)");
      case 'A':
      case 'Z':
      case 'z':
      case 'G':
        return Unsupported("an anchor escape");
      case 'p':
      case 'P':
        return Unsupported("a Unicode property class (\\p)");
      case 'k':
        return Unsupported("a backreference");
      case 'x':
      case 'u': {
        const int n = e == 'x' ? 2 : 4;
        uint32_t v = 0;
        for (int i = 0; i < n; ++i) {
          const char h = Peek();
          const int d = (h >= '0' && h <= '9')   ? h - '0'
                        : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                        : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                                 : -1;
          if (d < 0) return Error("expected hex digits");
          v = v * 16 + static_cast<uint32_t>(d);
          ++pos_;
        }
        if (v >= 0xD800 && v <= 0xDFFF) return Error("a surrogate code point");
        *cp = v;
        return OkStatus();
      }
      default:
        if (e >= '1' && e <= '9') return Unsupported("a backreference");
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) {
          return Error(std::string("unknown escape '\\") + e + "'");
        }
        --pos_;
        {
          const int32_t c = DecodeUtf8(s_, &pos_);
          if (c < 0) return Error("invalid UTF-8");
          *cp = static_cast<uint32_t>(c);
        }
        return OkStatus();
    }
  }

  Status ParseClass(Sequence* out) {
    const size_t start = pos_++;
    bool negated = false;
    if (Peek() == '^') {
      negated = true;
      ++pos_;
    }
    Ranges ranges;
    bool first = true;
    while (true) {
      if (Eof()) {
        pos_ = start;
        return Error("unterminated character class");
      }
      if (Peek() == ']' && !first) break;
      first = false;
      if (Peek() == '[' && Peek(1) == ':') return Unsupported("a POSIX class [:name:]");
      uint32_t lo;
      Ranges cls;
      bool is_class = false;
      RETURN_IF_ERROR(ClassChar(&lo, &cls, &is_class));
      if (is_class) {
        ranges.insert(ranges.end(), cls.begin(), cls.end());
        continue;
      }
      uint32_t hi = lo;
      if (Peek() == '-' && Peek(1) != ']' && pos_ + 1 < s_.size()) {
        ++pos_;
        RETURN_IF_ERROR(ClassChar(&hi, &cls, &is_class));
        if (is_class) return Error("a class in a range");
        if (hi < lo) return Error("character range out of order");
      }
      ranges.push_back({lo, hi});
    }
    ++pos_;
    return b_.AppendCharClass(std::move(ranges), negated, "regex", out);
  }

  Status ClassChar(uint32_t* cp, Ranges* cls, bool* is_class) {
    if (Peek() == '\\') return ParseEscape(true, cp, cls, is_class);
    *is_class = false;
    const int32_t c = DecodeUtf8(s_, &pos_);
    if (c < 0) return Error("invalid UTF-8");
    *cp = static_cast<uint32_t>(c);
    return OkStatus();
  }

  std::string_view s_;
  size_t pos_ = 0;
  GrammarBuilder& b_;
  Deadline& deadline_;
};

}  // namespace

Status ParseRegex(std::string_view regex, GrammarBuilder* b, int32_t* root, Deadline& deadline) {
  return RegexParser(regex, b, deadline).Parse(root);
}

}  // namespace tachyon::grammar
