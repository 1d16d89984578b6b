// Expression parsing (Jinja precedence) and the ParseTemplate entry point.
#include "chat/parser_internal.h"

namespace tachyon::chat {
namespace parser_internal {

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
    if (t.type == TokenType::kOp && (t.value == "==" || t.value == "!=" || t.value == "<" ||
                                     t.value == "<=" || t.value == ">" || t.value == ">=")) {
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
              t.type == TokenType::kInt || t.type == TokenType::kFloat || IsOp("[") || IsOp("{")) &&
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

}  // namespace parser_internal

using parser_internal::Parser;

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
