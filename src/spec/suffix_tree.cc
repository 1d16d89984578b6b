#include "spec/suffix_tree.h"

#include <algorithm>
#include <cassert>

namespace tachyon::spec {

SuffixTree::SuffixTree(int max_depth) : max_depth_(std::max(max_depth, 1)) {
  nodes_.emplace_back();  // the root: the empty string
}

int32_t SuffixTree::Child(int32_t parent, int32_t token) const {
  auto it = edges_.find(Key(parent, token));
  return it == edges_.end() ? kNone : it->second;
}

int32_t SuffixTree::CountChild(int32_t parent, int32_t token) {
  auto [it, inserted] = edges_.try_emplace(Key(parent, token), kNone);
  if (inserted) {
    int32_t id;
    if (!free_.empty()) {
      id = free_.back();
      free_.pop_back();
      nodes_[id] = Node{};
    } else {
      id = static_cast<int32_t>(nodes_.size());
      nodes_.emplace_back();
    }
    Node& n = nodes_[id];
    n.token = token;
    n.parent = parent;
    n.depth = nodes_[parent].depth + 1;
    n.next_sibling = nodes_[parent].first_child;
    nodes_[parent].first_child = id;
    it->second = id;
  }
  const int32_t id = it->second;
  ++nodes_[id].count;
  nodes_[id].stamp = clock_;
  ++nodes_[parent].child_total;
  return id;
}

void SuffixTree::Free(int32_t id) {
  Node& n = nodes_[id];
  assert(n.count == 0 && n.first_child == kNone);
  edges_.erase(Key(n.parent, n.token));
  int32_t* link = &nodes_[n.parent].first_child;
  while (*link != id) link = &nodes_[*link].next_sibling;
  *link = n.next_sibling;
  n = Node{};
  free_.push_back(id);
}

void SuffixTree::Extend(std::vector<int32_t>* active, int32_t token) {
  ++clock_;
  scratch_.clear();
  scratch_.push_back(CountChild(kRoot, token));
  for (int32_t a : *active) {
    if (nodes_[a].depth < max_depth_) scratch_.push_back(CountChild(a, token));
  }
  active->swap(scratch_);
}

void SuffixTree::Append(int32_t token) {
  Extend(&active_, token);
}

void SuffixTree::Insert(std::span<const int32_t> tokens) {
  std::vector<int32_t> active;
  for (int32_t t : tokens) Extend(&active, t);
}

void SuffixTree::Remove(std::span<const int32_t> tokens) {
  // Every occurrence Insert counted: the strings starting at i, up to D tokens long.
  std::vector<int32_t> path;
  for (size_t i = 0; i < tokens.size(); ++i) {
    path.clear();
    int32_t node = kRoot;
    const size_t end = std::min(tokens.size(), i + static_cast<size_t>(max_depth_));
    for (size_t j = i; j < end; ++j) {
      const int32_t child = Child(node, tokens[j]);
      assert(child != kNone);
      if (child == kNone) break;
      --nodes_[child].count;
      --nodes_[node].child_total;
      path.push_back(child);
      node = child;
    }
    // A string no longer occurring has no occurring extension either: free from the deepest.
    for (size_t j = path.size(); j-- > 0;) {
      if (nodes_[path[j]].count == 0) Free(path[j]);
    }
  }
}

int32_t SuffixTree::Find(std::span<const int32_t> pattern) const {
  if (pattern.size() > static_cast<size_t>(max_depth_)) return kNone;
  int32_t node = kRoot;
  for (int32_t t : pattern) {
    node = Child(node, t);
    if (node == kNone) return kNone;
  }
  return node;
}

double SuffixTree::Continue(int32_t node, int max_tokens, double min_prob,
                            std::vector<int32_t>* out, std::vector<double>* probs) const {
  double score = 0, prob = 1;
  for (int n = 0; n < max_tokens; ++n) {
    const Node& cur = nodes_[node];
    if (cur.child_total <= 0) break;
    int32_t best = kNone;
    for (int32_t c = cur.first_child; c != kNone; c = nodes_[c].next_sibling) {
      if (best == kNone || nodes_[c].count > nodes_[best].count ||
          (nodes_[c].count == nodes_[best].count && nodes_[c].stamp > nodes_[best].stamp)) {
        best = c;
      }
    }
    const double p = prob * nodes_[best].count / cur.child_total;
    if (p < min_prob) break;
    out->push_back(nodes_[best].token);
    if (probs) probs->push_back(p);
    score += p;
    prob = p;
    node = best;
  }
  return score;
}

}  // namespace tachyon::spec
