#include "grammar/compiled.h"

#include <algorithm>
#include <climits>

#include "grammar/length_limit.h"
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
      loop_yes_.resize(loop_yes_.size() + 4, 0);
      loop_no_.resize(loop_no_.size() + 4, 0);
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
  // Whether every byte of `set` (4 words) leads from configuration `id` back to itself.
  // Answers per byte are memoized.
  bool LoopsOn(int32_t id, const uint64_t* set) {
    const size_t base = 4 * static_cast<size_t>(id);
    for (int w = 0; w < 4; ++w) {
      if (set[w] & loop_no_[base + w]) return false;
    }
    for (int w = 0; w < 4; ++w) {
      for (uint64_t unknown = set[w] & ~loop_yes_[base + w]; unknown != 0; unknown &= unknown - 1) {
        const int bit = __builtin_ctzll(unknown);
        const bool loops = Next(id, static_cast<uint8_t>(w * 64 + bit)) == id;
        (loops ? loop_yes_ : loop_no_)[base + w] |= uint64_t{1} << bit;
        if (!loops) return false;
      }
    }
    return true;
  }
  static constexpr uint8_t kAlive = 1, kPopped = 2, kAccepting = 4;
  uint8_t flags(int32_t id) const { return flags_[id]; }
  const Config& config(int32_t id) const { return configs_[id]; }
  size_t size() const { return configs_.size(); }

 private:
  std::vector<uint8_t> flags_;
  Recognizer& rec_;
  std::vector<Config> configs_;
  std::vector<int32_t> trans_;
  std::vector<uint64_t> loop_yes_, loop_no_;  // per configuration: 4 words each
  std::unordered_map<std::string, int32_t> ids_;
  Config tmp_;
};

}  // namespace

struct GrammarImpl::WalkContext {
  explicit WalkContext(const FlatGrammar& g) : rec(g, &arena), table(&rec) {}
  StackArena arena;
  Recognizer rec;
  ConfigTable table;
};

struct GrammarImpl::SharedClasses {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<const TokenClass>> classes;  // GUARDED_BY(mu)
  size_t bytes = 0;                                                            // GUARDED_BY(mu)
};

GrammarImpl::GrammarImpl(FlatGrammar g, std::shared_ptr<const Vocabulary> vocab)
    : g_(std::move(g)),
      vocab_(std::move(vocab)),
      shared_(std::static_pointer_cast<SharedClasses>(vocab_->Shared(
          [] { return std::static_pointer_cast<void>(std::make_shared<SharedClasses>()); }))) {}

GrammarImpl::~GrammarImpl() = default;

std::unique_ptr<TokenMatcher> GrammarImpl::NewMatcher() const {
  return std::make_unique<Matcher>(shared_from_this());
}

int32_t GrammarImpl::NormalizeChain(std::vector<ChainEntry>* chain, bool force_far,
                                    int32_t* near) const {
  int32_t headroom = INT32_MAX;
  if (near != nullptr) *near = INT32_MAX;
  const auto longest = static_cast<int64_t>(vocab_->trie().max_depth());
  for (ChainEntry& e : *chain) {
    const FlatGrammar::Elem& el = g_.elems[e.pos];
    if (el.kind != FlatGrammar::Kind::kRepeat) continue;
    const FlatGrammar::Repeat& r = g_.repeats[el.arg];
    if (r.nullable || e.count < 0) continue;
    if (e.count >= r.min) {
      if (r.max < 0) {
        e.count = kCountFarAbove;
      } else if (r.max - e.count >= kFarHeadroom || (force_far && r.max > e.count)) {
        headroom = std::min(headroom, r.max - e.count);
        e.count = kCountFarAbove;
      } else if (near != nullptr && r.max > e.count) {
        *near = std::min(*near, r.max - e.count);
      }
    } else if (e.count + longest < r.min) {
      e.count = kCountFarBelow;
    }
  }
  return headroom;
}

namespace {

void AppendInt(int32_t v, std::string* out) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

size_t ClassBytes(const TokenClass& cls) {
  size_t bytes = 4 * (cls.accept_bits.size() + cls.accept_list.size() + 3 * cls.long_accept.size() +
                      cls.long_pops.size());
  for (const TokenClass::Pop& p : cls.pops) bytes += p.suffix.size() + 4 * p.tokens.size() + 32;
  return bytes;
}

}  // namespace

std::string GrammarImpl::FragmentKey(const std::vector<ChainEntry>& chain, bool exact,
                                     uint32_t min_len, bool relative_counts) const {
  // Rules get local numbers in the order they are first reached; each chain position is
  // written with its count and its alternative's elements from there to kEnd, then every
  // reached rule's alternatives. Two grammars with the same key walk the same classes.
  std::string key;
  key.push_back(exact ? 'r' : 'b');
  key.push_back(static_cast<char>(min_len));
  std::unordered_map<int32_t, int32_t> local;
  std::vector<int32_t> order;
  auto rule = [&](int32_t r) {
    if (r < 0) return int32_t{-1};
    auto [it, inserted] = local.emplace(r, static_cast<int32_t>(order.size()));
    if (inserted) order.push_back(r);
    return it->second;
  };
  auto elements = [&](int32_t pos) {
    for (;; ++pos) {
      const FlatGrammar::Elem& e = g_.elems[pos];
      key.push_back(static_cast<char>(e.kind));
      switch (e.kind) {
        case FlatGrammar::Kind::kBytes:
          key.append(reinterpret_cast<const char*>(g_.sets[e.arg].w), sizeof(ByteSet::w));
          break;
        case FlatGrammar::Kind::kRule:
          AppendInt(rule(e.arg), &key);
          break;
        case FlatGrammar::Kind::kRepeat: {
          const FlatGrammar::Repeat& r = g_.repeats[e.arg];
          AppendInt(rule(r.rule), &key);
          AppendInt(r.min, &key);
          AppendInt(r.max, &key);
          key.push_back(r.nullable ? 1 : 0);
          break;
        }
        case FlatGrammar::Kind::kEnd:
          return;
      }
    }
  };
  // A chain position at a counted repetition with a real count c is written as what its walk
  // depends on: the iterations still needed (min - c, at least 0) and still allowed (max - c),
  // so that one class serves every (count, bounds) pair with the same distances (a string
  // 3 characters from its maxLength, whatever the maxLength). Only while the repetition's rule
  // is not reached otherwise (a fresh instance would start at count 0 and need the bounds).
  std::vector<int32_t> relative;  // the repetition rules written so
  for (const ChainEntry& e : chain) {
    const FlatGrammar::Elem& el = g_.elems[e.pos];
    int32_t rep_rule = -1;
    if (relative_counts && el.kind == FlatGrammar::Kind::kRepeat && e.count >= 0) {
      const auto a = std::upper_bound(g_.alt_start.begin(), g_.alt_start.end(), e.pos) - 1 -
                     g_.alt_start.begin();
      if (a >= 0 && g_.alt_start[a] == e.pos) {
        rep_rule = static_cast<int32_t>(
            std::upper_bound(g_.rule_alts.begin(), g_.rule_alts.end(), static_cast<int32_t>(a)) -
            1 - g_.rule_alts.begin());
      }
    }
    if (rep_rule >= 0) {
      const FlatGrammar::Repeat& r = g_.repeats[el.arg];
      relative.push_back(rep_rule);
      key.push_back('c');
      AppendInt(std::max(0, r.min - e.count), &key);
      AppendInt(r.max < 0 ? -1 : r.max - e.count, &key);
      AppendInt(rule(r.rule), &key);
      key.push_back(r.nullable ? 1 : 0);
      elements(e.pos + 1);
    } else {
      AppendInt(e.count, &key);
      elements(e.pos);
    }
    if (key.size() > kMaxFragmentKey) return {};
  }
  for (size_t i = 0; i < order.size(); ++i) {
    const int32_t r = order[i];
    AppendInt(g_.rule_alts[r + 1] - g_.rule_alts[r], &key);
    for (int32_t a = g_.rule_alts[r]; a < g_.rule_alts[r + 1]; ++a) elements(g_.alt_start[a]);
    if (key.size() > kMaxFragmentKey) return {};
  }
  for (int32_t r : relative) {
    if (local.count(r) != 0) return FragmentKey(chain, exact, min_len, false);
  }
  return key;
}

std::shared_ptr<const TokenClass> GrammarImpl::Class(const std::vector<ChainEntry>& chain,
                                                     bool exact, uint32_t min_len) const {
  std::string key(reinterpret_cast<const char*>(chain.data()), chain.size() * sizeof(ChainEntry));
  key.push_back(exact ? 'r' : 'b');
  key.push_back(static_cast<char>(min_len));
  {
    std::lock_guard<std::mutex> lock(class_mu_);
    if (auto it = classes_.find(key); it != classes_.end()) return it->second;
  }
  std::string fragment = FragmentKey(chain, exact, min_len);
  std::shared_ptr<const TokenClass> cls;
  if (!fragment.empty()) {
    std::lock_guard<std::mutex> lock(shared_->mu);
    if (auto it = shared_->classes.find(fragment); it != shared_->classes.end()) cls = it->second;
  }
  if (cls == nullptr) {
    cls = std::make_shared<const TokenClass>(ComputeClass(chain, exact, min_len));
    if (!fragment.empty()) {
      const size_t bytes = fragment.size() + ClassBytes(*cls);
      std::lock_guard<std::mutex> lock(shared_->mu);
      if (shared_->bytes + bytes > kSharedClassBytes) {
        shared_->classes.clear();
        shared_->bytes = 0;
      }
      if (shared_->classes.emplace(std::move(fragment), cls).second) shared_->bytes += bytes;
    }
  }
  const size_t bytes = key.size() + ClassBytes(*cls);
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

const LengthTables& GrammarImpl::Lengths() const {
  std::call_once(lengths_once_, [this] {
    lengths_ = std::make_unique<LengthTables>(g_, *vocab_);
    StackArena arena;
    Recognizer rec(g_, &arena);
    Config start;
    rec.Start(&start);
    start_distance_ = lengths_->Distance(start, arena);
  });
  return *lengths_;
}

size_t GrammarImpl::MemoryBytes() const {
  size_t bytes = g_.elems.capacity() * sizeof(FlatGrammar::Elem) +
                 g_.repeats.capacity() * sizeof(FlatGrammar::Repeat) +
                 g_.sets.capacity() * sizeof(ByteSet) + g_.alt_start.capacity() * sizeof(int32_t) +
                 g_.rule_alts.capacity() * sizeof(int32_t);
  for (const std::string& n : g_.rule_names) bytes += sizeof(std::string) + n.capacity();
  {
    std::lock_guard<std::mutex> lock(class_mu_);
    bytes += class_bytes_;
  }
  {
    std::lock_guard<std::mutex> lock(mask_mu_);
    bytes += mask_bytes_ + pops_bytes_;
  }
  std::lock_guard<std::mutex> lock(length_mu_);
  return bytes + length_bytes_;
}

int64_t GrammarImpl::MinTokenLimit() const {
  Lengths();
  return start_distance_ >= kUnreachable ? kNoTokenLimit : start_distance_;
}

std::shared_ptr<const LengthInfo> GrammarImpl::CachedLength(const std::string& key) const {
  std::lock_guard<std::mutex> lock(length_mu_);
  auto it = length_infos_.find(key);
  return it == length_infos_.end() ? nullptr : it->second;
}

void GrammarImpl::CacheLength(const std::string& key,
                              std::shared_ptr<const LengthInfo> info) const {
  std::lock_guard<std::mutex> lock(length_mu_);
  const size_t bytes = 16 * (info->farther.size() + info->closer.size()) + key.size() + 64;
  if (length_bytes_ + bytes > kLengthCacheBytes) {
    length_infos_.clear();
    length_bytes_ = 0;
  }
  if (length_infos_.emplace(key, std::move(info)).second) length_bytes_ += bytes;
}

std::shared_ptr<const std::vector<int32_t>> GrammarImpl::CachedPops(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mask_mu_);
  auto it = pops_.find(key);
  return it == pops_.end() ? nullptr : it->second;
}

void GrammarImpl::CachePops(const std::string& key,
                            std::shared_ptr<const std::vector<int32_t>> toks) const {
  std::lock_guard<std::mutex> lock(mask_mu_);
  const size_t bytes = toks->size() * 4 + key.size() + 64;
  if (pops_bytes_ + bytes > kMaskCacheBytes) {
    pops_.clear();
    pops_bytes_ = 0;
  }
  if (pops_.emplace(key, std::move(toks)).second) pops_bytes_ += bytes;
}

TokenClass GrammarImpl::ComputeClass(const std::vector<ChainEntry>& chain, bool exact,
                                     uint32_t min_len) const {
  const TokenTrie& trie = vocab_->trie();
  const auto& nodes = trie.nodes();
  const auto& toks = trie.tokens();
  // One arena and configuration table for all of this grammar's class walks, so the
  // transitions one walk computed serve the next (the classes of neighbouring counts walk the
  // same configurations); started over when large.
  std::lock_guard<std::mutex> lock(walk_mu_);
  if (walk_ == nullptr || walk_->table.size() > kMaxWalkConfigs ||
      walk_->arena.size() > kMaxWalkNodes) {
    walk_.reset();
    walk_ = std::make_unique<WalkContext>(g_);
  }
  StackArena& arena = walk_->arena;
  ConfigTable& table = walk_->table;
  int32_t head = exact ? kRootNode : kBottomNode;
  size_t n_bounded_far = 0, bounded_rep = 0;
  for (size_t k = chain.size(); k-- > 0;) {
    head = arena.Intern(chain[k].pos, head, chain[k].count);
    const FlatGrammar::Elem& el = g_.elems[chain[k].pos];
    if (el.kind == FlatGrammar::Kind::kRepeat && chain[k].count == kCountFarAbove &&
        g_.repeats[el.arg].max >= 0) {
      ++n_bounded_far;
      bounded_rep = k;
    }
  }
  const bool bounded_far = n_bounded_far > 0;
  Config start;
  start.heads.push_back(head);
  std::vector<int32_t> states = {table.Add(std::move(start))};
  std::vector<char> left = {0};
  std::vector<int32_t> accepted;
  TokenClass cls;
  cls.min_len = min_len;
  // Depths on the current branch after which a parse had popped, and (suffix offset, token)
  // for each popped token.
  std::vector<size_t> pop_at;
  std::vector<std::pair<std::string_view, int32_t>> popped_tokens;
  auto accept = [&](int32_t tok, size_t len) {
    if (len <= min_len) return;
    if (bounded_far && len > static_cast<size_t>(kFarHeadroom)) {
      cls.long_accept.push_back({static_cast<uint32_t>(len), tok, false});
    } else {
      accepted.push_back(tok);
    }
  };
  auto add_popped = [&](int32_t tok) {
    if (cls.too_many_pops) return;
    const std::string_view b = vocab_->bytes(tok);
    if (b.size() <= min_len) return;
    if (bounded_far && b.size() > static_cast<size_t>(kFarHeadroom)) {
      // Its pops may need more iterations than the real headroom allows.
      cls.long_pops.push_back(tok);
      return;
    }
    for (size_t k : pop_at) popped_tokens.push_back({b.substr(k), tok});
    cls.too_many_pops = cls.too_many_pops || popped_tokens.size() > kMaxPopped;
  };
  // Depth-first over the trie in preorder: states[d] is the configuration after the first d
  // bytes of the current branch; left[d]: a parse returned into the unknown caller after at
  // most d of them.
  size_t i = 1;
  while (i < nodes.size()) {
    const TokenTrie::Node& nd = nodes[i];
    const size_t d = nd.depth;
    if (trie.max_length_below(i) <= min_len) {
      // Every token here is left out (at most min_len bytes).
      i = nd.end;
      continue;
    }
    if (states.size() <= d) {
      states.resize(d + 1);
      left.resize(d + 1, 0);
    }
    while (!pop_at.empty() && pop_at.back() >= d) pop_at.pop_back();
    states[d] = table.Next(states[d - 1], nd.byte);
    const uint8_t f = table.flags(states[d]);
    const bool alive = f & ConfigTable::kAlive;
    const bool popped = f & ConfigTable::kPopped;
    const bool left_before = left[d - 1];
    if (f != 0) {
      for (uint32_t t = nd.tok_begin; t < nd.own_end; ++t) accept(toks[t], d);
    } else if (left_before) {
      for (uint32_t t = nd.tok_begin; t < nd.own_end; ++t) add_popped(toks[t]);
    }
    left[d] = left_before || popped;
    if (popped) pop_at.push_back(d);
    if (alive) {
      const uint64_t* below = trie.below_bytes(i);
      if (below != nullptr && table.LoopsOn(states[d], below)) {
        // Every byte below keeps this configuration: the whole subtree is accepted.
        if (bounded_far || min_len > 0) {
          for (uint32_t t = nd.own_end; t < nd.sub_end; ++t) accept(toks[t], trie.length(t));
        } else {
          accepted.insert(accepted.end(), toks.begin() + nd.own_end, toks.begin() + nd.sub_end);
        }
        i = nd.end;
        continue;
      }
      ++i;
      continue;
    }
    // Nothing left inside the truncated stack: deeper tokens pop if a parse left it, else
    // they are rejected.
    if (left[d]) {
      for (uint32_t t = nd.own_end; t < nd.sub_end; ++t) add_popped(toks[t]);
    }
    i = nd.end;
  }
  if (n_bounded_far == 1 && !cls.long_accept.empty()) {
    MeasureLongTokens(chain, exact, bounded_rep, &cls);
  }
  if (cls.too_many_pops) popped_tokens.clear();
  std::sort(popped_tokens.begin(), popped_tokens.end());
  for (const auto& [suffix, tok] : popped_tokens) {
    if (cls.pops.empty() || cls.pops.back().suffix != suffix) {
      cls.pops.push_back({std::string(suffix), {}});
    }
    if (cls.pops.back().tokens.empty() || cls.pops.back().tokens.back() != tok) {
      cls.pops.back().tokens.push_back(tok);
    }
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

void GrammarImpl::MeasureLongTokens(const std::vector<ChainEntry>& chain, bool exact, size_t rep,
                                    TokenClass* cls) const {
  // The truncated stack with the repetition at a real count: headroom H = max - count. A token
  // is accepted with headroom H as the class walk accepts it (all bytes consumed leaving a
  // parse, or the bottom rule ending at the last byte), and more headroom never accepts fewer,
  // so `need` is the least H that accepts it, found by bisection. A parse that pops before the
  // last byte continues in the real caller: such tokens are not `sure`.
  StackArena& arena = walk_->arena;
  ConfigTable& table = walk_->table;
  const FlatGrammar::Repeat& r = g_.repeats[g_.elems[chain[rep].pos].arg];
  const int32_t rep_pos = chain[rep].pos;
  int32_t rep_parent = exact ? kRootNode : kBottomNode;
  for (size_t k = chain.size(); k-- > rep + 1;) {
    rep_parent = arena.Intern(chain[k].pos, rep_parent, chain[k].count);
  }
  // Runs go through the walks' configuration table: tokens sharing bytes and headrooms share
  // transitions.
  auto start = [&](int32_t headroom) {
    int32_t node = arena.Intern(rep_pos, rep_parent, r.max - headroom);
    for (size_t k = rep; k-- > 0;) node = arena.Intern(chain[k].pos, node, chain[k].count);
    Config c;
    c.heads.push_back(node);
    return table.Add(std::move(c));
  };
  // Real headrooms of a far class are at least kFarHeadroom and at most max - min; tokens
  // longer than the largest one cannot need more.
  const auto longest = static_cast<int32_t>(vocab_->trie().max_depth());
  const int32_t top = std::min(r.max - r.min, longest);
  auto accepts = [&](std::string_view bytes, int32_t headroom) {
    int32_t id = start(headroom);
    for (size_t j = 0; j < bytes.size(); ++j) {
      if (!(table.flags(id) & ConfigTable::kAlive)) return false;
      id = table.Next(id, static_cast<uint8_t>(bytes[j]));
    }
    return table.flags(id) != 0;
  };
  for (TokenClass::LongToken& lt : cls->long_accept) {
    const std::string_view bytes = vocab_->bytes(lt.token);
    // One run at the largest headroom: does any parse pop before the last byte, and how many
    // iterations does a parse still inside the repetition take (an upper bound for need)?
    int32_t id = start(top);
    bool popped_early = false;
    for (size_t j = 0; j < bytes.size() && (table.flags(id) & ConfigTable::kAlive); ++j) {
      popped_early = popped_early || (j > 0 && (table.flags(id) & ~ConfigTable::kAlive) != 0);
      id = table.Next(id, static_cast<uint8_t>(bytes[j]));
    }
    lt.sure = !popped_early;
    int32_t hi = -1;
    for (int32_t h : table.config(id).heads) {
      int32_t n = h;
      while (n >= 0 && !(arena.node(n).pos == rep_pos && arena.node(n).parent == rep_parent)) {
        n = arena.node(n).parent;
      }
      if (n >= 0) {
        const int32_t used = arena.node(n).count - (r.max - top);
        hi = hi < 0 ? used : std::min(hi, used);
      }
    }
    if (hi < 0) {
      if (!accepts(bytes, top)) {
        lt.need = TokenClass::kNoNeed;
        continue;
      }
      hi = top;
    }
    // accepts(hi) holds; find the least such headroom at or above kFarHeadroom.
    int32_t lo = kFarHeadroom;
    if (hi > lo && !accepts(bytes, hi - 1)) lo = hi;
    while (lo < hi) {
      const int32_t mid = lo + (hi - lo) / 2;
      if (accepts(bytes, mid)) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    lt.need = static_cast<uint32_t>(std::max(hi, 0));
  }
}

}  // namespace tachyon::grammar
