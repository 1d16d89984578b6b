// Internal to the parser: the recursive-descent Parser class shared by parser.cc
// (expressions) and parser_stmt.cc (statements). Not a public API.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "chat/ast.h"
#include "chat/lexer.h"
#include "chat/parser.h"

namespace tachyon::chat::parser_internal {

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
  bool IsOp(std::string_view op) const { return Cur().type == TokenType::kOp && Cur().value == op; }
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
      case TokenType::kEof:
        return "end of template";
      case TokenType::kBlockEnd:
        return "end of statement block";
      case TokenType::kVarEnd:
        return "end of print statement";
      case TokenType::kText:
        return "template data";
      default:
        return "'" + Cur().value + "'";
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

}  // namespace tachyon::chat::parser_internal
