#include "grammar/compiled.h"

#include <algorithm>

#include "grammar/matcher_impl.h"
#include "grammar/recognizer.h"

namespace tachyon::grammar {
namespace {

// Configurations of one class walk, hash-consed, with their byte transitions memoized: most
// trie edges of a walk repeat a transition already seen (a string loop stays in one
// configuration), so the walk costs a table lookup per trie node.
class ConfigTable {
 public:
  explicit ConfigTable(Recognizer* rec) : rec_(*rec) {}

  int32_t Add(Config c) {
    std::sort(c.heads.begin(), c.heads.end());
    std::string key(reinterpret_cast<const char*>(c.heads.data()), c.heads.size() * 4);
    key.push_back(static_cast<char>(c.popped | (c.accepting << 1)));
    auto [it, inserted] = ids_.emplace(std::move(key), static_cast<int32_t>(configs_.size()));
    if (inserted) {
      flags_.push_back(static_cast<uint8_t>((c.heads.empty() ? 0 : kAlive) |
                                            (c.popped ? kPopped : 0) |
                                            (c.accepting ? kAccepting : 0)));
      configs_.push_back(std::move(c));
      trans_.resize(trans_.size() + 256, -1);
    }
    return it->second;
  }
  int32_t Next(int32_t id, uint8_t byte) {
    int32_t& t = trans_[static_cast<size_t>(id) * 256 + byte];
    if (t >= 0) return t;
    rec_.Advance(configs_[id], byte, &tmp_);
    const int32_t next = Add(tmp_);
    trans_[static_cast<size_t>(id) * 256 + byte] = next;
    return next;
  }
  static constexpr uint8_t kAlive = 1, kPopped = 2, kAccepting = 4;
  uint8_t flags(int32_t id) const { return flags_[id]; }

 private:
  std::vector<uint8_t> flags_;
  Recognizer& rec_;
  std::vector<Config> configs_;
  std::vector<int32_t> trans_;
  std::unordered_map<std::string, int32_t> ids_;
  Config tmp_;
};

}  // namespace

GrammarImpl::GrammarImpl(FlatGrammar g, std::shared_ptr<const Vocabulary> vocab)
    : g_(std::move(g)), vocab_(std::move(vocab)) {}

std::unique_ptr<TokenMatcher> GrammarImpl::NewMatcher() const {
  return std::make_unique<Matcher>(shared_from_this());
}

std::shared_ptr<const TokenClass> GrammarImpl::Class(const std::vector<int32_t>& chain,
                                                     bool exact) const {
  std::string key(reinterpret_cast<const char*>(chain.data()), chain.size() * 4);
  key.push_back(exact ? 'r' : 'b');
  {
    std::lock_guard<std::mutex> lock(class_mu_);
    if (auto it = classes_.find(key); it != classes_.end()) return it->second;
  }
  auto cls = std::make_shared<const TokenClass>(ComputeClass(chain, exact));
  const size_t bytes =
      key.size() + 4 * (cls->accept_bits.size() + cls->accept_list.size() + cls->uncertain.size());
  std::lock_guard<std::mutex> lock(class_mu_);
  if (class_bytes_ + bytes > kClassCacheBytes) {
    classes_.clear();
    class_bytes_ = 0;
  }
  auto [it, inserted] = classes_.emplace(std::move(key), cls);
  if (inserted) class_bytes_ += bytes;
  return it->second;
}

std::shared_ptr<const std::vector<uint32_t>> GrammarImpl::CachedMask(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mask_mu_);
  auto it = masks_.find(key);
  return it == masks_.end() ? nullptr : it->second;
}

void GrammarImpl::CacheMask(const std::string& key,
                            std::shared_ptr<const std::vector<uint32_t>> mask) const {
  std::lock_guard<std::mutex> lock(mask_mu_);
  const size_t bytes = mask->size() * 4 + key.size();
  if (mask_bytes_ + bytes > kMaskCacheBytes) {
    masks_.clear();
    mask_bytes_ = 0;
  }
  if (masks_.emplace(key, std::move(mask)).second) mask_bytes_ += bytes;
}

TokenClass GrammarImpl::ComputeClass(const std::vector<int32_t>& chain, bool exact) const {
  const TokenTrie& trie = vocab_->trie();
  const auto& nodes = trie.nodes();
  const auto& toks = trie.tokens();
  StackArena arena;
  Recognizer rec(g_, &arena);
  ConfigTable table(&rec);
  int32_t head = exact ? kRootNode : kBottomNode;
  for (size_t k = chain.size(); k-- > 0;) head = arena.Intern(chain[k], head);
  Config start;
  start.heads.push_back(head);
  std::vector<int32_t> states = {table.Add(std::move(start))};
  std::vector<char> left = {0};
  std::vector<int32_t> accepted;
  TokenClass cls;
  // Depth-first over the trie in preorder: states[d] is the configuration after the first d
  // bytes of the current branch; left[d]: a parse returned into the unknown caller before all
  // of them were consumed.
  size_t i = 1;
  while (i < nodes.size()) {
    const TokenTrie::Node& nd = nodes[i];
    const size_t d = nd.depth;
    if (states.size() <= d) {
      states.resize(d + 1);
      left.resize(d + 1, 0);
    }
    states[d] = table.Next(states[d - 1], nd.byte);
    const uint8_t f = table.flags(states[d]);
    const bool alive = f & ConfigTable::kAlive;
    const bool popped = f & ConfigTable::kPopped;
    const bool left_before = left[d - 1];
    if (f != 0) {
      for (uint32_t t = nd.tok_begin; t < nd.own_end; ++t) accepted.push_back(toks[t]);
    } else if (left_before) {
      for (uint32_t t = nd.tok_begin; t < nd.own_end; ++t) cls.uncertain.push_back(toks[t]);
    }
    left[d] = left_before || popped;
    if (alive) {
      ++i;
      continue;
    }
    // Nothing left inside the truncated stack: deeper tokens are uncertain if a parse left
    // it, else rejected.
    if (left[d]) {
      for (uint32_t t = nd.own_end; t < nd.sub_end; ++t) cls.uncertain.push_back(toks[t]);
    }
    i = nd.end;
  }
  const size_t words = vocab_->mask_words();
  if (accepted.size() >= words) {
    cls.accept_bits.assign(words, 0);
    for (int32_t t : accepted) cls.accept_bits[t >> 5] |= 1u << (t & 31);
  } else {
    cls.accept_list = std::move(accepted);
  }
  return cls;
}

}  // namespace tachyon::grammar
