// JSON Schema `pattern` -> GBNF for the content of a JSON string.
//
// The regex is matched against the decoded string (search semantics: unanchored sides get any
// characters), while the grammar generates its JSON encoding, so every character set is split
// into what JSON writes raw and what it must escape. Supported: literals and escapes, classes
// (ranges, negation, \d \w \s and their negations), '.', groups (capturing, non-capturing,
// named), alternation, greedy and lazy quantifiers, '^' / '$' at the ends of top-level branches.
// Python's `re` (the reference validator) reads \d \w \s as Unicode classes: the grammar uses
// their ASCII subsets, and their negations (\D, [^\d]) are limited to ASCII, so everything
// generated matches under both readings. Refused: lookaround, backreferences, word boundaries,
// flags, possessive quantifiers, \p{...}.
#include <algorithm>

#include "grammar/json_schema_internal.h"
#include "tokenizer/unicode.h"

namespace tachyon::grammar::schema_internal {
namespace {

constexpr uint32_t kMaxCp = 0x10FFFF;

CodeRanges Normalize(CodeRanges r) {
  std::sort(r.begin(), r.end());
  CodeRanges out;
  for (auto [a, b] : r) {
    if (!out.empty() && a <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, b);
    } else {
      out.emplace_back(a, b);
    }
  }
  return out;
}

CodeRanges Complement(const CodeRanges& r) {
  CodeRanges out;
  uint32_t next = 0;
  for (auto [a, b] : r) {
    if (a > next) out.emplace_back(next, a - 1);
    next = b + 1;
  }
  if (next <= kMaxCp) out.emplace_back(next, kMaxCp);
  return out;
}

CodeRanges Intersect(const CodeRanges& x, const CodeRanges& y) {
  CodeRanges out;
  size_t i = 0, j = 0;
  while (i < x.size() && j < y.size()) {
    const uint32_t a = std::max(x[i].first, y[j].first);
    const uint32_t b = std::min(x[i].second, y[j].second);
    if (a <= b) out.emplace_back(a, b);
    (x[i].second < y[j].second) ? ++i : ++j;
  }
  return out;
}

bool Contains(const CodeRanges& r, uint32_t cp) {
  for (auto [a, b] : r) {
    if (cp >= a && cp <= b) return true;
  }
  return false;
}

const CodeRanges kDigit = {{'0', '9'}};
const CodeRanges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const CodeRanges kSpace = {{'\t', '\r'}, {' ', ' '}};
const CodeRanges kAscii = {{0, 0x7F}};

struct Node {
  enum Kind { kSet, kSeq, kAlt, kRepeat, kBol, kEol } kind = kSeq;
  CodeRanges set;
  std::vector<Node> kids;
  int64_t min = 1, max = 1;
};

class Parser {
 public:
  explicit Parser(std::string_view p) : cps_(DecodeUtf8(p)) {}

  Result<Node> Parse() {
    ASSIGN_OR_RETURN(Node n, Alt());
    if (pos_ < cps_.size()) return Err("unbalanced ')'");
    return n;
  }

 private:
  Status Err(std::string what) {
    return InvalidArgument("regex feature not supported: " + what + " (at offset " +
                           std::to_string(pos_) + ")");
  }
  bool More() const { return pos_ < cps_.size(); }
  uint32_t Peek(size_t ahead = 0) const {
    return pos_ + ahead < cps_.size() ? cps_[pos_ + ahead] : 0xFFFFFFFF;
  }

  Result<Node> Alt() {
    Node alt;
    alt.kind = Node::kAlt;
    while (true) {
      ASSIGN_OR_RETURN(Node s, Seq());
      alt.kids.push_back(std::move(s));
      if (Peek() != '|') break;
      ++pos_;
    }
    if (alt.kids.size() == 1) return std::move(alt.kids[0]);
    return alt;
  }

  Result<Node> Seq() {
    Node seq;
    seq.kind = Node::kSeq;
    while (More() && Peek() != '|' && Peek() != ')') {
      ASSIGN_OR_RETURN(Node atom, Atom());
      ASSIGN_OR_RETURN(Node q, Quantified(std::move(atom)));
      seq.kids.push_back(std::move(q));
    }
    return seq;
  }

  // Reads "{m}", "{m,}", "{m,n}" at pos_; false (pos_ unchanged) if it is not a quantifier.
  bool Braces(int64_t* min, int64_t* max) {
    size_t p = pos_ + 1;
    auto number = [&](int64_t* out) {
      size_t start = p;
      int64_t v = 0;
      while (p < cps_.size() && cps_[p] >= '0' && cps_[p] <= '9') {
        v = std::min<int64_t>(v * 10 + (cps_[p] - '0'), int64_t{1} << 40);
        ++p;
      }
      *out = v;
      return p > start;
    };
    if (!number(min)) return false;
    *max = *min;
    if (p < cps_.size() && cps_[p] == ',') {
      ++p;
      if (!number(max)) *max = -1;
    }
    if (p >= cps_.size() || cps_[p] != '}') return false;
    pos_ = p + 1;
    return true;
  }

  Result<Node> Quantified(Node atom) {
    while (More()) {
      int64_t min, max;
      const uint32_t c = Peek();
      if (c == '*') {
        min = 0, max = -1, ++pos_;
      } else if (c == '+') {
        min = 1, max = -1, ++pos_;
      } else if (c == '?') {
        min = 0, max = 1, ++pos_;
      } else if (c == '{' && Braces(&min, &max)) {
      } else {
        break;
      }
      if (max >= 0 && min > max) return Err("quantifier {m,n} with m > n");
      if (min > 100000 || max > 100000) return Err("quantifier count above 100000");
      if (atom.kind == Node::kBol || atom.kind == Node::kEol) return Err("quantified anchor");
      if (Peek() == '?') {
        ++pos_;  // lazy: the same language
      } else if (Peek() == '+') {
        return Err("possessive quantifier");
      }
      Node r;
      r.kind = Node::kRepeat;
      r.min = min;
      r.max = max;
      r.kids.push_back(std::move(atom));
      atom = std::move(r);
    }
    return atom;
  }

  Node SetNode(CodeRanges r) {
    Node n;
    n.kind = Node::kSet;
    n.set = Normalize(std::move(r));
    return n;
  }

  Result<Node> Atom() {
    const uint32_t c = cps_[pos_++];
    switch (c) {
      case '^': {
        Node n;
        n.kind = Node::kBol;
        return n;
      }
      case '$': {
        Node n;
        n.kind = Node::kEol;
        return n;
      }
      case '.':
        return SetNode({{0, '\n' - 1}, {'\n' + 1, '\r' - 1}, {'\r' + 1, 0x2027}, {0x202A, kMaxCp}});
      case '(':
        return Group();
      case '[':
        return Class();
      case '\\': {
        CodeRanges r;
        RETURN_IF_ERROR(Escape(&r, /*in_class=*/false, nullptr));
        return SetNode(std::move(r));
      }
      case '*':
      case '+':
      case '?':
        return Err("quantifier without an atom");
      default:
        return SetNode({{c, c}});
    }
  }

  Result<Node> Group() {
    if (Peek() == '?') {
      if (Peek(1) == ':') {
        pos_ += 2;
      } else if (Peek(1) == 'P' && Peek(2) == '<') {
        pos_ += 3;
        if (!SkipName()) return Err("bad group name");
      } else if (Peek(1) == '<' && Peek(2) != '=' && Peek(2) != '!') {
        pos_ += 2;
        if (!SkipName()) return Err("bad group name");
      } else {
        return Err("group '(?" + std::string(1, static_cast<char>(Peek(1) & 0x7F)) +
                   "' (lookaround, flags or backreference)");
      }
    }
    ASSIGN_OR_RETURN(Node inner, Alt());
    if (Peek() != ')') return Err("unbalanced '('");
    ++pos_;
    return inner;
  }

  bool SkipName() {
    while (More() && Peek() != '>') ++pos_;
    if (!More()) return false;
    ++pos_;
    return true;
  }

  // Reads the escape after a backslash into *r (or, in a class, a single code point into *single
  // when it is one).
  Status Escape(CodeRanges* r, bool in_class, uint32_t* single) {
    if (!More()) return Err("trailing backslash");
    const uint32_t c = cps_[pos_++];
    auto one = [&](uint32_t cp) {
      r->emplace_back(cp, cp);
      if (single) *single = cp;
      return OkStatus();
    };
    switch (c) {
      case 'd':
        *r = kDigit;
        return OkStatus();
      case 'w':
        *r = kWord;
        return OkStatus();
      case 's':
        *r = kSpace;
        return OkStatus();
      case 'D':
        *r = Intersect(Complement(kDigit), kAscii);
        return OkStatus();
      case 'W':
        *r = Intersect(Complement(kWord), kAscii);
        return OkStatus();
      case 'S':
        *r = Intersect(Complement(kSpace), kAscii);
        return OkStatus();
      case 't':
        return one('\t');
      case 'n':
        return one('\n');
      case 'r':
        return one('\r');
      case 'f':
        return one('\f');
      case 'v':
        return one('\v');
      case '0':
        return one(0);
      case 'x':
      case 'u': {
        const int n = c == 'x' ? 2 : 4;
        uint32_t v = 0;
        for (int k = 0; k < n; ++k) {
          const uint32_t h = Peek();
          int d = (h >= '0' && h <= '9')   ? static_cast<int>(h - '0')
                  : (h >= 'a' && h <= 'f') ? static_cast<int>(h - 'a' + 10)
                  : (h >= 'A' && h <= 'F') ? static_cast<int>(h - 'A' + 10)
                                           : -1;
          if (d < 0) return Err("bad \\x or \\u escape");
          v = v * 16 + d;
          ++pos_;
        }
        if (v >= 0xD800 && v <= 0xDFFF) return Err("surrogate code point escape");
        return one(v);
      }
      case 'b':
        if (in_class) return one('\b');
        return Err("word boundary \\b");
      default:
        if ((c >= '1' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
          return Err(std::string("escape \\") + static_cast<char>(c));
        }
        return one(c);  // escaped punctuation or other character stands for itself
    }
  }

  Result<Node> Class() {
    bool negate = false;
    if (Peek() == '^') {
      negate = true;
      ++pos_;
    }
    if (Peek() == ']') return Err("']' first in a class");
    CodeRanges r;
    bool unicode_shorthand = false;  // \d \w \s: Python reads them as Unicode classes
    while (true) {
      if (!More()) return Err("unterminated class");
      uint32_t c = cps_[pos_++];
      if (c == ']') break;
      if (c == '[' && Peek() == ':') return Err("POSIX class");
      uint32_t lo = 0xFFFFFFFF;
      if (c == '\\') {
        const uint32_t e = Peek();
        CodeRanges part;
        RETURN_IF_ERROR(Escape(&part, /*in_class=*/true, &lo));
        if (e == 'd' || e == 'w' || e == 's') unicode_shorthand = true;
        if (lo == 0xFFFFFFFF) {
          r.insert(r.end(), part.begin(), part.end());
          continue;
        }
      } else {
        lo = c;
      }
      if (Peek() == '-' && Peek(1) != ']' && Peek(1) != 0xFFFFFFFF) {
        ++pos_;
        uint32_t hi = cps_[pos_++];
        if (hi == '\\') {
          CodeRanges part;
          hi = 0xFFFFFFFF;
          RETURN_IF_ERROR(Escape(&part, true, &hi));
          if (hi == 0xFFFFFFFF) return Err("class range ending in a class escape");
        }
        if (hi < lo) return Err("class range out of order");
        r.emplace_back(lo, hi);
      } else {
        r.emplace_back(lo, lo);
      }
    }
    r = Normalize(std::move(r));
    if (negate) {
      r = Complement(r);
      if (unicode_shorthand) r = Intersect(r, kAscii);
    }
    return SetNode(std::move(r));
  }

  std::vector<uint32_t> cps_;
  size_t pos_ = 0;
};

std::string Emit(const Node& n);

std::string Group(const Node& n) {
  std::string e = Emit(n);
  if (n.kind == Node::kAlt || n.kind == Node::kSeq || e.find('|') != std::string::npos ||
      e.find(' ') != std::string::npos) {
    return "(" + e + ")";
  }
  return e;
}

std::string Emit(const Node& n) {
  switch (n.kind) {
    case Node::kSet: {
      std::string e = JsonCharsExpr(n.set);
      return e.empty() ? "[^\\x00-\\U0010FFFF]" : e;  // an empty class matches nothing
    }
    case Node::kSeq: {
      if (n.kids.empty()) return "\"\"";
      std::string out;
      for (const Node& k : n.kids) out += (out.empty() ? "" : " ") + Group(k);
      return out;
    }
    case Node::kAlt: {
      std::string out;
      for (const Node& k : n.kids) out += (out.empty() ? "" : " | ") + Emit(k);
      return out;
    }
    case Node::kRepeat:
      if (n.max == 0) return "\"\"";
      return Group(n.kids[0]) + RepeatSuffix(n.min, n.max);
    case Node::kBol:
    case Node::kEol:
      break;
  }
  return "\"\"";
}

bool HasAnchor(const Node& n) {
  if (n.kind == Node::kBol || n.kind == Node::kEol) return true;
  for (const Node& k : n.kids) {
    if (HasAnchor(k)) return true;
  }
  return false;
}

// Narrows the one variable-count item of an anchored sequence of single characters so the
// length is within [min_len, max_len]. False if the sequence has another shape.
Result<bool> FitLength(Node* seq, int64_t min_len, int64_t max_len) {
  int64_t fixed = 0;
  Node* variable = nullptr;
  for (Node& k : seq->kids) {
    if (k.kind == Node::kSet) {
      ++fixed;
    } else if (k.kind == Node::kRepeat && k.kids[0].kind == Node::kSet) {
      if (k.min == k.max) {
        fixed += k.min;
      } else if (variable) {
        return false;
      } else {
        variable = &k;
      }
    } else {
      return false;
    }
  }
  if (!variable) return fixed >= min_len && (max_len < 0 || fixed <= max_len);
  int64_t lo = std::max(variable->min, min_len - fixed);
  int64_t hi = variable->max;
  if (max_len >= 0) hi = hi < 0 ? max_len - fixed : std::min(hi, max_len - fixed);
  if (lo < 0) lo = 0;
  if (hi >= 0 && lo > hi) return InvalidArgument("pattern and minLength/maxLength admit no string");
  variable->min = lo;
  variable->max = hi;
  return true;
}

// Shortest and longest match (-1 = unbounded).
int64_t MinLen(const Node& n) {
  switch (n.kind) {
    case Node::kSet:
      return 1;
    case Node::kSeq: {
      int64_t t = 0;
      for (const Node& k : n.kids) t += MinLen(k);
      return t;
    }
    case Node::kAlt: {
      int64_t m = -1;
      for (const Node& k : n.kids) m = m < 0 ? MinLen(k) : std::min(m, MinLen(k));
      return m < 0 ? 0 : m;
    }
    case Node::kRepeat:
      return n.min * MinLen(n.kids[0]);
    default:
      return 0;
  }
}

int64_t MaxLen(const Node& n) {
  switch (n.kind) {
    case Node::kSet:
      return 1;
    case Node::kSeq:
    case Node::kAlt: {
      int64_t t = 0;
      for (const Node& k : n.kids) {
        const int64_t m = MaxLen(k);
        if (m < 0) return -1;
        t = n.kind == Node::kSeq ? t + m : std::max(t, m);
      }
      return t;
    }
    case Node::kRepeat: {
      const int64_t m = MaxLen(n.kids[0]);
      if (m == 0) return 0;
      if (n.max < 0 || m < 0) return -1;
      return n.max * m;
    }
    default:
      return 0;
  }
}

// The longest match with every variable repetition at its minimum; collects those repetitions
// (not the ones nested inside them).
int64_t FixedMax(Node* n, std::vector<Node*>* vars) {
  switch (n->kind) {
    case Node::kSet:
      return 1;
    case Node::kSeq:
    case Node::kAlt: {
      int64_t t = 0;
      for (Node& k : n->kids) {
        const int64_t m = FixedMax(&k, vars);
        t = n->kind == Node::kSeq ? t + m : std::max(t, m);
      }
      return t;
    }
    case Node::kRepeat:
      if (n->min == n->max) return n->min * FixedMax(&n->kids[0], vars);
      vars->push_back(n);
      return n->min * MaxLen(n->kids[0]);  // -1 if unbounded: checked by the caller
    default:
      return 0;
  }
}

// Makes every match of the (anchored) sequence `seq` fit [min_len, max_len]: exactly where one
// repetition of single characters is variable, else by capping the variable repetitions so the
// longest match fits (tighter). Refuses where the shortest match is too short.
Status BoundLength(Node* seq, int64_t min_len, int64_t max_len) {
  ASSIGN_OR_RETURN(bool fitted, FitLength(seq, min_len, max_len));
  if (fitted) return OkStatus();
  if (MinLen(*seq) < min_len) {
    return InvalidArgument("pattern cannot be combined with minLength above its shortest match");
  }
  const int64_t longest = MaxLen(*seq);
  if (max_len < 0 || (longest >= 0 && longest <= max_len)) return OkStatus();
  std::vector<Node*> vars;
  const int64_t fixed = FixedMax(seq, &vars);
  if (fixed < 0 || fixed > max_len || vars.empty()) {
    return InvalidArgument("pattern cannot be combined with maxLength");
  }
  const int64_t allowance = (max_len - fixed) / static_cast<int64_t>(vars.size());
  for (Node* r : vars) {
    const int64_t w = MaxLen(r->kids[0]);
    if (w < 0) return InvalidArgument("pattern with nested unbounded repetitions and maxLength");
    if (w > 0) r->max = r->min + allowance / w;
  }
  const int64_t capped = MaxLen(*seq);
  if (capped < 0 || capped > max_len) {
    return InvalidArgument("pattern cannot be combined with maxLength");
  }
  return OkStatus();
}

}  // namespace

std::string JsonCharsExpr(const CodeRanges& set) {
  static const CodeRanges kRaw = {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0xD7FF}, {0xE000, kMaxCp}};
  const CodeRanges raw = Intersect(set, kRaw);
  std::vector<std::string> alts;
  if (raw.size() == 1 && raw[0].first == raw[0].second) {
    std::string s;
    tokenizer::AppendUtf8(raw[0].first, &s);
    alts.push_back(Literal(s));
  } else if (!raw.empty()) {
    std::string cls = "[";
    for (auto [a, b] : raw) {
      cls += ClassChar(a);
      if (b != a) cls += "-" + ClassChar(b);
    }
    alts.push_back(cls + "]");
  }
  if (Contains(set, '"')) alts.push_back(Literal("\\\""));
  if (Contains(set, '\\')) alts.push_back(Literal("\\\\"));
  const CodeRanges controls = Intersect(set, {{0, 0x1F}});
  if (controls == CodeRanges{{0, 0x1F}}) {
    alts.push_back("\"\\\\\" [bfnrt]");
    alts.push_back("\"\\\\u00\" [01] [0-9a-f]");
  } else {
    for (auto [a, b] : controls) {
      for (uint32_t c = a; c <= b; ++c) {
        static const char* kShort[] = {nullptr, nullptr, nullptr, nullptr, nullptr,
                                       nullptr, nullptr, nullptr, "\\b",   "\\t",
                                       "\\n",   nullptr, "\\f",   "\\r"};
        if (c < 14 && kShort[c]) {
          alts.push_back(Literal(kShort[c]));
        } else {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          alts.push_back(Literal(buf));
        }
      }
    }
  }
  if (alts.empty()) return "";
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

Result<std::string> RegexToJsonContent(std::string_view pattern, int64_t min_length,
                                       int64_t max_length, const std::string& char_rule) {
  Parser parser(pattern);
  ASSIGN_OR_RETURN(Node top, parser.Parse());
  std::vector<Node> branches;
  if (top.kind == Node::kAlt) {
    branches = std::move(top.kids);
  } else {
    branches.push_back(std::move(top));
  }
  const bool lengths = min_length > 0 || max_length >= 0;
  // Branches grouped by their unanchored sides (index: !bol * 2 + !eol), so that a search over
  // several branches runs one `char*` loop per side, not one per branch (the same language:
  // x* a y* | x* b y* = x* (a | b) y*).
  std::vector<std::string> groups[4];
  for (Node& b : branches) {
    if (b.kind != Node::kSeq) {
      Node seq;
      seq.kind = Node::kSeq;
      seq.kids.push_back(std::move(b));
      b = std::move(seq);
    }
    while (b.kids.size() == 1 && b.kids[0].kind == Node::kSeq) {  // "(^...$)"
      Node inner = std::move(b.kids[0]);
      b = std::move(inner);
    }
    bool bol = !b.kids.empty() && b.kids.front().kind == Node::kBol;
    if (bol) b.kids.erase(b.kids.begin());
    bool eol = !b.kids.empty() && b.kids.back().kind == Node::kEol;
    if (eol) b.kids.pop_back();
    if (HasAnchor(b)) {
      return InvalidArgument("regex feature not supported: '^' or '$' inside the pattern");
    }
    if (lengths) {
      // Only whole matches are generated (tighter than search), so the length is the match's.
      bol = eol = true;
      RETURN_IF_ERROR(BoundLength(&b, min_length, max_length));
    }
    groups[(bol ? 0 : 2) + (eol ? 0 : 1)].push_back(Emit(b));
  }
  std::vector<std::string> alts;
  for (int k = 0; k < 4; ++k) {
    if (groups[k].empty()) continue;
    std::string e = groups[k][0];
    if (groups[k].size() > 1) {
      e = "(";
      for (size_t i = 0; i < groups[k].size(); ++i) e += (i ? " | " : "") + groups[k][i];
      e += ")";
    }
    if (k & 2) e = char_rule + "* " + e;
    if (k & 1) e += " " + char_rule + "*";
    alts.push_back(std::move(e));
  }
  if (alts.size() == 1) return "(" + alts[0] + ")";
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

}  // namespace tachyon::grammar::schema_internal
