// Callable objects of the interpreter: macros (and call-block callers), the for-loop
// `loop` object, built-in global functions and methods bound to a receiver.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "chat/ast.h"
#include "chat/evaluator.h"
#include "chat/value.h"

namespace tachyon::chat {

// A {% macro %} (or the body of a {% call %} block when is_caller). Holds its defining
// frame weakly so that a macro stored in that frame does not form a reference cycle.
class MacroObject : public Object {
 public:
  MacroObject(const Stmt* stmt, const FramePtr& closure, bool is_caller)
      : stmt_(stmt), closure_(closure), is_caller_(is_caller) {}
  std::string TypeName() const override { return "Macro"; }
  std::string Repr() const override {
    return "<Macro '" + (is_caller_ ? std::string("caller") : stmt_->text) + "'>";
  }
  Result<Value> Call(Renderer& r, CallArgs& args) override;
  Value GetAttr(std::string_view name) const override;

 private:
  const Stmt* stmt_;
  std::weak_ptr<Frame> closure_;
  bool is_caller_;
};

// Jinja's LoopContext: index, index0, revindex, revindex0, first, last, length, depth,
// depth0, previtem, nextitem, cycle(...), changed(...), and loop(items) for recursive loops.
class LoopObject : public Object, public std::enable_shared_from_this<LoopObject> {
 public:
  LoopObject(std::vector<Value> items, int depth, const Stmt* stmt, const FramePtr& frame)
      : items_(std::move(items)), depth_(depth), stmt_(stmt), frame_(frame) {}
  std::string TypeName() const override { return "LoopContext"; }
  Result<Value> Call(Renderer& r, CallArgs& args) override;
  Value GetAttr(std::string_view name) const override;

  const std::vector<Value>& items() const { return items_; }
  void set_index(size_t i) { index_ = i; }
  size_t index() const { return index_; }
  Value& last_changed() { return last_changed_; }

 private:
  std::vector<Value> items_;
  size_t index_ = 0;
  int depth_;
  const Stmt* stmt_;
  std::weak_ptr<Frame> frame_;
  Value last_changed_;
};

// A global function such as range() or namespace().
class BuiltinFunction : public Object {
 public:
  using Fn = Result<Value> (*)(Renderer& r, CallArgs& args);
  BuiltinFunction(std::string name, Fn fn) : name_(std::move(name)), fn_(fn) {}
  std::string TypeName() const override { return "builtin_function_or_method"; }
  std::string Repr() const override { return "<built-in function " + name_ + ">"; }
  Result<Value> Call(Renderer& r, CallArgs& args) override { return fn_(r, args); }

 private:
  std::string name_;
  Fn fn_;
};

// receiver.name as a value, e.g. `{% set f = s.upper %}`.
class BoundMethod : public Object {
 public:
  BoundMethod(Value receiver, std::string name)
      : receiver_(std::move(receiver)), name_(std::move(name)) {}
  std::string TypeName() const override { return "builtin_function_or_method"; }
  std::string Repr() const override { return "<built-in method " + name_ + ">"; }
  Result<Value> Call(Renderer& r, CallArgs& args) override;

 private:
  Value receiver_;
  std::string name_;
};

// A loop helper bound to its loop: loop.cycle / loop.changed.
class LoopMethod : public Object {
 public:
  LoopMethod(std::shared_ptr<LoopObject> loop, bool is_cycle)
      : loop_(std::move(loop)), is_cycle_(is_cycle) {}
  std::string TypeName() const override { return "method"; }
  Result<Value> Call(Renderer& r, CallArgs& args) override;

 private:
  std::shared_ptr<LoopObject> loop_;
  bool is_cycle_;
};

}  // namespace tachyon::chat
