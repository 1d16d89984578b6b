// The parsed form of a Jinja template: expression and statement nodes. Immutable after
// parsing; shared by concurrent renders.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/value.h"

namespace tachyon::chat {

enum class ExprKind : uint8_t {
  kConst,     // value
  kName,      // name
  kList,      // args = items
  kTuple,     // args = items
  kDict,      // args = key, value, key, value, ...
  kGetattr,   // target.name
  kGetitem,   // target[args[0]]
  kSlice,     // target[args[0]:args[1]:args[2]] (entries may be null)
  kCall,      // target(args, kwargs)
  kFilter,    // target | name(args, kwargs); target null inside {% filter %}
  kTest,      // target is [not] name(args, kwargs)
  kUnary,     // op target: "-", "+", "not"
  kBinary,    // args[0] op args[1]: + - * / // % ** ~ and or
  kCompare,   // args[0] ops[0] args[1] ops[1] args[2] ...: == != < <= > >= in notin
  kCondExpr,  // args[0] if args[1] else args[2] (args[2] may be null)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind = ExprKind::kConst;
  int line = 0;
  int height = 1;        // 1 + the tallest child (bounded by the parser)
  std::string name;      // name / attribute / filter / test / operator
  Value value;           // kConst
  bool negated = false;  // kTest: "is not"
  ExprPtr target;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // kCompare
};

enum class StmtKind : uint8_t {
  kText,         // text
  kOutput,       // {{ expr }}
  kIf,           // branches
  kFor,          // target in iter [if cond] [recursive]; body; else_body
  kSet,          // target = expr
  kSetBlock,     // {% set target [| filters] %}body{% endset %}; expr = filter chain or null
  kMacro,        // name(params) body
  kCallBlock,    // {% call(params) expr %}body
  kFilterBlock,  // expr = filter chain (innermost target null); body
  kWith,         // params (name = default expr) body
  kScope,        // body rendered as is ({% generation %})
  kBreak,
  kContinue,
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Param {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct Stmt {
  StmtKind kind = StmtKind::kText;
  int line = 0;
  std::string text;  // kText; macro name
  ExprPtr target;    // for / set target
  ExprPtr expr;      // output / set value / for iterable / call expression / filter chain
  ExprPtr cond;      // for ... if cond
  bool recursive = false;
  std::vector<std::pair<ExprPtr, Body>> branches;  // kIf: (cond or null for else, body)
  Body body;
  Body else_body;
  std::vector<Param> params;  // macro / call-block / with
};

struct Program {
  std::string source;
  Body body;
};

}  // namespace tachyon::chat
