// The byte-level recognizer the matcher runs: a pushdown recognizer over a FlatGrammar whose
// stacks are hash-consed nodes in an arena, so a set of parses is a small set of node ids.
//
// A node (pos, parent, count) means "at element `pos` of some alternative; when that
// alternative ends, continue at node `parent`"; `count` is the finished iterations of a counted
// repetition (pos at a kRepeat element; 0 elsewhere), or one of the class-walk counts below. A
// configuration (Config) is the set of nodes sitting at byte-set elements (the heads) after every
// rule reference and every finished alternative has been followed (the closure), plus whether the
// root rule can end here. Rule references in tail position reuse their caller's continuation, so
// right recursion (x* lowered to R ::= x R | "") runs in constant stack depth. The closure visits
// each node once, so rules that can match the empty string terminate; left recursion is rejected at
// compile time (ir.h).
//
// Thread-safety: a Recognizer and its arena are one thread's scratch; the FlatGrammar is shared
// read-only.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "grammar/ir.h"

namespace tachyon::grammar {

// Parent sentinels: kRootNode is the root rule's caller (returning into it = the grammar may
// end); kBottomNode stands for an unknown caller (the per-position mask precomputation starts
// a rule frame there and records when an alternative returns into it).
inline constexpr int32_t kRootNode = -1;
inline constexpr int32_t kBottomNode = -2;

// Counts that token-class walks give a counted repetition whose bounds are out of reach within
// one token (compiled.h): kCountFarAbove = may always end and always iterate again;
// kCountFarBelow = may never end, always iterates again. Both stay constant. Never in a
// matcher's own stacks.
inline constexpr int32_t kCountFarAbove = -1;
inline constexpr int32_t kCountFarBelow = -2;

struct Config {
  std::vector<int32_t> heads;
  bool accepting = false;  // returned into kRootNode
  bool popped = false;     // returned into kBottomNode
  void Clear() {
    heads.clear();
    accepting = popped = false;
  }
  bool Dead() const { return heads.empty() && !accepting && !popped; }
};

class StackArena {
 public:
  struct Node {
    int32_t pos;
    int32_t parent;
    int32_t count;
  };
  int32_t Intern(int32_t pos, int32_t parent, int32_t count = 0);
  const Node& node(int32_t id) const { return nodes_[id]; }
  size_t size() const { return nodes_.size(); }
  // Forgets nodes [n, size()). REQUIRES: no live Config refers to them.
  void Truncate(size_t n);

 private:
  struct Key {
    uint64_t pos_parent;
    int32_t count;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return static_cast<size_t>(
          (k.pos_parent ^ (static_cast<uint64_t>(k.count) << 40)) * 0x9E3779B97F4A7C15ull >> 16);
    }
  };
  static Key MakeKey(int32_t pos, int32_t parent, int32_t count) {
    return {
        (static_cast<uint64_t>(static_cast<uint32_t>(pos)) << 32) | static_cast<uint32_t>(parent),
        count};
  }
  std::vector<Node> nodes_;
  std::unordered_map<Key, int32_t, KeyHash> index_;
};

class Recognizer {
 public:
  // Both must outlive the recognizer.
  Recognizer(const FlatGrammar& g, StackArena* arena) : g_(g), arena_(*arena) {}

  // The configuration before any byte.
  void Start(Config* out);
  // A frame at byte-set element `pos` with an unknown caller. REQUIRES: elems[pos] is kBytes.
  void StartAt(int32_t pos, Config* out);
  // The configuration where a parse continues at arena node `node` (its closure): what a
  // return into that node leads to.
  void StartFrom(int32_t node, Config* out);
  // *out = the configuration after `byte` from `in` (out != &in). `in.accepting/popped` are
  // not carried over: they describe the position before the byte.
  void Advance(const Config& in, uint8_t byte, Config* out);
  // Advances through `bytes`, using *tmp as scratch; returns false as soon as nothing is left
  // (no head; a finished root or frame with bytes still to come is dead too).
  bool AdvanceAll(const Config& in, std::string_view bytes, Config* out, Config* tmp);

  const FlatGrammar& grammar() const { return g_; }
  StackArena& arena() { return arena_; }

 private:
  void Push(int32_t id) {
    if (static_cast<size_t>(id) >= visited_.size()) visited_.resize(arena_.size() * 2 + 16, 0);
    if (visited_[id] == epoch_) return;
    visited_[id] = epoch_;
    work_.push_back(id);
  }
  void NextEpoch();
  void Closure(Config* out);

  const FlatGrammar& g_;
  StackArena& arena_;
  std::vector<uint32_t> visited_;
  uint32_t epoch_ = 0;
  std::vector<int32_t> work_;
};

}  // namespace tachyon::grammar
