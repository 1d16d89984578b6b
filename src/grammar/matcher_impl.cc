#include "grammar/matcher_impl.h"

#include <algorithm>

#include "util/logging.h"

namespace tachyon::grammar {

Matcher::Matcher(std::shared_ptr<const GrammarImpl> grammar)
    : grammar_(std::move(grammar)), rec_(grammar_->grammar(), &arena_) {
  Step s;
  rec_.Start(&s.cfg);
  s.arena_size = arena_.size();
  s.ended = false;
  steps_.push_back(std::move(s));
}

void Matcher::FillNextTokenBitmask(std::span<uint32_t> bitmask) {
  const Vocabulary& vocab = grammar_->vocab();
  CHECK(bitmask.size() >= vocab.mask_words());
  std::fill(bitmask.begin(), bitmask.end(), 0u);
  const Step& cur = steps_.back();
  if (cur.ended) return;
  // Each head's chain of positions, sorted: with the root flag, the exact cache key.
  chains_.resize(cur.cfg.heads.size());
  for (size_t h = 0; h < cur.cfg.heads.size(); ++h) {
    chains_[h].clear();
    for (int32_t n = cur.cfg.heads[h]; n >= 0; n = arena_.node(n).parent) {
      chains_[h].push_back(arena_.node(n).pos);
    }
  }
  std::sort(chains_.begin(), chains_.end());
  key_.clear();
  key_.push_back(cur.cfg.accepting ? 'a' : 'n');
  for (const auto& c : chains_) {
    key_.append(reinterpret_cast<const char*>(c.data()), c.size() * 4);
    key_.append(4, '\xff');
  }
  if (auto cached = grammar_->CachedMask(key_)) {
    std::copy(cached->begin(), cached->end(), bitmask.begin());
    return;
  }
  ComputeMask(bitmask);
  grammar_->CacheMask(key_, std::make_shared<const std::vector<uint32_t>>(
                                bitmask.begin(), bitmask.begin() + vocab.mask_words()));
}

void Matcher::ComputeMask(std::span<uint32_t> bitmask) {
  const Vocabulary& vocab = grammar_->vocab();
  const size_t words = vocab.mask_words();
  uncertain_.clear();
  for (const auto& chain : chains_) {
    // A shallow truncation (shared by many contexts) when its uncertain set is small, else
    // the whole chain (exact).
    size_t depth = std::min(GrammarImpl::kShallowDepth, chain.size());
    prefix_.assign(chain.begin(), chain.begin() + depth);
    std::shared_ptr<const TokenClass> cls = grammar_->Class(prefix_, depth == chain.size());
    if (cls->uncertain.size() > GrammarImpl::kMaxUncertain && depth < chain.size()) {
      cls = grammar_->Class(chain, true);
    }
    if (!cls->accept_bits.empty()) {
      for (size_t w = 0; w < words; ++w) bitmask[w] |= cls->accept_bits[w];
    }
    for (int32_t t : cls->accept_list) bitmask[t >> 5] |= 1u << (t & 31);
    for (int32_t t : cls->uncertain) uncertain_.push_back(vocab.trie().rank(t));
  }
  std::sort(uncertain_.begin(), uncertain_.end());
  uncertain_.erase(std::unique(uncertain_.begin(), uncertain_.end()), uncertain_.end());
  CheckUncertain(uncertain_, bitmask);
  if (steps_.back().cfg.accepting) {
    for (int32_t t : vocab.eos_ids()) bitmask[t >> 5] |= 1u << (t & 31);
  }
}

void Matcher::CheckUncertain(const std::vector<int32_t>& ranks, std::span<uint32_t> bitmask) {
  if (ranks.empty()) return;
  const Vocabulary& vocab = grammar_->vocab();
  const size_t mark = arena_.size();
  // Tokens come in sorted-bytes order, so consecutive ones share prefixes: path_cfg_[k] is the
  // configuration after path_[0, k); every one of them has heads except possibly the last
  // (path_dead: nothing extends path_).
  path_.clear();
  if (path_cfg_.empty()) path_cfg_.resize(1);
  path_cfg_[0] = steps_.back().cfg;
  bool path_dead = false;
  for (int32_t r : ranks) {
    const int32_t t = vocab.trie().tokens()[r];
    if ((bitmask[t >> 5] >> (t & 31)) & 1u) continue;
    const std::string_view b = vocab.bytes(t);
    size_t l = 0;
    while (l < path_.size() && l < b.size() && path_[l] == b[l]) ++l;
    if (l == path_.size() && path_dead) {
      // Extends a prefix nothing can follow; equal to it, it is allowed where the root ends.
      if (b.size() == l && path_cfg_[l].accepting) bitmask[t >> 5] |= 1u << (t & 31);
      continue;
    }
    path_.resize(l);
    path_dead = false;
    bool ok = true;
    for (size_t j = l; j < b.size(); ++j) {
      if (path_cfg_.size() < j + 2) path_cfg_.resize(j + 2);
      rec_.Advance(path_cfg_[j], static_cast<uint8_t>(b[j]), &path_cfg_[j + 1]);
      path_.push_back(b[j]);
      if (path_cfg_[j + 1].heads.empty()) {
        path_dead = true;
        ok = j + 1 == b.size() && path_cfg_[j + 1].accepting;
        break;
      }
    }
    if (ok) bitmask[t >> 5] |= 1u << (t & 31);
  }
  arena_.Truncate(mark);
}

bool Matcher::AcceptToken(int32_t token) {
  const Vocabulary& vocab = grammar_->vocab();
  const Step& cur = steps_.back();
  if (cur.ended || token < 0 || token >= vocab.size()) return false;
  if (vocab.IsEos(token)) {
    if (!cur.cfg.accepting) return false;
    Step s;
    s.cfg.accepting = true;
    s.arena_size = arena_.size();
    s.ended = true;
    steps_.push_back(std::move(s));
    return true;
  }
  const std::string_view bytes = vocab.bytes(token);
  if (bytes.empty()) return false;
  const size_t mark = arena_.size();
  if (!rec_.AdvanceAll(cur.cfg, bytes, &a_, &b_)) {
    arena_.Truncate(mark);
    return false;
  }
  Step s;
  s.cfg = a_;
  s.arena_size = arena_.size();
  s.ended = false;
  steps_.push_back(std::move(s));
  return true;
}

void Matcher::Rollback(int n) {
  CHECK(n >= 0 && static_cast<size_t>(n) < steps_.size());
  steps_.resize(steps_.size() - n);
  arena_.Truncate(steps_.back().arena_size);
}

}  // namespace tachyon::grammar
