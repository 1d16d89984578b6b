#include "grammar/recognizer.h"

#include <algorithm>
#include <string_view>

namespace tachyon::grammar {

int32_t StackArena::Intern(int32_t pos, int32_t parent, int32_t count) {
  auto [it, inserted] =
      index_.emplace(MakeKey(pos, parent, count), static_cast<int32_t>(nodes_.size()));
  if (inserted) nodes_.push_back({pos, parent, count});
  return it->second;
}

void StackArena::Truncate(size_t n) {
  while (nodes_.size() > n) {
    const Node& b = nodes_.back();
    index_.erase(MakeKey(b.pos, b.parent, b.count));
    nodes_.pop_back();
  }
}

void Recognizer::NextEpoch() {
  if (++epoch_ == 0) {
    std::fill(visited_.begin(), visited_.end(), 0);
    epoch_ = 1;
  }
}

void Recognizer::Closure(Config* out) {
  const auto& elems = g_.elems;
  while (!work_.empty()) {
    const int32_t id = work_.back();
    work_.pop_back();
    const StackArena::Node n = arena_.node(id);
    const FlatGrammar::Elem e = elems[n.pos];
    switch (e.kind) {
      case FlatGrammar::Kind::kBytes:
        out->heads.push_back(id);
        break;
      case FlatGrammar::Kind::kRule: {
        const int32_t cont = elems[n.pos + 1].kind == FlatGrammar::Kind::kEnd
                                 ? n.parent
                                 : arena_.Intern(n.pos + 1, n.parent);
        for (int32_t a = g_.rule_alts[e.arg]; a < g_.rule_alts[e.arg + 1]; ++a) {
          Push(arena_.Intern(g_.alt_start[a], cont));
        }
        break;
      }
      case FlatGrammar::Kind::kRepeat: {
        const FlatGrammar::Repeat& r = g_.repeats[e.arg];
        const int32_t c = n.count;
        const bool far = c == kCountFarAbove || c == kCountFarBelow;
        if (r.rule >= 0 && (far || r.max < 0 || c < r.max)) {
          const int32_t next = far ? c : r.max < 0 ? std::min(c + 1, r.min) : c + 1;
          const int32_t cont = arena_.Intern(n.pos, n.parent, next);
          for (int32_t a = g_.rule_alts[r.rule]; a < g_.rule_alts[r.rule + 1]; ++a) {
            Push(arena_.Intern(g_.alt_start[a], cont));
          }
        }
        // The element after kRepeat is its alternative's kEnd.
        if (c == kCountFarAbove || (c >= 0 && c >= r.min)) Push(arena_.Intern(n.pos + 1, n.parent));
        break;
      }
      case FlatGrammar::Kind::kEnd:
        if (n.parent == kRootNode) {
          out->accepting = true;
        } else if (n.parent == kBottomNode) {
          out->popped = true;
        } else {
          Push(n.parent);
        }
        break;
    }
  }
}

void Recognizer::Start(Config* out) {
  out->Clear();
  NextEpoch();
  for (int32_t a = g_.rule_alts[g_.root]; a < g_.rule_alts[g_.root + 1]; ++a) {
    Push(arena_.Intern(g_.alt_start[a], kRootNode));
  }
  Closure(out);
}

void Recognizer::StartAt(int32_t pos, Config* out) {
  out->Clear();
  out->heads.push_back(arena_.Intern(pos, kBottomNode));
}

void Recognizer::StartFrom(int32_t node, Config* out) {
  out->Clear();
  NextEpoch();
  Push(node);
  Closure(out);
}

void Recognizer::Advance(const Config& in, uint8_t byte, Config* out) {
  out->Clear();
  NextEpoch();
  for (int32_t h : in.heads) {
    const StackArena::Node n = arena_.node(h);
    if (g_.sets[g_.elems[n.pos].arg].Has(byte)) Push(arena_.Intern(n.pos + 1, n.parent));
  }
  Closure(out);
}

bool Recognizer::AdvanceAll(const Config& in, std::string_view bytes, Config* out, Config* tmp) {
  if (bytes.empty()) {
    *out = in;
    return !out->Dead();
  }
  const Config* cur = &in;
  for (size_t i = 0; i < bytes.size(); ++i) {
    // Alternate so that the last step writes *out.
    Config* dst = ((bytes.size() - i) % 2 == 1) ? out : tmp;
    Advance(*cur, static_cast<uint8_t>(bytes[i]), dst);
    if (dst->heads.empty() && (i + 1 < bytes.size() || !(dst->accepting || dst->popped))) {
      return false;
    }
    cur = dst;
  }
  return true;
}

}  // namespace tachyon::grammar
