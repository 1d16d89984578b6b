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
  positions_.clear();
  for (int32_t h : cur.cfg.heads) positions_.push_back(arena_.node(h).pos);
  std::sort(positions_.begin(), positions_.end());
  positions_.erase(std::unique(positions_.begin(), positions_.end()), positions_.end());
  const size_t words = vocab.mask_words();
  auto has = [&](int32_t t) { return (bitmask[t >> 5] >> (t & 31)) & 1u; };
  auto set = [&](int32_t t) { bitmask[t >> 5] |= 1u << (t & 31); };
  for (int32_t pos : positions_) {
    const TokenClass& cls = grammar_->Class(pos);
    if (!cls.accept_bits.empty()) {
      for (size_t w = 0; w < words; ++w) bitmask[w] |= cls.accept_bits[w];
    }
    for (int32_t t : cls.accept_list) set(t);
  }
  // Uncertain tokens: run them on the real stacks. A token checked and rejected stays unset;
  // `checked` keeps one that is uncertain at several positions from being run twice.
  const size_t mark = arena_.size();
  checked_.assign(words, 0u);
  for (int32_t pos : positions_) {
    for (int32_t t : grammar_->Class(pos).uncertain) {
      if (has(t) || ((checked_[t >> 5] >> (t & 31)) & 1u)) continue;
      checked_[t >> 5] |= 1u << (t & 31);
      if (rec_.AdvanceAll(cur.cfg, vocab.bytes(t), &a_, &b_)) set(t);
    }
  }
  arena_.Truncate(mark);
  if (cur.cfg.accepting) {
    for (int32_t t : vocab.eos_ids()) set(t);
  }
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
