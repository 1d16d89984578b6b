#include "chat/lexer.h"

#include <cmath>
#include <cstdlib>

#include "chat/unicode.h"

namespace tachyon::chat {
namespace {

bool IsIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool IsIdentChar(char c) {
  return IsIdentStart(c) || (c >= '0' && c <= '9');
}
bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}
bool IsAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Python str.rstrip() with no argument.
std::string_view RStripPy(std::string_view s) {
  if (IsAscii(s)) {
    size_t e = s.size();
    while (e > 0 && IsSpace(static_cast<unsigned char>(s[e - 1]))) --e;
    return s.substr(0, e);
  }
  std::u32string u = DecodeUtf8(s);
  size_t e = u.size();
  while (e > 0 && IsSpace(u[e - 1])) --e;
  size_t bytes = 0;
  std::string tmp;
  for (size_t i = 0; i < e; ++i) {
    tmp.clear();
    AppendUtf8(u[i], &tmp);
    bytes += tmp.size();
  }
  return s.substr(0, bytes);
}

bool AllSpace(std::string_view s) {
  if (s.empty()) return false;
  for (char32_t c : DecodeUtf8(s)) {
    if (!IsSpace(c)) return false;
  }
  return true;
}

class Lexer {
 public:
  Lexer(std::string src, const LexerOptions& opt) : src_(std::move(src)), opt_(opt) {}

  Result<std::vector<Token>> Run();

 private:
  Status Error(const std::string& what) const {
    return InvalidArgument("line " + std::to_string(line_) + ": " + what);
  }
  void Emit(TokenType t, std::string v = "") {
    Token tok;
    tok.type = t;
    tok.value = std::move(v);
    tok.line = line_;
    out_.push_back(std::move(tok));
  }
  void Advance(size_t to) {
    for (size_t i = pos_; i < to && i < src_.size(); ++i) line_ += src_[i] == '\n';
    pos_ = to;
  }
  bool At(std::string_view s) const { return src_.compare(pos_, s.size(), s) == 0; }
  void SkipSpace() {
    size_t p = pos_;
    while (p < src_.size() && IsAsciiSpace(src_[p])) ++p;
    Advance(p);
  }
  // Applies `-` / lstrip_blocks to the text before a tag and emits it.
  void EmitText(std::string_view text, char sign, bool lstrip_applies) {
    if (sign == '-') {
      text = RStripPy(text);
    } else if (sign != '+' && opt_.lstrip_blocks && lstrip_applies) {
      size_t nl = text.rfind('\n');
      size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && AllSpace(text.substr(l_pos))) {
        text = text.substr(0, l_pos);
      }
    }
    if (!text.empty()) {
      Emit(TokenType::kText, std::string(text));
    }
  }
  // After a tag's closing delimiter at pos_: handles `-` (strip all whitespace) or trim.
  void AfterClose(char sign, bool trim_applies) {
    if (sign == '-') {
      SkipSpace();
    } else if (sign != '+' && trim_applies && opt_.trim_blocks && pos_ < src_.size() &&
               src_[pos_] == '\n') {
      Advance(pos_ + 1);
    }
    line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
  }
  Status LexComment();
  Status LexTag(bool block);
  Status LexRaw();
  Status LexToken(int* depth);
  Status LexString();
  Status LexNumber();

  std::string src_;
  LexerOptions opt_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> out_;
};

Result<std::vector<Token>> Lexer::Run() {
  while (pos_ < src_.size()) {
    size_t k = pos_;
    while (true) {
      k = src_.find('{', k);
      if (k == std::string::npos || k + 1 >= src_.size()) {
        k = std::string::npos;
        break;
      }
      char c = src_[k + 1];
      if (c == '{' || c == '%' || c == '#') break;
      ++k;
    }
    if (k == std::string::npos) {
      Emit(TokenType::kText, src_.substr(pos_));
      Advance(src_.size());
      break;
    }
    char kind = src_[k + 1];
    char sign =
        (k + 2 < src_.size() && (src_[k + 2] == '-' || src_[k + 2] == '+')) ? src_[k + 2] : 0;
    // {% raw %}?
    bool raw = false;
    size_t raw_body = 0;
    char raw_close_sign = 0;
    if (kind == '%') {
      size_t p = k + 2 + (sign ? 1 : 0);
      while (p < src_.size() && IsAsciiSpace(src_[p])) ++p;
      if (src_.compare(p, 3, "raw") == 0 && (p + 3 >= src_.size() || !IsIdentChar(src_[p + 3]))) {
        p += 3;
        while (p < src_.size() && IsAsciiSpace(src_[p])) ++p;
        if (src_.compare(p, 3, "-%}") == 0) {
          raw = true, raw_close_sign = '-', raw_body = p + 3;
        } else if (src_.compare(p, 2, "%}") == 0) {
          raw = true, raw_body = p + 2;
        }
      }
    }
    std::string_view text(src_.data() + pos_, k - pos_);
    int text_line = line_;
    EmitText(text, sign, kind != '{');
    if (!out_.empty() && out_.back().type == TokenType::kText) out_.back().line = text_line;
    Advance(k + 2 + (sign ? 1 : 0));
    if (raw) {
      Advance(raw_body);
      if (raw_close_sign == '-') SkipSpace();
      line_starting_ = false;
      RETURN_IF_ERROR(LexRaw());
    } else if (kind == '#') {
      RETURN_IF_ERROR(LexComment());
    } else {
      RETURN_IF_ERROR(LexTag(kind == '%'));
    }
  }
  Emit(TokenType::kEof);
  return std::move(out_);
}

Status Lexer::LexComment() {
  size_t j = src_.find("#}", pos_);
  if (j == std::string::npos) return Error("missing end of comment tag");
  char sign = (j > pos_ && (src_[j - 1] == '-' || src_[j - 1] == '+')) ? src_[j - 1] : 0;
  Advance(j + 2);
  AfterClose(sign, true);
  return OkStatus();
}

Status Lexer::LexRaw() {
  // Find {% [sign] endraw [sign] %}
  size_t p = pos_;
  while (true) {
    size_t k = src_.find("{%", p);
    if (k == std::string::npos) return Error("missing end of raw directive");
    size_t q = k + 2;
    char sign = 0;
    if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) sign = src_[q++];
    while (q < src_.size() && IsAsciiSpace(src_[q])) ++q;
    if (src_.compare(q, 6, "endraw") != 0) {
      p = k + 2;
      continue;
    }
    q += 6;
    while (q < src_.size() && IsAsciiSpace(src_[q])) ++q;
    char close = 0;
    if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) close = src_[q++];
    if (src_.compare(q, 2, "%}") != 0) {
      p = k + 2;
      continue;
    }
    std::string_view body(src_.data() + pos_, k - pos_);
    int body_line = line_;
    EmitText(body, sign, true);
    if (!out_.empty() && out_.back().type == TokenType::kText) out_.back().line = body_line;
    Advance(q + 2);
    AfterClose(close, true);
    return OkStatus();
  }
}

Status Lexer::LexTag(bool block) {
  Emit(block ? TokenType::kBlockBegin : TokenType::kVarBegin);
  int depth = 0;
  while (true) {
    SkipSpace();
    if (pos_ >= src_.size()) {
      return Error(block ? "unexpected end of template, expected '%}'"
                         : "unexpected end of template, expected '}}'");
    }
    if (depth == 0) {
      const char* close = block ? "%}" : "}}";
      char sign = 0;
      size_t len = 0;
      if (At(close)) {
        len = 2;
      } else if ((At("-") || (block && At("+"))) && src_.compare(pos_ + 1, 2, close) == 0) {
        sign = src_[pos_];
        len = 3;
      }
      if (len) {
        Emit(block ? TokenType::kBlockEnd : TokenType::kVarEnd);
        Advance(pos_ + len);
        AfterClose(sign, block);
        return OkStatus();
      }
    }
    RETURN_IF_ERROR(LexToken(&depth));
  }
}

Status Lexer::LexToken(int* depth) {
  char c = src_[pos_];
  if (IsIdentStart(c)) {
    size_t e = pos_;
    while (e < src_.size() && IsIdentChar(src_[e])) ++e;
    Emit(TokenType::kName, src_.substr(pos_, e - pos_));
    Advance(e);
    return OkStatus();
  }
  if (IsDigit(c)) return LexNumber();
  if (c == '\'' || c == '"') return LexString();
  static const char* kOps2[] = {"//", "**", "==", "!=", "<=", ">="};
  for (const char* op : kOps2) {
    if (At(op)) {
      Emit(TokenType::kOp, op);
      Advance(pos_ + 2);
      return OkStatus();
    }
  }
  static const std::string_view kOps1 = "+-*/%~<>=()[]{},.:|;";
  if (kOps1.find(c) != std::string_view::npos) {
    if (c == '(' || c == '[' || c == '{') ++*depth;
    if ((c == ')' || c == ']' || c == '}') && *depth > 0) --*depth;
    Emit(TokenType::kOp, std::string(1, c));
    Advance(pos_ + 1);
    return OkStatus();
  }
  return Error(std::string("unexpected character '") + c + "'");
}

Status Lexer::LexNumber() {
  size_t p = pos_;
  auto digits = [&](auto pred) {
    size_t s = p;
    while (p < src_.size() && (pred(src_[p]) || (src_[p] == '_' && p > s && p + 1 < src_.size() &&
                                                 pred(src_[p + 1])))) {
      ++p;
    }
    return p > s;
  };
  auto strip = [](std::string s) {
    std::string r;
    for (char ch : s) {
      if (ch != '_') r.push_back(ch);
    }
    return r;
  };
  if (src_[p] == '0' && p + 1 < src_.size() &&
      (src_[p + 1] == 'x' || src_[p + 1] == 'X' || src_[p + 1] == 'o' || src_[p + 1] == 'O' ||
       src_[p + 1] == 'b' || src_[p + 1] == 'B')) {
    char b = src_[p + 1] | 0x20;
    int base = b == 'x' ? 16 : b == 'o' ? 8 : 2;
    p += 2;
    size_t s = p;
    digits([&](char ch) { return std::isxdigit(static_cast<unsigned char>(ch)) != 0; });
    std::string d = strip(src_.substr(s, p - s));
    if (d.empty()) return Error("invalid number literal");
    errno = 0;
    unsigned long long v = std::strtoull(d.c_str(), nullptr, base);
    if (errno || v > uint64_t(INT64_MAX)) return Error("integer literal too large");
    Emit(TokenType::kInt);
    out_.back().int_value = int64_t(v);
    Advance(p);
    return OkStatus();
  }
  digits(IsDigit);
  bool is_float = false;
  bool after_dot = !out_.empty() && out_.back().type == TokenType::kOp && out_.back().value == ".";
  if (!after_dot && p + 1 < src_.size() && src_[p] == '.' && IsDigit(src_[p + 1])) {
    ++p;
    digits(IsDigit);
    is_float = true;
  }
  if (!after_dot && p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
    size_t q = p + 1;
    if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
    if (q < src_.size() && IsDigit(src_[q])) {
      p = q;
      digits(IsDigit);
      is_float = true;
    }
  }
  std::string text = strip(src_.substr(pos_, p - pos_));
  if (is_float) {
    Emit(TokenType::kFloat, text);
    out_.back().float_value = std::strtod(text.c_str(), nullptr);
  } else {
    errno = 0;
    unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
    if (errno || v > uint64_t(INT64_MAX)) return Error("integer literal too large");
    Emit(TokenType::kInt, text);
    out_.back().int_value = int64_t(v);
  }
  Advance(p);
  return OkStatus();
}

int HexVal(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Status Lexer::LexString() {
  char q = src_[pos_];
  size_t p = pos_ + 1;
  std::string out;
  while (true) {
    if (p >= src_.size()) return Error("unterminated string literal");
    char c = src_[p];
    if (c == q) break;
    if (c != '\\') {
      out.push_back(c);
      ++p;
      continue;
    }
    if (p + 1 >= src_.size()) return Error("unterminated string literal");
    char e = src_[p + 1];
    p += 2;
    switch (e) {
      case 'n':
        out.push_back('\n');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case '\\':
        out.push_back('\\');
        break;
      case '\'':
        out.push_back('\'');
        break;
      case '"':
        out.push_back('"');
        break;
      case 'a':
        out.push_back('\a');
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'v':
        out.push_back('\v');
        break;
      case '\n':
        break;  // line continuation
      case 'x':
      case 'u':
      case 'U': {
        int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (int i = 0; i < n; ++i) {
          int h = p + i < src_.size() ? HexVal(src_[p + i]) : -1;
          if (h < 0) return Error("truncated \\" + std::string(1, e) + " escape in string");
          cp = cp * 16 + h;
        }
        if (cp > 0x10FFFF) return Error("illegal Unicode character in string");
        p += n;
        AppendUtf8(cp, &out);
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          uint32_t cp = e - '0';
          for (int i = 0; i < 2 && p < src_.size() && src_[p] >= '0' && src_[p] <= '7'; ++i) {
            cp = cp * 8 + (src_[p++] - '0');
          }
          AppendUtf8(cp, &out);
        } else {
          out.push_back('\\');
          out.push_back(e);
        }
    }
  }
  Emit(TokenType::kString, std::move(out));
  Advance(p + 1);
  return OkStatus();
}

}  // namespace

Result<std::vector<Token>> Tokenize(std::string_view source, const LexerOptions& options) {
  std::string src;
  src.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      src.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      src.push_back(source[i]);
    }
  }
  if (!options.keep_trailing_newline && !src.empty() && src.back() == '\n') src.pop_back();
  Lexer lexer(std::move(src), options);
  return lexer.Run();
}

}  // namespace tachyon::chat
