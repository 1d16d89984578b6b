// The Jinja evaluator: renders a Program with a context of variables. One Renderer per
// render call (not thread-safe; the Program it reads is shared and immutable).
//
// Scoping follows Jinja: a for-loop iteration, a macro call and a {% with %} block each get
// a child frame, so `set` inside them does not leak out (use a namespace for that); `if`
// shares its enclosing frame.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/ast.h"
#include "chat/chat_template.h"
#include "chat/ops.h"
#include "chat/provenance.h"
#include "chat/value.h"

namespace tachyon::chat {

struct Frame {
  std::shared_ptr<Frame> parent;
  std::vector<std::pair<std::string, Value>> vars;
  const Value* Find(std::string_view name) const;
  void Set(std::string_view name, Value v);
};
using FramePtr = std::shared_ptr<Frame>;

class Renderer {
 public:
  Renderer(const Program& program, const RenderOptions& options);
  ~Renderer();

  // Renders the program with `context` (a dict value) as the top-level variables. The result
  // keeps the provenance of its bytes (see chat/provenance.h).
  Result<TrackedText> Render(const Value& context);

  // ---- used by builtins (filters, tests, globals, callables) ----
  const RenderOptions& options() const { return options_; }
  const SizeLimits& size_limits() const { return size_limits_; }
  Result<Value> ApplyFilter(std::string_view name, const Value& input, CallArgs& args);
  Result<bool> ApplyTest(std::string_view name, const Value& v, CallArgs& args);
  // Counts one unit of work (loop iteration, macro call); fails past max_steps.
  Status Step();
  // Registers a namespace so its contents are released when rendering ends (breaks cycles).
  void TrackNamespace(const DictPtr& ns) { namespaces_.push_back(ns); }
  // Calls a macro / caller body with bound arguments.
  Result<Value> CallMacro(const Stmt& macro, const FramePtr& closure, CallArgs& args, Value caller);
  // Renders one iteration set of a (recursive) for loop over `items` into a string.
  Result<Value> RunLoop(const Stmt& loop, const FramePtr& frame, const Value& iterable,
                              int depth);

 private:
  enum class Flow { kNone, kBreak, kContinue };

  Status ExecBody(const Body& body, const FramePtr& frame, TrackedText* out);
  Status Exec(const Stmt& s, const FramePtr& frame, TrackedText* out);
  Status ExecFor(const Stmt& s, const FramePtr& frame, const Value& iterable, int depth,
                 TrackedText* out);
  Status ExecSet(const Stmt& s, const FramePtr& frame);
  Status Assign(const Expr& target, Value v, const FramePtr& frame);
  Status Emit(const Value& v, TrackedText* out);
  Status Append(std::string_view s, TrackedText* out);

  Result<Value> Eval(const Expr& e, const FramePtr& frame);
  Result<Value> EvalName(const Expr& e, const FramePtr& frame);
  Result<Value> EvalCall(const Expr& e, const FramePtr& frame);
  Result<Value> EvalFilter(const Expr& e, const FramePtr& frame, Value input);
  Result<Value> EvalFilterChain(const Expr& e, const FramePtr& frame, Value input);
  Result<Value> EvalTest(const Expr& e, const FramePtr& frame);
  Result<Value> EvalCompare(const Expr& e, const FramePtr& frame);
  Status EvalArgs(const Expr& e, const FramePtr& frame, CallArgs* args);

  // Fails once the evaluator's recursion has used more than max_stack_bytes of stack.
  Status CheckStack() const;

  const Program& program_;
  const char* stack_base_ = nullptr;
  RenderOptions options_;
  SizeLimits size_limits_;
  FramePtr root_;
  Flow flow_ = Flow::kNone;
  int call_depth_ = 0;
  int64_t steps_ = 0;
  std::vector<DictPtr> namespaces_;
};

}  // namespace tachyon::chat
