#include "grammar/compiled.h"

#include "grammar/matcher_impl.h"
#include "grammar/recognizer.h"

namespace tachyon::grammar {

GrammarImpl::GrammarImpl(FlatGrammar g, std::shared_ptr<const Vocabulary> vocab)
    : g_(std::move(g)), vocab_(std::move(vocab)), slots_(new Slot[g_.elems.size()]) {}

std::unique_ptr<TokenMatcher> GrammarImpl::NewMatcher() const {
  return std::make_unique<Matcher>(shared_from_this());
}

const TokenClass& GrammarImpl::Class(int32_t pos) const {
  Slot& s = slots_[pos];
  std::call_once(s.once, [&] { s.cls = ComputeClass(pos); });
  return s.cls;
}

TokenClass GrammarImpl::ComputeClass(int32_t pos) const {
  const TokenTrie& trie = vocab_->trie();
  const auto& nodes = trie.nodes();
  const auto& toks = trie.tokens();
  StackArena arena;
  Recognizer rec(g_, &arena);
  std::vector<Config> states(2);
  std::vector<char> left(2, 0);
  rec.StartAt(pos, &states[0]);
  std::vector<int32_t> accepted;
  TokenClass cls;
  // Depth-first over the trie in preorder: states[d] is the configuration after the first d
  // bytes of the current branch; left[d] is true when a parse left the frame before byte d+1.
  size_t i = 1;
  while (i < nodes.size()) {
    const TokenTrie::Node& nd = nodes[i];
    const size_t d = nd.depth;
    if (states.size() <= d) {
      states.resize(d + 1);
      left.resize(d + 1, 0);
    }
    rec.Advance(states[d - 1], nd.byte, &states[d]);
    const Config& c = states[d];
    const bool alive = !c.heads.empty();
    const bool left_before = left[d - 1];
    if (alive || c.popped) {
      for (uint32_t t = nd.tok_begin; t < nd.own_end; ++t) accepted.push_back(toks[t]);
    } else if (left_before) {
      for (uint32_t t = nd.tok_begin; t < nd.own_end; ++t) cls.uncertain.push_back(toks[t]);
    }
    left[d] = left_before || c.popped;
    if (alive) {
      ++i;
      continue;
    }
    // Dead inside the frame: deeper tokens are uncertain if a parse left it, else rejected.
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
