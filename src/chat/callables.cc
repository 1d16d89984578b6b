#include "chat/callables.h"

#include "chat/builtins.h"
#include "chat/ops.h"

namespace tachyon::chat {

Result<Value> MacroObject::Call(Renderer& r, CallArgs& args) {
  Value caller;
  if (!is_caller_) {
    for (auto it = args.kw.begin(); it != args.kw.end(); ++it) {
      if (it->first == "caller") {
        caller = it->second;
        args.kw.erase(it);
        break;
      }
    }
  }
  return r.CallMacro(*stmt_, closure_.lock(), args, std::move(caller));
}

Value MacroObject::GetAttr(std::string_view name) const {
  if (name == "name") return Value(is_caller_ ? std::string("caller") : stmt_->text);
  if (name == "arguments") {
    std::vector<Value> names;
    for (const Param& p : stmt_->params) names.emplace_back(p.name);
    return Value::List(std::move(names), true);
  }
  return Object::GetAttr(name);
}

Result<Value> LoopObject::Call(Renderer& r, CallArgs& args) {
  if (!stmt_->recursive) {
    return InvalidArgument(
        "Tried to call non recursive loop. Maybe you forgot the 'recursive' "
        "modifier.");
  }
  if (args.pos.size() != 1 || !args.kw.empty()) {
    return InvalidArgument("loop() takes exactly one argument");
  }
  FramePtr frame = frame_.lock();
  if (!frame) return InvalidArgument("recursive loop called after its loop ended");
  return r.RunLoop(*stmt_, frame, args.pos[0], depth_ + 1);
}

Value LoopObject::GetAttr(std::string_view name) const {
  int64_t n = int64_t(items_.size());
  int64_t i = int64_t(index_);
  if (name == "index") return Value(i + 1);
  if (name == "index0") return Value(i);
  if (name == "revindex") return Value(n - i);
  if (name == "revindex0") return Value(n - i - 1);
  if (name == "first") return Value(i == 0);
  if (name == "last") return Value(i == n - 1);
  if (name == "length") return Value(n);
  if (name == "depth") return Value(int64_t(depth_));
  if (name == "depth0") return Value(int64_t(depth_ - 1));
  if (name == "previtem") {
    if (i == 0) return Value::MakeUndefined("there is no previous item");
    return items_[i - 1];
  }
  if (name == "nextitem") {
    if (i + 1 >= n) return Value::MakeUndefined("there is no next item");
    return items_[i + 1];
  }
  if (name == "cycle" || name == "changed") {
    auto self = std::const_pointer_cast<LoopObject>(shared_from_this());
    return Value(ObjectPtr(std::make_shared<LoopMethod>(self, name == "cycle")));
  }
  return Object::GetAttr(name);
}

Result<Value> LoopMethod::Call(Renderer& r, CallArgs& args) {
  if (is_cycle_) {
    if (args.pos.empty()) return InvalidArgument("no items for cycling given");
    return args.pos[loop_->index() % args.pos.size()];
  }
  Value current = Value::List(args.pos, true);
  if (Equals(current, loop_->last_changed())) return Value(false);
  loop_->last_changed() = std::move(current);
  return Value(true);
}

Result<Value> BoundMethod::Call(Renderer& r, CallArgs& args) {
  return CallMethod(r, receiver_, name_, args);
}

Value BindMethod(const Value& receiver, std::string_view name) {
  return Value(ObjectPtr(std::make_shared<BoundMethod>(receiver, std::string(name))));
}

}  // namespace tachyon::chat
