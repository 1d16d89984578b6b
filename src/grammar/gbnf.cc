#include "grammar/gbnf.h"

#include <string>
#include <vector>

#include "grammar/utf8_ranges.h"
#include "tokenizer/unicode.h"

namespace tachyon::grammar {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

class Parser {
 public:
  Parser(std::string_view text, GrammarBuilder* b, Deadline& deadline)
      : s_(text), b_(*b), deadline_(deadline) {}

  Status Parse(int32_t* root) {
    SkipSpace(true);
    while (pos_ < s_.size()) {
      RETURN_IF_ERROR(ParseRule());
      SkipSpace(true);
    }
    for (const auto& [rule, at] : refs_) {
      if (!b_.defined(rule)) return ErrorAt(at, "undefined rule '" + b_.name(rule) + "'");
    }
    const int32_t r = b_.RuleId("root");
    if (!b_.defined(r)) return InvalidArgument("GBNF: no rule named 'root'");
    *root = r;
    return OkStatus();
  }

 private:
  bool Eof() const { return pos_ >= s_.size(); }
  char Peek(size_t ahead = 0) const { return pos_ + ahead < s_.size() ? s_[pos_ + ahead] : '\0'; }

  // "LINE:COL" of byte offset `at` (both from 1; columns count bytes).
  // Scans on from the previous call when `at` is not before it (rules are defined in text
  // order), so naming every rule's place stays linear in the text.
  std::string LineCol(size_t at) const {
    if (at < lc_at_) {
      lc_at_ = 0;
      lc_line_ = lc_col_ = 1;
    }
    for (; lc_at_ < at && lc_at_ < s_.size(); ++lc_at_) {
      if (s_[lc_at_] == '\n') {
        ++lc_line_;
        lc_col_ = 1;
      } else {
        ++lc_col_;
      }
    }
    return std::to_string(lc_line_) + ":" + std::to_string(lc_col_);
  }
  Status ErrorAt(size_t at, const std::string& msg) const {
    return InvalidArgument("GBNF syntax error at " + LineCol(at) + ": " + msg);
  }
  Status Error(const std::string& msg) const { return ErrorAt(pos_, msg); }

  // Spaces, tabs and comments; newlines too when `newlines`.
  void SkipSpace(bool newlines) {
    while (!Eof()) {
      const char c = Peek();
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else if (c == '#') {
        while (!Eof() && Peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string_view ParseName() {
    const size_t start = pos_;
    while (!Eof() && IsNameChar(Peek())) ++pos_;
    return s_.substr(start, pos_ - start);
  }

  Status ParseRule() {
    const size_t start = pos_;
    const std::string_view name = ParseName();
    if (name.empty()) return Error("expected a rule name");
    SkipSpace(false);
    if (s_.substr(pos_, 3) != "::=") {
      return Error("expected '::=' after rule name '" + std::string(name) + "'");
    }
    pos_ += 3;
    SkipSpace(true);
    const int32_t rule = b_.RuleId(name);
    if (b_.defined(rule)) {
      return ErrorAt(start, "rule '" + std::string(name) + "' defined twice (first at " +
                                b_.defined_at(rule) + ")");
    }
    b_.MarkDefined(rule, LineCol(start));
    std::vector<Sequence> alts;
    RETURN_IF_ERROR(ParseAlternatives(0, std::string(name), &alts));
    for (auto& a : alts) b_.AddAlternative(rule, std::move(a));
    SkipSpace(false);
    if (!Eof() && Peek() != '\n' && Peek() != '\r') {
      return Error(Peek() == ')' ? "unmatched ')'" : "expected the end of the line");
    }
    return OkStatus();
  }

  Status ParseAlternatives(int depth, const std::string& base, std::vector<Sequence>* alts) {
    if (depth > 200) return Error("parentheses nested too deeply");
    alts->emplace_back();
    RETURN_IF_ERROR(ParseSequence(depth, base, &alts->back()));
    while (true) {
      const size_t save = pos_;
      SkipSpace(true);
      // '|' may start a continuation line.
      if (Peek() != '|') {
        pos_ = save;
        return OkStatus();
      }
      ++pos_;
      SkipSpace(true);
      alts->emplace_back();
      RETURN_IF_ERROR(ParseSequence(depth, base, &alts->back()));
    }
  }

  Status ParseSequence(int depth, const std::string& base, Sequence* seq) {
    while (true) {
      if (deadline_.Expired()) return deadline_.Error();
      SkipSpace(depth > 0);
      const char c = Peek();
      if (Eof() || c == '|' || c == ')' || c == '\n' || c == '\r') return OkStatus();
      Sequence item;
      const size_t item_start = pos_;
      if (c == '"') {
        RETURN_IF_ERROR(ParseLiteral(&item));
      } else if (c == '[') {
        RETURN_IF_ERROR(ParseClass(base, &item));
      } else if (c == '.') {
        ++pos_;
        RETURN_IF_ERROR(b_.AppendCharClass({}, true, base, &item));
      } else if (c == '(') {
        ++pos_;
        SkipSpace(true);
        std::vector<Sequence> alts;
        RETURN_IF_ERROR(ParseAlternatives(depth + 1, base, &alts));
        SkipSpace(true);
        if (Peek() != ')') return ErrorAt(item_start, "unclosed '('");
        ++pos_;
        item.push_back(b_.Group(std::move(alts), base));
      } else if (IsNameChar(c)) {
        const std::string_view name = ParseName();
        const size_t after = pos_;
        SkipSpace(false);
        if (s_.substr(pos_, 3) == "::=") {
          return ErrorAt(item_start,
                         "expected the end of the line before rule '" + std::string(name) + "'");
        }
        pos_ = after;
        const int32_t r = b_.RuleId(name);
        refs_.push_back({r, item_start});
        item.push_back({Symbol::Kind::kRule, r});
      } else {
        return Error(std::string("unexpected character '") + c + "'");
      }
      RETURN_IF_ERROR(ParseRepetition(std::move(item), base, seq));
    }
  }

  // An optional repetition suffix applied to `item`, appended to *seq.
  Status ParseRepetition(Sequence item, const std::string& base, Sequence* seq) {
    const size_t save = pos_;
    SkipSpace(false);
    const char c = Peek();
    int min = 1, max = 1;
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      min = c == '+' ? 1 : 0;
      max = c == '?' ? 1 : -1;
    } else if (c == '{') {
      const size_t at = pos_;
      ++pos_;
      SkipSpace(false);
      int lo = -1, hi = -1;
      RETURN_IF_ERROR(ParseInt(&lo));
      SkipSpace(false);
      if (Peek() == ',') {
        ++pos_;
        SkipSpace(false);
        RETURN_IF_ERROR(ParseInt(&hi));
        SkipSpace(false);
      } else {
        if (lo < 0) return ErrorAt(at, "expected a number in '{...}'");
        hi = lo;
      }
      if (Peek() != '}') return ErrorAt(at, "unclosed '{'");
      ++pos_;
      min = lo < 0 ? 0 : lo;
      max = hi;
      if (max >= 0 && max < min) return ErrorAt(at, "repetition {m,n} with n < m");
    } else {
      pos_ = save;
      seq->insert(seq->end(), item.begin(), item.end());
      return OkStatus();
    }
    Status st = b_.AppendRepeat(std::move(item), min, max, base, seq, deadline_);
    if (!st.ok() && deadline_.Expired()) return st;
    if (!st.ok()) return ErrorAt(save, st.message());
    return OkStatus();
  }

  // Digits into *out (left -1 when there are none).
  Status ParseInt(int* out) {
    long v = -1;
    while (!Eof() && Peek() >= '0' && Peek() <= '9') {
      v = (v < 0 ? 0 : v) * 10 + (Peek() - '0');
      if (v > GrammarBuilder::kMaxRepeat) {
        return Error("repetition count above the limit of " +
                     std::to_string(GrammarBuilder::kMaxRepeat));
      }
      ++pos_;
    }
    *out = static_cast<int>(v);
    return OkStatus();
  }

  // One character of a literal or class (escapes decoded) as a code point.
  Status ParseChar(uint32_t* cp) {
    const size_t at = pos_;
    if (Peek() == '\\') {
      ++pos_;
      const char e = Peek();
      ++pos_;
      int hex = 0;
      switch (e) {
        case 'n':
          *cp = '\n';
          return OkStatus();
        case 'r':
          *cp = '\r';
          return OkStatus();
        case 't':
          *cp = '\t';
          return OkStatus();
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
        case '^':
        case '/':
        case '\'':
          *cp = static_cast<uint8_t>(e);
          return OkStatus();
        case 'x':
          hex = 2;
          break;
        case 'u':
          hex = 4;
          break;
        case 'U':
          hex = 8;
          break;
        default:
          return ErrorAt(at, e == '\0' ? std::string("unterminated escape")
                                       : std::string("unknown escape '\\") + e + "'");
      }
      uint32_t v = 0;
      for (int i = 0; i < hex; ++i) {
        const char h = Peek();
        int d = (h >= '0' && h <= '9')   ? h - '0'
                : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                         : -1;
        if (d < 0) return ErrorAt(at, "expected " + std::to_string(hex) + " hex digits");
        v = v * 16 + static_cast<uint32_t>(d);
        ++pos_;
      }
      if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
        return ErrorAt(at, "escape is not a Unicode scalar value");
      }
      *cp = v;
      return OkStatus();
    }
    const int32_t c = DecodeUtf8(s_, &pos_);
    if (c < 0) return ErrorAt(at, "invalid UTF-8");
    *cp = static_cast<uint32_t>(c);
    return OkStatus();
  }

  Status ParseLiteral(Sequence* out) {
    const size_t start = pos_++;
    std::string bytes;
    while (true) {
      if (Eof() || Peek() == '\n') return ErrorAt(start, "unterminated string literal");
      if (Peek() == '"') break;
      uint32_t cp;
      RETURN_IF_ERROR(ParseChar(&cp));
      tokenizer::AppendUtf8(cp, &bytes);
    }
    ++pos_;
    b_.AppendLiteral(bytes, out);
    return OkStatus();
  }

  Status ParseClass(const std::string& base, Sequence* out) {
    const size_t start = pos_++;
    bool negated = false;
    if (Peek() == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    while (true) {
      if (Eof() || Peek() == '\n') return ErrorAt(start, "unterminated character class");
      if (Peek() == ']') break;
      uint32_t lo, hi;
      RETURN_IF_ERROR(ParseChar(&lo));
      hi = lo;
      if (Peek() == '-' && Peek(1) != ']' && pos_ + 1 < s_.size()) {
        ++pos_;
        const size_t at = pos_;
        RETURN_IF_ERROR(ParseChar(&hi));
        if (hi < lo) return ErrorAt(at, "character range out of order");
      }
      ranges.push_back({lo, hi});
    }
    ++pos_;
    return b_.AppendCharClass(std::move(ranges), negated, base, out);
  }

  std::string_view s_;
  size_t pos_ = 0;
  mutable size_t lc_at_ = 0;  // LineCol's position and its line:col
  mutable int lc_line_ = 1, lc_col_ = 1;
  GrammarBuilder& b_;
  Deadline& deadline_;
  std::vector<std::pair<int32_t, size_t>> refs_;
};

}  // namespace

Status ParseGbnf(std::string_view text, GrammarBuilder* b, int32_t* root, Deadline& deadline) {
  return Parser(text, b, deadline).Parse(root);
}

}  // namespace tachyon::grammar
