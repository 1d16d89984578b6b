#include "chat/evaluator.h"

#include "chat/builtins.h"
#include "chat/callables.h"

namespace tachyon::chat {

const Value* Frame::Find(std::string_view name) const {
  for (const Frame* f = this; f; f = f->parent.get()) {
    for (const auto& [k, v] : f->vars) {
      if (k == name) return &v;
    }
  }
  return nullptr;
}

void Frame::Set(std::string_view name, Value v) {
  for (auto& [k, val] : vars) {
    if (k == name) {
      val = std::move(v);
      return;
    }
  }
  vars.emplace_back(std::string(name), std::move(v));
}

Renderer::Renderer(const Program& program, const RenderOptions& options)
    : program_(program), options_(options) {
  size_limits_.max_string_bytes = options_.limits.max_output_bytes;
  size_limits_.max_list_items = options_.limits.max_list_items;
}

Renderer::~Renderer() {
  // Namespaces may reference each other (or themselves); clear them to break cycles.
  for (const DictPtr& ns : namespaces_) ns->items.clear();
  if (root_) root_->vars.clear();
}

Status Renderer::CheckStack() const {
  const char* here = static_cast<const char*>(__builtin_frame_address(0));
  if (stack_base_ && stack_base_ > here &&
      size_t(stack_base_ - here) > options_.limits.max_stack_bytes) {
    return ResourceExhausted(
        "template nesting or recursion too deep (evaluation stack limit reached)");
  }
  return OkStatus();
}

Result<TrackedText> Renderer::Render(const Value& context) {
  stack_base_ = static_cast<const char*>(__builtin_frame_address(0));
  root_ = std::make_shared<Frame>();
  if (context.IsDict()) {
    for (const auto& [k, v] : context.dict().items) {
      if (k.IsString()) root_->Set(k.str(), v);
    }
  }
  TrackedText out;
  RETURN_IF_ERROR(ExecBody(program_.body, root_, &out));
  return out;
}

Status Renderer::Step() {
  if (++steps_ > options_.limits.max_steps) {
    return ResourceExhausted("template exceeded the limit of " +
                             std::to_string(options_.limits.max_steps) +
                             " loop iterations and macro calls");
  }
  return OkStatus();
}

Status Renderer::Append(std::string_view s, TrackedText* out) {
  if (out->size() + s.size() > options_.limits.max_output_bytes) {
    return ResourceExhausted("template output exceeds the limit of " +
                             std::to_string(options_.limits.max_output_bytes) + " bytes");
  }
  out->Append(s);
  return OkStatus();
}

Status Renderer::Emit(const Value& v, TrackedText* out) {
  return AppendStr(v, out, options_.limits.max_output_bytes);
}

Status Renderer::ExecBody(const Body& body, const FramePtr& frame, TrackedText* out) {
  RETURN_IF_ERROR(CheckStack());
  for (const StmtPtr& s : body) {
    RETURN_IF_ERROR(Exec(*s, frame, out));
    if (flow_ != Flow::kNone) break;
  }
  return OkStatus();
}

Status Renderer::Exec(const Stmt& s, const FramePtr& frame, TrackedText* out) {
  switch (s.kind) {
    case StmtKind::kText:
      return Append(s.text, out);
    case StmtKind::kOutput: {
      ASSIGN_OR_RETURN(Value v, Eval(*s.expr, frame));
      return Emit(v, out);
    }
    case StmtKind::kIf:
      for (const auto& [cond, body] : s.branches) {
        bool take = true;
        if (cond) {
          ASSIGN_OR_RETURN(Value c, Eval(*cond, frame));
          take = c.Truthy();
        }
        if (take) return ExecBody(body, frame, out);
      }
      return OkStatus();
    case StmtKind::kFor: {
      ASSIGN_OR_RETURN(Value iterable, Eval(*s.expr, frame));
      return ExecFor(s, frame, iterable, 1, out);
    }
    case StmtKind::kSet:
      return ExecSet(s, frame);
    case StmtKind::kSetBlock: {
      auto inner = std::make_shared<Frame>();
      inner->parent = frame;
      TrackedText text;
      RETURN_IF_ERROR(ExecBody(s.body, inner, &text));
      Value v = text.TakeValue();
      if (s.expr) {
        ASSIGN_OR_RETURN(v, EvalFilterChain(*s.expr, frame, std::move(v)));
      }
      return Assign(*s.target, std::move(v), frame);
    }
    case StmtKind::kMacro:
      frame->Set(s.text, Value(ObjectPtr(std::make_shared<MacroObject>(&s, frame, false))));
      return OkStatus();
    case StmtKind::kCallBlock: {
      const Expr& call = *s.expr;
      ASSIGN_OR_RETURN(Value callee, Eval(*call.target, frame));
      CallArgs args;
      RETURN_IF_ERROR(EvalArgs(call, frame, &args));
      args.kw.emplace_back("caller",
                           Value(ObjectPtr(std::make_shared<MacroObject>(&s, frame, true))));
      if (callee.IsUndefined()) return UndefinedError(callee);
      if (!callee.IsObject()) {
        return InvalidArgument("'" + callee.TypeName() + "' object is not callable");
      }
      ASSIGN_OR_RETURN(Value result, callee.object()->Call(*this, args));
      return Emit(result, out);
    }
    case StmtKind::kFilterBlock: {
      auto inner = std::make_shared<Frame>();
      inner->parent = frame;
      TrackedText text;
      RETURN_IF_ERROR(ExecBody(s.body, inner, &text));
      ASSIGN_OR_RETURN(Value v, EvalFilterChain(*s.expr, frame, text.TakeValue()));
      return Emit(v, out);
    }
    case StmtKind::kWith: {
      auto inner = std::make_shared<Frame>();
      inner->parent = frame;
      for (const Param& p : s.params) {
        ASSIGN_OR_RETURN(Value v, Eval(*p.default_value, frame));
        inner->Set(p.name, std::move(v));
      }
      return ExecBody(s.body, inner, out);
    }
    case StmtKind::kScope:
      return ExecBody(s.body, frame, out);
    case StmtKind::kBreak:
      flow_ = Flow::kBreak;
      return OkStatus();
    case StmtKind::kContinue:
      flow_ = Flow::kContinue;
      return OkStatus();
  }
  return OkStatus();
}

Status Renderer::ExecFor(const Stmt& s, const FramePtr& frame, const Value& iterable, int depth,
                         TrackedText* out) {
  ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(iterable));
  if (s.cond) {
    std::vector<Value> kept;
    for (Value& item : items) {
      RETURN_IF_ERROR(Step());
      auto probe = std::make_shared<Frame>();
      probe->parent = frame;
      RETURN_IF_ERROR(Assign(*s.target, item, probe));
      ASSIGN_OR_RETURN(Value c, Eval(*s.cond, probe));
      if (c.Truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) return ExecBody(s.else_body, frame, out);
  auto loop = std::make_shared<LoopObject>(std::move(items), depth, &s, frame);
  Value loop_value{ObjectPtr(loop)};
  for (size_t i = 0; i < loop->items().size(); ++i) {
    RETURN_IF_ERROR(Step());
    loop->set_index(i);
    auto inner = std::make_shared<Frame>();
    inner->parent = frame;
    RETURN_IF_ERROR(Assign(*s.target, loop->items()[i], inner));
    inner->Set("loop", loop_value);
    RETURN_IF_ERROR(ExecBody(s.body, inner, out));
    if (flow_ == Flow::kBreak) {
      flow_ = Flow::kNone;
      break;
    }
    flow_ = Flow::kNone;
  }
  return OkStatus();
}

Result<Value> Renderer::RunLoop(const Stmt& loop, const FramePtr& frame, const Value& iterable,
                                int depth) {
  if (++call_depth_ > options_.limits.max_call_depth) {
    --call_depth_;
    return ResourceExhausted("maximum recursion depth exceeded in recursive loop");
  }
  TrackedText out;
  Status st = ExecFor(loop, frame, iterable, depth, &out);
  --call_depth_;
  RETURN_IF_ERROR(st);
  return out.TakeValue();
}

Status Renderer::ExecSet(const Stmt& s, const FramePtr& frame) {
  ASSIGN_OR_RETURN(Value v, Eval(*s.expr, frame));
  return Assign(*s.target, std::move(v), frame);
}

Status Renderer::Assign(const Expr& target, Value v, const FramePtr& frame) {
  switch (target.kind) {
    case ExprKind::kName:
      frame->Set(target.name, std::move(v));
      return OkStatus();
    case ExprKind::kTuple: {
      ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
      if (v.IsUndefined()) return UndefinedError(v);
      if (items.size() != target.args.size()) {
        if (items.size() > target.args.size()) {
          return InvalidArgument("too many values to unpack (expected " +
                                 std::to_string(target.args.size()) + ")");
        }
        return InvalidArgument("not enough values to unpack (expected " +
                               std::to_string(target.args.size()) + ", got " +
                               std::to_string(items.size()) + ")");
      }
      for (size_t i = 0; i < items.size(); ++i) {
        RETURN_IF_ERROR(Assign(*target.args[i], std::move(items[i]), frame));
      }
      return OkStatus();
    }
    case ExprKind::kGetattr: {
      const Value* obj = frame->Find(target.target->name);
      if (!obj || !obj->IsNamespace()) {
        return InvalidArgument("cannot assign attribute on non-namespace object");
      }
      if (v.Depth() > kMaxValueDepth) {
        return ResourceExhausted("value nested deeper than " + std::to_string(kMaxValueDepth) +
                                 " levels");
      }
      obj->mutable_dict().Set(Value(target.name), std::move(v));
      return OkStatus();
    }
    default:
      return InvalidArgument("cannot assign to this expression");
  }
}

Result<Value> Renderer::CallMacro(const Stmt& macro, const FramePtr& closure, CallArgs& args,
                                  Value caller) {
  RETURN_IF_ERROR(Step());
  if (call_depth_ >= options_.limits.max_call_depth) {
    return ResourceExhausted("maximum recursion depth exceeded (" +
                             std::to_string(options_.limits.max_call_depth) +
                             " nested macro calls)");
  }
  auto frame = std::make_shared<Frame>();
  frame->parent = closure ? closure : root_;
  std::vector<bool> kw_used(args.kw.size(), false);
  for (size_t i = 0; i < macro.params.size(); ++i) {
    const Param& p = macro.params[i];
    Value v;
    bool found = false;
    if (i < args.pos.size()) {
      v = args.pos[i];
      found = true;
    }
    for (size_t k = 0; k < args.kw.size(); ++k) {
      if (args.kw[k].first == p.name) {
        if (found) {
          return InvalidArgument("macro '" + macro.text + "' got multiple values for argument '" +
                                 p.name + "'");
        }
        v = args.kw[k].second;
        kw_used[k] = true;
        found = true;
      }
    }
    if (!found) {
      if (p.default_value) {
        ASSIGN_OR_RETURN(v, Eval(*p.default_value, frame));
      } else {
        v = Value::MakeUndefined("parameter '" + p.name + "' was not provided");
      }
    }
    frame->Set(p.name, std::move(v));
  }
  std::vector<Value> varargs;
  for (size_t i = macro.params.size(); i < args.pos.size(); ++i) varargs.push_back(args.pos[i]);
  std::vector<std::pair<Value, Value>> kwargs;
  for (size_t k = 0; k < args.kw.size(); ++k) {
    if (!kw_used[k] && args.kw[k].first != "caller") {
      kwargs.emplace_back(Value(args.kw[k].first), args.kw[k].second);
    }
  }
  frame->Set("varargs", Value::List(std::move(varargs), /*is_tuple=*/true));
  frame->Set("kwargs", Value::Dict(std::move(kwargs)));
  if (!caller.IsUndefined()) frame->Set("caller", std::move(caller));
  ++call_depth_;
  TrackedText out;
  Status st = ExecBody(macro.body, frame, &out);
  --call_depth_;
  flow_ = Flow::kNone;
  RETURN_IF_ERROR(st);
  return out.TakeValue();
}

// ---- expressions ----

Result<Value> Renderer::Eval(const Expr& e, const FramePtr& frame) {
  if (e.height > 1) RETURN_IF_ERROR(CheckStack());
  switch (e.kind) {
    case ExprKind::kConst:
      return e.value;
    case ExprKind::kName:
      return EvalName(e, frame);
    case ExprKind::kList:
    case ExprKind::kTuple: {
      std::vector<Value> items;
      items.reserve(e.args.size());
      for (const ExprPtr& a : e.args) {
        ASSIGN_OR_RETURN(Value v, Eval(*a, frame));
        items.push_back(std::move(v));
      }
      Value list = Value::List(std::move(items), e.kind == ExprKind::kTuple);
      if (list.Depth() > kMaxValueDepth) return ResourceExhausted("value nested too deeply");
      return list;
    }
    case ExprKind::kDict: {
      Value d = Value::Dict();
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        ASSIGN_OR_RETURN(Value k, Eval(*e.args[i], frame));
        ASSIGN_OR_RETURN(Value v, Eval(*e.args[i + 1], frame));
        if ((k.IsList() && !k.IsTuple()) || k.IsDict() || k.IsUndefined()) {
          return InvalidArgument("unhashable type: '" + k.TypeName() + "'");
        }
        d.mutable_dict().Set(std::move(k), std::move(v));
      }
      if (d.Depth() > kMaxValueDepth) return ResourceExhausted("value nested too deeply");
      return d;
    }
    case ExprKind::kGetattr: {
      ASSIGN_OR_RETURN(Value obj, Eval(*e.target, frame));
      return GetAttr(obj, e.name);
    }
    case ExprKind::kGetitem: {
      ASSIGN_OR_RETURN(Value obj, Eval(*e.target, frame));
      ASSIGN_OR_RETURN(Value key, Eval(*e.args[0], frame));
      return GetItem(obj, key);
    }
    case ExprKind::kSlice: {
      ASSIGN_OR_RETURN(Value obj, Eval(*e.target, frame));
      Value bounds[3];
      for (int i = 0; i < 3; ++i) {
        if (e.args[i]) {
          ASSIGN_OR_RETURN(bounds[i], Eval(*e.args[i], frame));
        }
      }
      return Slice(obj, bounds[0], bounds[1], bounds[2]);
    }
    case ExprKind::kCall:
      return EvalCall(e, frame);
    case ExprKind::kFilter: {
      ASSIGN_OR_RETURN(Value input, Eval(*e.target, frame));
      return EvalFilter(e, frame, std::move(input));
    }
    case ExprKind::kTest:
      return EvalTest(e, frame);
    case ExprKind::kUnary: {
      ASSIGN_OR_RETURN(Value v, Eval(*e.target, frame));
      return UnaryOp(e.name, v);
    }
    case ExprKind::kBinary: {
      ASSIGN_OR_RETURN(Value a, Eval(*e.args[0], frame));
      if (e.name == "and") {
        if (!a.Truthy()) return a;
        return Eval(*e.args[1], frame);
      }
      if (e.name == "or") {
        if (a.Truthy()) return a;
        return Eval(*e.args[1], frame);
      }
      ASSIGN_OR_RETURN(Value b, Eval(*e.args[1], frame));
      return BinaryOp(e.name, a, b, size_limits_);
    }
    case ExprKind::kCompare:
      return EvalCompare(e, frame);
    case ExprKind::kCondExpr: {
      ASSIGN_OR_RETURN(Value c, Eval(*e.args[1], frame));
      if (c.Truthy()) return Eval(*e.args[0], frame);
      if (e.args[2]) return Eval(*e.args[2], frame);
      return Value::MakeUndefined("the inline if-expression on line " + std::to_string(e.line) +
                                  " evaluated to false and no else section was defined.");
    }
  }
  return Internal("unknown expression kind");
}

Result<Value> Renderer::EvalName(const Expr& e, const FramePtr& frame) {
  if (const Value* v = frame->Find(e.name)) return *v;
  Value g = FindGlobal(e.name);
  if (!g.IsUndefined()) return g;
  return Value::MakeUndefined("'" + e.name + "' is undefined");
}

Status Renderer::EvalArgs(const Expr& e, const FramePtr& frame, CallArgs* args) {
  args->pos.reserve(e.args.size());
  for (const ExprPtr& a : e.args) {
    ASSIGN_OR_RETURN(Value v, Eval(*a, frame));
    args->pos.push_back(std::move(v));
  }
  for (const auto& [k, a] : e.kwargs) {
    ASSIGN_OR_RETURN(Value v, Eval(*a, frame));
    args->kw.emplace_back(k, std::move(v));
  }
  return OkStatus();
}

Result<Value> Renderer::EvalCall(const Expr& e, const FramePtr& frame) {
  Value callee;
  if (e.target->kind == ExprKind::kGetattr) {
    ASSIGN_OR_RETURN(Value recv, Eval(*e.target->target, frame));
    if ((recv.IsString() || recv.IsList() || recv.IsDict()) && IsMethodName(recv, e.target->name)) {
      CallArgs args;
      RETURN_IF_ERROR(EvalArgs(e, frame, &args));
      return CallMethod(*this, recv, e.target->name, args);
    }
    ASSIGN_OR_RETURN(callee, GetAttr(recv, e.target->name));
  } else {
    ASSIGN_OR_RETURN(callee, Eval(*e.target, frame));
  }
  if (callee.IsUndefined()) return UndefinedError(callee);
  if (!callee.IsObject() || !callee.object()->IsCallable()) {
    return InvalidArgument("'" + callee.TypeName() + "' object is not callable");
  }
  CallArgs args;
  RETURN_IF_ERROR(EvalArgs(e, frame, &args));
  return callee.object()->Call(*this, args);
}

Result<Value> Renderer::EvalFilter(const Expr& e, const FramePtr& frame, Value input) {
  CallArgs args;
  RETURN_IF_ERROR(EvalArgs(e, frame, &args));
  return ApplyFilter(e.name, input, args);
}

Result<Value> Renderer::EvalFilterChain(const Expr& e, const FramePtr& frame, Value input) {
  // In {% filter a|b %} / {% set x | a | b %} the innermost filter's target is null.
  if (e.target) {
    ASSIGN_OR_RETURN(input, EvalFilterChain(*e.target, frame, std::move(input)));
  }
  return EvalFilter(e, frame, std::move(input));
}

Result<Value> Renderer::ApplyFilter(std::string_view name, const Value& input, CallArgs& args) {
  FilterFn fn = FindFilter(name);
  if (!fn) return InvalidArgument("No filter named '" + std::string(name) + "' found.");
  ASSIGN_OR_RETURN(Value out, fn(*this, input, args));
  if (!out.IsString() || out.client_spans() || FilterKeepsProvenance(name)) return out;
  bool client = HasClientText(input);
  for (const Value& a : args.pos) client = client || HasClientText(a);
  for (const auto& [k, a] : args.kw) client = client || HasClientText(a);
  return client ? MaybeClient(out.str(), true, out.IsMarkup()) : out;
}

Result<bool> Renderer::ApplyTest(std::string_view name, const Value& v, CallArgs& args) {
  TestFn fn = FindTest(name);
  if (!fn) return InvalidArgument("No test named '" + std::string(name) + "' found.");
  return fn(*this, v, args);
}

Result<Value> Renderer::EvalTest(const Expr& e, const FramePtr& frame) {
  ASSIGN_OR_RETURN(Value v, Eval(*e.target, frame));
  CallArgs args;
  RETURN_IF_ERROR(EvalArgs(e, frame, &args));
  ASSIGN_OR_RETURN(bool r, ApplyTest(e.name, v, args));
  return Value(r != e.negated);
}

Result<Value> Renderer::EvalCompare(const Expr& e, const FramePtr& frame) {
  ASSIGN_OR_RETURN(Value left, Eval(*e.args[0], frame));
  for (size_t i = 0; i < e.ops.size(); ++i) {
    ASSIGN_OR_RETURN(Value right, Eval(*e.args[i + 1], frame));
    const std::string& op = e.ops[i];
    bool r = false;
    if (op == "==") {
      r = Equals(left, right);
    } else if (op == "!=") {
      r = !Equals(left, right);
    } else if (op == "<") {
      ASSIGN_OR_RETURN(r, Less(left, right));
    } else if (op == ">") {
      ASSIGN_OR_RETURN(r, Less(right, left));
    } else if (op == "<=") {
      ASSIGN_OR_RETURN(bool gt, Less(right, left));
      r = !gt;
    } else if (op == ">=") {
      ASSIGN_OR_RETURN(bool lt, Less(left, right));
      r = !lt;
    } else if (op == "in" || op == "notin") {
      ASSIGN_OR_RETURN(r, Contains(right, left));
      if (op == "notin") r = !r;
    }
    if (!r) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

}  // namespace tachyon::chat
