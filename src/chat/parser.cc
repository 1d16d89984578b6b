#include "chat/parser.h"

#include <algorithm>
#include <initializer_list>

#include "chat/lexer.h"

namespace tachyon::chat {
namespace {

constexpr int kMaxExprHeight = 400;

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : toks_(std::move(toks)) {}

  Result<Body> ParseBody(std::initializer_list<std::string_view> end_tags, std::string* matched);

 private:
  const Token& Cur() const { return toks_[i_]; }
  const Token& Peek(size_t n = 1) const { return toks_[std::min(i_ + n, toks_.size() - 1)]; }
  void Next() {
    if (i_ + 1 < toks_.size()) ++i_;
  }
  bool IsOp(std::string_view op) const {
    return Cur().type == TokenType::kOp && Cur().value == op;
  }
  bool IsName(std::string_view n) const {
    return Cur().type == TokenType::kName && Cur().value == n;
  }
  bool SkipOp(std::string_view op) {
    if (!IsOp(op)) return false;
    Next();
    return true;
  }
  bool SkipName(std::string_view n) {
    if (!IsName(n)) return false;
    Next();
    return true;
  }
  Status Error(const std::string& what) const {
    return InvalidArgument("line " + std::to_string(Cur().line) + ": " + what);
  }
  std::string Describe() const {
    switch (Cur().type) {
      case TokenType::kEof: return "end of template";
      case TokenType::kBlockEnd: return "end of statement block";
      case TokenType::kVarEnd: return "end of print statement";
      case TokenType::kText: return "template data";
      default: return "'" + Cur().value + "'";
    }
  }
  Status Expect(TokenType t, const char* what) {
    if (Cur().type != t) return Error(std::string("expected ") + what + ", got " + Describe());
    Next();
    return OkStatus();
  }
  Status ExpectOp(std::string_view op) {
    if (!SkipOp(op)) return Error("expected '" + std::string(op) + "', got " + Describe());
    return OkStatus();
  }
  Result<std::string> ExpectName() {
    if (Cur().type != TokenType::kName) return Error("expected a name, got " + Describe());
    std::string n = Cur().value;
    Next();
    return n;
  }
  ExprPtr New(ExprKind k) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = Cur().line;
    return e;
  }
  // Computes the node height from its children and enforces the limit.
  Result<ExprPtr> Seal(ExprPtr e) {
    int h = 0;
    if (e->target) h = std::max(h, e->target->height);
    for (const auto& a : e->args) {
      if (a) h = std::max(h, a->height);
    }
    for (const auto& [k, v] : e->kwargs) h = std::max(h, v->height);
    e->height = h + 1;
    if (e->height > kMaxExprHeight) return Error("expression nested too deeply");
    return e;
  }
  struct DepthGuard {
    explicit DepthGuard(int* d) : d_(d) { ++*d_; }
    ~DepthGuard() { --*d_; }
    int* d_;
  };

  Result<StmtPtr> ParseStatement();
  Result<StmtPtr> ParseFor();
  Result<StmtPtr> ParseIf();
  Result<StmtPtr> ParseSet();
  Result<StmtPtr> ParseMacro();
  Result<StmtPtr> ParseCallBlock();
  Result<StmtPtr> ParseFilterBlock();
  Result<StmtPtr> ParseWith();
  Status ParseParams(std::vector<Param>* params);

  Result<ExprPtr> ParseTuple(bool with_condexpr, bool names_only = false,
                             std::initializer_list<std::string_view> end_names = {});
  Result<ExprPtr> ParseExpression(bool with_condexpr = true);
  Result<ExprPtr> ParseCondExpr();
  Result<ExprPtr> ParseOr();
  Result<ExprPtr> ParseAnd();
  Result<ExprPtr> ParseNot();
  Result<ExprPtr> ParseCompare();
  Result<ExprPtr> ParseMath1();
  Result<ExprPtr> ParseConcat();
  Result<ExprPtr> ParseMath2();
  Result<ExprPtr> ParsePow();
  Result<ExprPtr> ParseUnary(bool with_filter);
  Result<ExprPtr> ParsePrimary();
  Result<ExprPtr> ParsePostfix(ExprPtr node);
  Result<ExprPtr> ParseFilterExpr(ExprPtr node);
  Result<ExprPtr> ParseFilter(ExprPtr node);
  Result<ExprPtr> ParseTest(ExprPtr node);
  Status ParseCallArgs(Expr* call);
  Result<ExprPtr> ParseSubscript(ExprPtr node);
  Result<ExprPtr> Binary(std::string op, ExprPtr a, ExprPtr b) {
    auto e = New(ExprKind::kBinary);
    e->name = std::move(op);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return Seal(std::move(e));
  }

  std::vector<Token> toks_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

Result<Body> Parser::ParseBody(std::initializer_list<std::string_view> end_tags,
                               std::string* matched) {
  DepthGuard guard(&depth_);
  if (depth_ > kMaxParseDepth) return Error("statements nested too deeply");
  Body body;
  while (true) {
    const Token& t = Cur();
    if (t.type == TokenType::kEof) {
      if (end_tags.size() == 0) return body;
      std::string tags;
      for (auto tag : end_tags) tags += (tags.empty() ? "'" : " or '") + std::string(tag) + "'";
      return Error("unexpected end of template, expected " + tags);
    }
    if (t.type == TokenType::kText) {
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::kText;
      s->line = t.line;
      s->text = t.value;
      body.push_back(std::move(s));
      Next();
      continue;
    }
    if (t.type == TokenType::kVarBegin) {
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::kOutput;
      s->line = t.line;
      Next();
      ASSIGN_OR_RETURN(s->expr, ParseTuple(true));
      RETURN_IF_ERROR(Expect(TokenType::kVarEnd, "'}}'"));
      body.push_back(std::move(s));
      continue;
    }
    if (t.type != TokenType::kBlockBegin) return Error("unexpected " + Describe());
    const Token& name = Peek();
    if (name.type == TokenType::kName &&
        std::find(end_tags.begin(), end_tags.end(), name.value) != end_tags.end()) {
      Next();
      *matched = name.value;
      Next();
      return body;
    }
    Next();
    ASSIGN_OR_RETURN(StmtPtr s, ParseStatement());
    body.push_back(std::move(s));
  }
}

Result<StmtPtr> Parser::ParseStatement() {
  if (Cur().type != TokenType::kName) return Error("expected a tag name, got " + Describe());
  std::string tag = Cur().value;
  int line = Cur().line;
  Next();
  Result<StmtPtr> r = Status();
  if (tag == "for") {
    r = ParseFor();
  } else if (tag == "if") {
    r = ParseIf();
  } else if (tag == "set") {
    r = ParseSet();
  } else if (tag == "macro") {
    r = ParseMacro();
  } else if (tag == "call") {
    r = ParseCallBlock();
  } else if (tag == "filter") {
    r = ParseFilterBlock();
  } else if (tag == "with") {
    r = ParseWith();
  } else if (tag == "generation") {
    auto s = std::make_unique<Stmt>();
    s->kind = StmtKind::kScope;
    RETURN_IF_ERROR(Expect(TokenType::kBlockEnd, "'%}'"));
    std::string m;
    ASSIGN_OR_RETURN(s->body, ParseBody({"endgeneration"}, &m));
    RETURN_IF_ERROR(Expect(TokenType::kBlockEnd, "'%}'"));
    r = std::move(s);
  } else if (tag == "break" || tag == "continue") {
    if (loop_depth_ == 0) return Error("'" + tag + "' outside of a loop");
    auto s = std::make_unique<Stmt>();
    s->kind = tag == "break" ? StmtKind::kBreak : StmtKind::kContinue;
    RETURN_IF_ERROR(Expect(TokenType::kBlockEnd, "'%}'"));
    r = std::move(s);
  } else if (tag == "include" || tag == "import" || tag == "from" || tag == "extends" ||
             tag == "block") {
    return InvalidArgument("line " + std::to_string(line) + ": tag '" + tag +
                           "' is not supported (templates cannot load other templates)");
  } else {
    return InvalidArgument("line " + std::to_string(line) + ": Encountered unknown tag '" + tag +
                           "'.");
  }
  if (r.ok()) r.value()->line = line;
  return r;
}

Result<StmtPtr> Parser::ParseFor() {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::kFor;
  ASSIGN_OR_RETURN(s->target, ParseTuple(false, true, {"in"}));
  if (!SkipName("in")) return Error("expected 'in', got " + Describe());
  ASSIGN_OR_RETURN(s->expr, ParseTuple(false, false, {"recursive", "if"}));
  if (SkipName("if")) {
    ASSIGN_OR_RETURN(s->cond, ParseExpression());
  }
  if (SkipName("recursive")) s->recursive = true;
  RETURN_IF_ERROR(Expect(TokenType::kBlockEnd, "'%}'"));
  std::string m;
  ++loop_depth_;
  auto body = ParseBody({"endfor", "else"}, &m);
  --loop_depth_;
  if (!body.ok()) return body.status();
  s->body = std::move(*body);
  if (m == "else") {
    RETURN_IF_ERROR(Expect(TokenType::kBlockEnd, "'%}'"));
    ASSIGN_OR_RETURN(s->else_body, ParseBody({"endfor"}, &m));
  }
  RETURN_IF_ERROR(Expect(TokenType::kBlockEnd, "'%}'"));
  return s;
}

Result<StmtPtr> Parser::ParseIf() {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::kIf;
  ExprPtr cond;
  ASSIGN_OR_RETURN(cond, ParseTuple(false));
  while (true) {
    RETURN_IF_ERROR(Expect(TokenType::kBlockEnd, "'%}'"));
    std::string m;
    ASSIGN_OR_RETURN(Body body, ParseBody({"elif", "else", "endif"}, &m));
    s->branches.emplace_back(std::move(cond), std::move(body));
    if (m == "elif") {
      ASSIGN_OR_RETURN(cond, ParseTuple(false));
      continue;
    }
    if (m == "else") {
      RETURN_IF_ERROR(Expect(TokenType::kBlockEnd, "'%}'"));
      ASSIGN_OR_RETURN(Body else_body, ParseBody({"endif"}, &m));
      s->branches.emplace_back(nullptr, std::move(else_body));
    }
    break;
  }
  RETURN_IF_ERROR(Expect(TokenType::kBlockEnd, "'%}'"));
  return s;
}

Result<StmtPtr> Parser::ParseSet() {
  auto s = std::make_unique<Stmt>();
  ASSIGN_OR_RETURN(std::string name, ExpectName());
  auto target = New(ExprKind::kName);
  target->name = name;
  if (SkipOp(".")) {
    auto attr = New(ExprKind::kGetattr);
    ASSIGN_OR_RETURN(attr->name, ExpectName());
    attr->target = std::move(target);
    target = std::move(attr);
  } else if (IsOp(",")) {
    auto tuple = New(ExprKind::kTuple);
    tuple->args.push_back(std::move(target));
    while (SkipOp(",")) {
      if (Cur().type != TokenType::kName) break;
      auto n = New(ExprKind::kName);
      ASSIGN_OR_RETURN(n->name, ExpectName());
      tuple->args.push_back(std::move(n));
    }
    target = std::move(tuple);
  }
  s->target = std::move(target);
  if (SkipOp("=")) {
    s->kind = StmtKind::kSet;
    ASSIGN_OR_RETURN(s->expr, ParseTuple(true));
    RETURN_IF_ERROR(Expect(TokenType::kBlockEnd, "'%}'"));
    return s;
  }
  if (s->target->kind != ExprKind::kName) return Error("expected '=' in set");
  s->kind = StmtKind::kSetBlock;
  if (IsOp("|")) {
    ExprPtr chain;
    while (IsOp("|")) {
      ASSIGN_OR_RETURN(chain, ParseFilter(std::move(chain)));
    }
    s->expr = std::move(chain);
  }
  RETURN_IF_ERROR(Expect(TokenType::kBlockEnd, "'%}'"));
  std::string m;
  ASSIGN_OR_RETURN(s->body, ParseBody({"endset"}, &m));
  RETURN_IF_ERROR(Expect(TokenType::kBlockEnd, "'%}'"));
  return s;
}

Status Parser::ParseParams(std::vector<Param>* params) {
  RETURN_IF_ERROR(ExpectOp("("));
  while (!IsOp(")")) {
    if (!params->empty()) RETURN_IF_ERROR(ExpectOp(","));
    if (IsOp(")")) break;
    Param p;
    ASSIGN_OR_RETURN(p.name, ExpectName());
    if (SkipOp("=")) {
      ASSIGN_OR_RETURN(p.default_value, ParseExpression());
    }
    params->push_back(std::move(p));
  }
  Next();
  return OkStatus();
}

Result<StmtPtr> Parser::ParseMacro() {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::kMacro;
  ASSIGN_OR_RETURN(s->text, ExpectName());
  RETURN_IF_ERROR(ParseParams(&s->params));
  RETURN_IF_ERROR(Expect(TokenType::kBlockEnd, "'%}'"));
  std::string m;
  int saved = loop_depth_;
  loop_depth_ = 0;
  auto body = ParseBody({"endmacro"}, &m);
  loop_depth_ = saved;
  if (!body.ok()) return body.status();
  s->body = std::move(*body);
  if (Cur().type == TokenType::kName) Next();  // {% endmacro name %}
  RETURN_IF_ERROR(Expect(TokenType::kBlockEnd, "'%}'"));
  return s;
}

Result<StmtPtr> Parser::ParseCallBlock() {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::kCallBlock;
  if (IsOp("(")) RETURN_IF_ERROR(ParseParams(&s->params));
  ASSIGN_OR_RETURN(s->expr, ParseExpression());
  if (s->expr->kind != ExprKind::kCall) return Error("expected a call in {% call %}");
  RETURN_IF_ERROR(Expect(TokenType::kBlockEnd, "'%}'"));
  std::string m;
  int saved = loop_depth_;
  loop_depth_ = 0;
  auto body = ParseBody({"endcall"}, &m);
  loop_depth_ = saved;
  if (!body.ok()) return body.status();
  s->body = std::move(*body);
  RETURN_IF_ERROR(Expect(TokenType::kBlockEnd, "'%}'"));
  return s;
}

Result<StmtPtr> Parser::ParseFilterBlock() {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::kFilterBlock;
  ExprPtr chain;
  ASSIGN_OR_RETURN(chain, ParseFilter(nullptr));
  while (IsOp("|")) {
    ASSIGN_OR_RETURN(chain, ParseFilter(std::move(chain)));
  }
  s->expr = std::move(chain);
  RETURN_IF_ERROR(Expect(TokenType::kBlockEnd, "'%}'"));
  std::string m;
  ASSIGN_OR_RETURN(s->body, ParseBody({"endfilter"}, &m));
  RETURN_IF_ERROR(Expect(TokenType::kBlockEnd, "'%}'"));
  return s;
}

Result<StmtPtr> Parser::ParseWith() {
  auto s = std::make_unique<Stmt>();
  s->kind = StmtKind::kWith;
  while (Cur().type != TokenType::kBlockEnd) {
    if (!s->params.empty()) RETURN_IF_ERROR(ExpectOp(","));
    Param p;
    ASSIGN_OR_RETURN(p.name, ExpectName());
    RETURN_IF_ERROR(ExpectOp("="));
    ASSIGN_OR_RETURN(p.default_value, ParseExpression());
    s->params.push_back(std::move(p));
  }
  Next();
  std::string m;
  ASSIGN_OR_RETURN(s->body, ParseBody({"endwith"}, &m));
  RETURN_IF_ERROR(Expect(TokenType::kBlockEnd, "'%}'"));
  return s;
}

// ---- expressions ----

Result<ExprPtr> Parser::ParseTuple(bool with_condexpr, bool names_only,
                                   std::initializer_list<std::string_view> end_names) {
  auto is_end = [&] {
    const Token& t = Cur();
    if (t.type == TokenType::kVarEnd || t.type == TokenType::kBlockEnd || IsOp(")")) return true;
    if (t.type == TokenType::kName) {
      for (auto n : end_names) {
        if (t.value == n) return true;
      }
    }
    return false;
  };
  auto parse_one = [&]() -> Result<ExprPtr> {
    if (names_only) {
      auto n = New(ExprKind::kName);
      ASSIGN_OR_RETURN(n->name, ExpectName());
      return n;
    }
    return ParseExpression(with_condexpr);
  };
  auto tuple = New(ExprKind::kTuple);
  bool is_tuple = false;
  while (true) {
    if (!tuple->args.empty()) RETURN_IF_ERROR(ExpectOp(","));
    if (is_end()) break;
    ASSIGN_OR_RETURN(ExprPtr e, parse_one());
    tuple->args.push_back(std::move(e));
    if (IsOp(",")) {
      is_tuple = true;
    } else {
      break;
    }
    if (tuple->args.size() > size_t(kMaxExprHeight)) return Error("tuple too long");
  }
  if (!is_tuple) {
    if (tuple->args.empty()) return Error("expected an expression, got " + Describe());
    return std::move(tuple->args[0]);
  }
  return Seal(std::move(tuple));
}

Result<ExprPtr> Parser::ParseExpression(bool with_condexpr) {
  return with_condexpr ? ParseCondExpr() : ParseOr();
}

Result<ExprPtr> Parser::ParseCondExpr() {
  DepthGuard guard(&depth_);
  if (depth_ > kMaxParseDepth) return Error("expression nested too deeply");
  ASSIGN_OR_RETURN(ExprPtr e, ParseOr());
  while (SkipName("if")) {
    auto c = New(ExprKind::kCondExpr);
    ASSIGN_OR_RETURN(ExprPtr cond, ParseOr());
    ExprPtr other;
    if (SkipName("else")) {
      ASSIGN_OR_RETURN(other, ParseCondExpr());
    }
    c->args.push_back(std::move(e));
    c->args.push_back(std::move(cond));
    c->args.push_back(std::move(other));
    ASSIGN_OR_RETURN(e, Seal(std::move(c)));
  }
  return e;
}

Result<ExprPtr> Parser::ParseOr() {
  ASSIGN_OR_RETURN(ExprPtr e, ParseAnd());
  while (SkipName("or")) {
    ASSIGN_OR_RETURN(ExprPtr r, ParseAnd());
    ASSIGN_OR_RETURN(e, Binary("or", std::move(e), std::move(r)));
  }
  return e;
}

Result<ExprPtr> Parser::ParseAnd() {
  ASSIGN_OR_RETURN(ExprPtr e, ParseNot());
  while (SkipName("and")) {
    ASSIGN_OR_RETURN(ExprPtr r, ParseNot());
    ASSIGN_OR_RETURN(e, Binary("and", std::move(e), std::move(r)));
  }
  return e;
}

Result<ExprPtr> Parser::ParseNot() {
  if (IsName("not")) {
    DepthGuard guard(&depth_);
    if (depth_ > kMaxParseDepth) return Error("expression nested too deeply");
    auto e = New(ExprKind::kUnary);
    Next();
    e->name = "not";
    ASSIGN_OR_RETURN(e->target, ParseNot());
    return Seal(std::move(e));
  }
  return ParseCompare();
}

Result<ExprPtr> Parser::ParseCompare() {
  ASSIGN_OR_RETURN(ExprPtr first, ParseMath1());
  ExprPtr cmp;
  while (true) {
    std::string op;
    const Token& t = Cur();
    if (t.type == TokenType::kOp &&
        (t.value == "==" || t.value == "!=" || t.value == "<" || t.value == "<=" ||
         t.value == ">" || t.value == ">=")) {
      op = t.value;
      Next();
    } else if (IsName("in")) {
      op = "in";
      Next();
    } else if (IsName("not") && Peek().type == TokenType::kName && Peek().value == "in") {
      op = "notin";
      Next();
      Next();
    } else {
      break;
    }
    if (!cmp) {
      cmp = New(ExprKind::kCompare);
      cmp->args.push_back(std::move(first));
    }
    ASSIGN_OR_RETURN(ExprPtr rhs, ParseMath1());
    cmp->ops.push_back(op);
    cmp->args.push_back(std::move(rhs));
    if (cmp->args.size() > size_t(kMaxExprHeight)) return Error("comparison chain too long");
  }
  if (!cmp) return first;
  return Seal(std::move(cmp));
}

Result<ExprPtr> Parser::ParseMath1() {
  ASSIGN_OR_RETURN(ExprPtr e, ParseConcat());
  while (IsOp("+") || IsOp("-")) {
    std::string op = Cur().value;
    Next();
    ASSIGN_OR_RETURN(ExprPtr r, ParseConcat());
    ASSIGN_OR_RETURN(e, Binary(op, std::move(e), std::move(r)));
  }
  return e;
}

Result<ExprPtr> Parser::ParseConcat() {
  ASSIGN_OR_RETURN(ExprPtr e, ParseMath2());
  while (SkipOp("~")) {
    ASSIGN_OR_RETURN(ExprPtr r, ParseMath2());
    ASSIGN_OR_RETURN(e, Binary("~", std::move(e), std::move(r)));
  }
  return e;
}

Result<ExprPtr> Parser::ParseMath2() {
  ASSIGN_OR_RETURN(ExprPtr e, ParsePow());
  while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
    std::string op = Cur().value;
    Next();
    ASSIGN_OR_RETURN(ExprPtr r, ParsePow());
    ASSIGN_OR_RETURN(e, Binary(op, std::move(e), std::move(r)));
  }
  return e;
}

Result<ExprPtr> Parser::ParsePow() {
  ASSIGN_OR_RETURN(ExprPtr e, ParseUnary(true));
  while (SkipOp("**")) {
    ASSIGN_OR_RETURN(ExprPtr r, ParseUnary(true));
    ASSIGN_OR_RETURN(e, Binary("**", std::move(e), std::move(r)));
  }
  return e;
}

Result<ExprPtr> Parser::ParseUnary(bool with_filter) {
  DepthGuard guard(&depth_);
  if (depth_ > kMaxParseDepth) return Error("expression nested too deeply");
  ExprPtr node;
  if (IsOp("-") || IsOp("+")) {
    auto e = New(ExprKind::kUnary);
    e->name = Cur().value;
    Next();
    ASSIGN_OR_RETURN(e->target, ParseUnary(false));
    ASSIGN_OR_RETURN(node, Seal(std::move(e)));
  } else {
    ASSIGN_OR_RETURN(node, ParsePrimary());
  }
  ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
  if (with_filter) {
    ASSIGN_OR_RETURN(node, ParseFilterExpr(std::move(node)));
  }
  return node;
}

Result<ExprPtr> Parser::ParsePrimary() {
  const Token& t = Cur();
  auto e = New(ExprKind::kConst);
  switch (t.type) {
    case TokenType::kName:
      if (t.value == "true" || t.value == "True") {
        e->value = Value(true);
      } else if (t.value == "false" || t.value == "False") {
        e->value = Value(false);
      } else if (t.value == "none" || t.value == "None") {
        e->value = Value::None();
      } else {
        e->kind = ExprKind::kName;
        e->name = t.value;
      }
      Next();
      return e;
    case TokenType::kString: {
      std::string s = t.value;
      Next();
      while (Cur().type == TokenType::kString) {
        s += Cur().value;
        Next();
      }
      e->value = Value(std::move(s));
      return e;
    }
    case TokenType::kInt:
      e->value = Value(t.int_value);
      Next();
      return e;
    case TokenType::kFloat:
      e->value = Value(t.float_value);
      Next();
      return e;
    case TokenType::kOp:
      if (t.value == "(") {
        Next();
        if (SkipOp(")")) {
          e->kind = ExprKind::kTuple;
          return e;
        }
        ASSIGN_OR_RETURN(ExprPtr inner, ParseTuple(true));
        RETURN_IF_ERROR(ExpectOp(")"));
        return inner;
      }
      if (t.value == "[" || t.value == "{") {
        bool is_dict = t.value == "{";
        e->kind = is_dict ? ExprKind::kDict : ExprKind::kList;
        const char* close = is_dict ? "}" : "]";
        Next();
        while (!IsOp(close)) {
          if (!e->args.empty()) RETURN_IF_ERROR(ExpectOp(","));
          if (IsOp(close)) break;
          ASSIGN_OR_RETURN(ExprPtr item, ParseExpression());
          e->args.push_back(std::move(item));
          if (is_dict) {
            RETURN_IF_ERROR(ExpectOp(":"));
            ASSIGN_OR_RETURN(ExprPtr val, ParseExpression());
            e->args.push_back(std::move(val));
          }
        }
        Next();
        return Seal(std::move(e));
      }
      break;
    default:
      break;
  }
  return Error("unexpected " + Describe());
}

Result<ExprPtr> Parser::ParsePostfix(ExprPtr node) {
  while (true) {
    if (IsOp(".")) {
      Next();
      if (Cur().type == TokenType::kName) {
        auto e = New(ExprKind::kGetattr);
        e->name = Cur().value;
        e->target = std::move(node);
        Next();
        ASSIGN_OR_RETURN(node, Seal(std::move(e)));
      } else if (Cur().type == TokenType::kInt) {
        auto e = New(ExprKind::kGetitem);
        auto idx = New(ExprKind::kConst);
        idx->value = Value(Cur().int_value);
        e->target = std::move(node);
        e->args.push_back(std::move(idx));
        Next();
        ASSIGN_OR_RETURN(node, Seal(std::move(e)));
      } else {
        return Error("expected an attribute name after '.', got " + Describe());
      }
    } else if (IsOp("[")) {
      ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
    } else if (IsOp("(")) {
      auto e = New(ExprKind::kCall);
      e->target = std::move(node);
      RETURN_IF_ERROR(ParseCallArgs(e.get()));
      ASSIGN_OR_RETURN(node, Seal(std::move(e)));
    } else {
      return node;
    }
  }
}

Result<ExprPtr> Parser::ParseSubscript(ExprPtr node) {
  Next();  // [
  ExprPtr parts[3];
  int n = 0;
  bool is_slice = false;
  while (true) {
    if (!IsOp(":") && !IsOp("]")) {
      ASSIGN_OR_RETURN(parts[n], ParseExpression());
    }
    if (IsOp(":")) {
      if (n == 2) return Error("invalid slice");
      is_slice = true;
      ++n;
      Next();
      continue;
    }
    break;
  }
  RETURN_IF_ERROR(ExpectOp("]"));
  auto e = New(is_slice ? ExprKind::kSlice : ExprKind::kGetitem);
  e->target = std::move(node);
  if (is_slice) {
    for (auto& p : parts) e->args.push_back(std::move(p));
  } else {
    if (!parts[0]) return Error("expected an index");
    e->args.push_back(std::move(parts[0]));
  }
  return Seal(std::move(e));
}

Status Parser::ParseCallArgs(Expr* call) {
  RETURN_IF_ERROR(ExpectOp("("));
  bool first = true;
  while (!IsOp(")")) {
    if (!first) RETURN_IF_ERROR(ExpectOp(","));
    first = false;
    if (IsOp(")")) break;
    if (IsOp("*") || IsOp("**")) return Error("*args / **kwargs in calls are not supported");
    if (Cur().type == TokenType::kName && Peek().type == TokenType::kOp && Peek().value == "=") {
      std::string key = Cur().value;
      Next();
      Next();
      ASSIGN_OR_RETURN(ExprPtr v, ParseExpression());
      call->kwargs.emplace_back(std::move(key), std::move(v));
    } else {
      if (!call->kwargs.empty()) return Error("positional argument follows keyword argument");
      ASSIGN_OR_RETURN(ExprPtr v, ParseExpression());
      call->args.push_back(std::move(v));
    }
    if (call->args.size() + call->kwargs.size() > 256) return Error("too many arguments");
  }
  Next();
  return OkStatus();
}

Result<ExprPtr> Parser::ParseFilterExpr(ExprPtr node) {
  while (true) {
    if (IsOp("|")) {
      ASSIGN_OR_RETURN(node, ParseFilter(std::move(node)));
    } else if (IsName("is")) {
      ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
    } else if (IsOp("(")) {
      auto e = New(ExprKind::kCall);
      e->target = std::move(node);
      RETURN_IF_ERROR(ParseCallArgs(e.get()));
      ASSIGN_OR_RETURN(node, Seal(std::move(e)));
    } else {
      return node;
    }
  }
}

Result<ExprPtr> Parser::ParseFilter(ExprPtr node) {
  if (node || IsOp("|")) RETURN_IF_ERROR(ExpectOp("|"));
  auto e = New(ExprKind::kFilter);
  ASSIGN_OR_RETURN(e->name, ExpectName());
  while (SkipOp(".")) {
    ASSIGN_OR_RETURN(std::string part, ExpectName());
    e->name += "." + part;
  }
  e->target = std::move(node);
  if (IsOp("(")) RETURN_IF_ERROR(ParseCallArgs(e.get()));
  return Seal(std::move(e));
}

Result<ExprPtr> Parser::ParseTest(ExprPtr node) {
  Next();  // is
  auto e = New(ExprKind::kTest);
  if (SkipName("not")) e->negated = true;
  ASSIGN_OR_RETURN(e->name, ExpectName());
  while (SkipOp(".")) {
    ASSIGN_OR_RETURN(std::string part, ExpectName());
    e->name += "." + part;
  }
  e->target = std::move(node);
  const Token& t = Cur();
  if (IsOp("(")) {
    RETURN_IF_ERROR(ParseCallArgs(e.get()));
  } else if ((t.type == TokenType::kName || t.type == TokenType::kString ||
              t.type == TokenType::kInt || t.type == TokenType::kFloat || IsOp("[") ||
              IsOp("{")) &&
             !IsName("else") && !IsName("or") && !IsName("and")) {
    if (IsName("is")) return Error("You cannot chain multiple tests with is");
    DepthGuard guard(&depth_);
    if (depth_ > kMaxParseDepth) return Error("expression nested too deeply");
    ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
    ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
    e->args.push_back(std::move(arg));
  }
  return Seal(std::move(e));
}

}  // namespace

Result<std::unique_ptr<Program>> ParseTemplate(std::string_view source) {
  ASSIGN_OR_RETURN(std::vector<Token> toks, Tokenize(source));
  Parser parser(std::move(toks));
  std::string m;
  ASSIGN_OR_RETURN(Body body, parser.ParseBody({}, &m));
  auto program = std::make_unique<Program>();
  program->source = std::string(source);
  program->body = std::move(body);
  return program;
}

}  // namespace tachyon::chat
