#include "grammar/matcher_impl.h"

#include <algorithm>
#include <bit>
#include <climits>

#include "grammar/length_limit.h"
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
  // Each head's chain of positions; in sorted order, with the root flag, the exact cache key.
  const size_t n_heads = cur.cfg.heads.size();
  chains_.resize(n_heads);
  order_.resize(n_heads);
  for (size_t h = 0; h < n_heads; ++h) {
    chains_[h].clear();
    for (int32_t n = cur.cfg.heads[h]; n >= 0; n = arena_.node(n).parent) {
      chains_[h].push_back({arena_.node(n).pos, arena_.node(n).count});
    }
    order_[h] = static_cast<int32_t>(h);
  }
  std::sort(order_.begin(), order_.end(),
            [&](int32_t a, int32_t b) { return chains_[a] < chains_[b]; });
  key_.clear();
  key_.push_back(cur.cfg.accepting ? 'a' : 'n');
  for (int32_t h : order_) {
    const auto& c = chains_[h];
    key_.append(reinterpret_cast<const char*>(c.data()), c.size() * sizeof(ChainEntry));
    key_.append(sizeof(ChainEntry), '\xff');
  }
  if (auto cached = grammar_->CachedMask(key_)) {
    std::copy(cached->begin(), cached->end(), bitmask.begin());
  } else {
    ComputeMask(bitmask);
    grammar_->CacheMask(key_, std::make_shared<const std::vector<uint32_t>>(
                                  bitmask.begin(), bitmask.begin() + vocab.mask_words()));
  }
  if (limit_step_ >= 0) ApplyTokenLimit(bitmask);
}

void Matcher::ApplyTokenLimit(std::span<uint32_t> bitmask) {
  const int64_t budget = limit_step_ - (static_cast<int64_t>(steps_.size()) - 1);
  if (budget <= 0) return;
  const LengthTables& lengths = grammar_->Lengths();
  const Config& cfg = steps_.back().cfg;
  // No configuration within reach is farther than the budget: nothing to leave out.
  if (budget - 1 >= lengths.Ceiling(cfg, arena_, &ceiling_chain_)) return;
  // Nor after a token of at most `fits` bytes (Growth), so only longer tokens are walked; the
  // walk's shortest length is rounded down to a power of two (a few walks per configuration).
  uint32_t min_len = 0;
  const int64_t slack = budget - 1 - lengths.MostHead(cfg, arena_);
  if (slack >= 0) {
    const int64_t growth = lengths.Growth();
    const int64_t fits = growth == 0 ? INT64_MAX : slack / growth;
    if (fits >= static_cast<int64_t>(grammar_->vocab().trie().max_depth())) return;
    if (fits > 0) min_len = std::bit_floor(static_cast<uint32_t>(fits));
  }
  std::shared_ptr<const LengthInfo> info = LengthInfoFor(min_len);
  ApplyLengthLimit(*info, budget, bitmask.data(), grammar_->vocab().mask_words());
}

std::shared_ptr<const LengthInfo> Matcher::LengthInfoFor(uint32_t min_len) {
  length_key_ = key_;
  length_key_.append(reinterpret_cast<const char*>(&min_len), sizeof(min_len));
  std::shared_ptr<const LengthInfo> info = grammar_->CachedLength(length_key_);
  if (info != nullptr) return info;
  const size_t mark = arena_.size();
  info = std::make_shared<const LengthInfo>(
      ComputeLengthInfo(grammar_->Lengths(), grammar_->vocab(), &rec_, steps_.back().cfg, min_len));
  arena_.Truncate(mark);
  grammar_->CacheLength(length_key_, info);
  return info;
}

void Matcher::ComputeMask(std::span<uint32_t> bitmask) {
  const Vocabulary& vocab = grammar_->vocab();
  const Step& cur = steps_.back();
  uncertain_.clear();
  for (size_t h = 0; h < chains_.size(); ++h) {
    const auto& chain = chains_[h];
    // A shallow truncation (shared by many contexts) unless it pops too many tokens, else the
    // whole chain (exact).
    size_t depth = std::min(GrammarImpl::kShallowDepth, chain.size());
    if (!AddHeadClasses(h, depth, bitmask) && depth < chain.size()) {
      AddHeadClasses(h, chain.size(), bitmask);
    }
  }
  std::sort(uncertain_.begin(), uncertain_.end());
  uncertain_.erase(std::unique(uncertain_.begin(), uncertain_.end()), uncertain_.end());
  CheckUncertain(uncertain_, bitmask);
  if (cur.cfg.accepting) {
    for (int32_t t : vocab.eos_ids()) bitmask[t >> 5] |= 1u << (t & 31);
  }
}

bool Matcher::AddHeadClasses(size_t h, size_t depth, std::span<uint32_t> bitmask) {
  const auto& chain = chains_[h];
  const bool exact = depth == chain.size();
  prefix_.assign(chain.begin(), chain.begin() + depth);
  int32_t near = INT32_MAX;
  const int32_t headroom = grammar_->NormalizeChain(&prefix_, false, &near);
  if (near == INT32_MAX) {
    std::shared_ptr<const TokenClass> cls = grammar_->Class(prefix_, exact);
    if (cls->too_many_pops && !exact) return false;
    AddClass(*cls, h, depth, headroom, INT32_MAX, bitmask);
    return true;
  }
  // A count near its max: tokens of at most `near` bytes are decided as if it were far (exact
  // for them), the longer ones by a class of the real counts that leaves the short ones out.
  std::shared_ptr<const TokenClass> part =
      grammar_->Class(prefix_, exact, static_cast<uint32_t>(near));
  far_prefix_.assign(chain.begin(), chain.begin() + depth);
  grammar_->NormalizeChain(&far_prefix_, true, nullptr);
  std::shared_ptr<const TokenClass> far = grammar_->Class(far_prefix_, exact);
  if ((part->too_many_pops || far->too_many_pops) && !exact) return false;
  AddClass(*part, h, depth, headroom, INT32_MAX, bitmask);
  prefix_.swap(far_prefix_);  // AddClass keys popped suffixes by prefix_
  AddClass(*far, h, depth, INT32_MAX, near, bitmask);
  return true;
}

void Matcher::AddClass(const TokenClass& cls, size_t h, size_t depth, int32_t headroom,
                       int32_t max_len, std::span<uint32_t> bitmask) {
  const Vocabulary& vocab = grammar_->vocab();
  const size_t words = vocab.mask_words();
  const auto& chain = chains_[h];
  // max_len < kLengthMasks: only tokens of at most max_len bytes count.
  const uint32_t* short_only =
      max_len < Vocabulary::kLengthMasks ? vocab.tokens_up_to(std::max(1, max_len)) : nullptr;
  auto set = [&](int32_t t) {
    if (short_only == nullptr || ((short_only[t >> 5] >> (t & 31)) & 1u)) {
      bitmask[t >> 5] |= 1u << (t & 31);
    }
  };
  if (!cls.accept_bits.empty()) {
    if (short_only == nullptr) {
      for (size_t w = 0; w < words; ++w) bitmask[w] |= cls.accept_bits[w];
    } else {
      for (size_t w = 0; w < words; ++w) bitmask[w] |= cls.accept_bits[w] & short_only[w];
    }
  }
  for (int32_t t : cls.accept_list) set(t);
  if (short_only == nullptr) {
    // (With short_only these are all longer than max_len.)
    for (const TokenClass::LongToken& lt : cls.long_accept) {
      if (lt.need <= static_cast<uint32_t>(headroom)) {
        set(lt.token);
      } else if (!lt.sure) {
        uncertain_.push_back(vocab.trie().rank(lt.token));
      }
    }
    for (int32_t t : cls.long_pops) uncertain_.push_back(vocab.trie().rank(t));
  }
  if (cls.pops.empty()) return;
  // The suffixes that the real caller of the truncated stack (the node `depth` links up from
  // the head) accepts.
  pop_key_.assign(reinterpret_cast<const char*>(prefix_.data()),
                  prefix_.size() * sizeof(ChainEntry));
  pop_key_.push_back(static_cast<char>(cls.min_len));
  pop_key_.push_back('|');
  pop_key_.append(reinterpret_cast<const char*>(chain.data() + depth),
                  (chain.size() - depth) * sizeof(ChainEntry));
  std::shared_ptr<const std::vector<int32_t>> ok = grammar_->CachedPops(pop_key_);
  if (ok == nullptr) {
    int32_t node = steps_.back().cfg.heads[h];
    for (size_t k = 0; k < depth; ++k) node = arena_.node(node).parent;
    const auto& pops = cls.pops;
    auto toks = std::make_shared<std::vector<int32_t>>();
    const size_t mark = arena_.size();
    rec_.StartFrom(node, &caller_cfg_);
    WalkSorted(
        caller_cfg_, pops.size(), [&](size_t i) -> std::string_view { return pops[i].suffix; },
        [](size_t) { return false; },
        [&](size_t i) { toks->insert(toks->end(), pops[i].tokens.begin(), pops[i].tokens.end()); });
    arena_.Truncate(mark);
    ok = toks;
    grammar_->CachePops(pop_key_, ok);
  }
  for (int32_t t : *ok) set(t);
}

template <typename Bytes, typename Skip, typename Accept>
void Matcher::WalkSorted(const Config& start, size_t n, Bytes bytes, Skip skip, Accept accept) {
  // Strings come in sorted order, so consecutive ones share prefixes: path_cfg_[k] is the
  // configuration after path_[0, k); every one of them has heads except possibly the last
  // (path_dead: nothing extends path_).
  path_.clear();
  if (path_cfg_.empty()) path_cfg_.resize(1);
  path_cfg_[0] = start;
  bool path_dead = start.heads.empty();
  for (size_t i = 0; i < n; ++i) {
    if (skip(i)) continue;
    const std::string_view b = bytes(i);
    size_t l = 0;
    while (l < path_.size() && l < b.size() && path_[l] == b[l]) ++l;
    if (l == path_.size() && path_dead) {
      // Extends a prefix nothing can follow; equal to it, it is allowed where the root ends.
      if (b.size() == l && path_cfg_[l].accepting) accept(i);
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
    if (ok) accept(i);
  }
}

void Matcher::CheckUncertain(const std::vector<int32_t>& ranks, std::span<uint32_t> bitmask) {
  if (ranks.empty()) return;
  const Vocabulary& vocab = grammar_->vocab();
  const auto& toks = vocab.trie().tokens();
  const size_t mark = arena_.size();
  WalkSorted(
      steps_.back().cfg, ranks.size(), [&](size_t i) { return vocab.bytes(toks[ranks[i]]); },
      [&](size_t i) {
        const int32_t t = toks[ranks[i]];
        return ((bitmask[t >> 5] >> (t & 31)) & 1u) != 0;
      },
      [&](size_t i) {
        const int32_t t = toks[ranks[i]];
        bitmask[t >> 5] |= 1u << (t & 31);
      });
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
