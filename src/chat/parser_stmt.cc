// Statement parsing: bodies, for / if / set / macro / call / filter / with / generation.
#include "chat/parser_internal.h"

namespace tachyon::chat::parser_internal {

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

}  // namespace tachyon::chat::parser_internal
