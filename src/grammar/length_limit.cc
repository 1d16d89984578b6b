#include "grammar/length_limit.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "util/logging.h"

namespace tachyon::grammar {
namespace {

constexpr int kSettle = 64;  // fixed-point passes before a growing value is taken as unbounded

int64_t AddSat(int64_t a, int64_t b) {
  return std::min(a + b, kUnreachable);
}

int64_t RepeatRest(const FlatGrammar::Repeat& r, int32_t count, const std::vector<int64_t>& mins) {
  if (count == kCountFarAbove) return 0;  // at or above min (FarCounts)
  const int64_t need = std::max<int64_t>(0, int64_t{r.min} - count);
  if (need == 0) return 0;
  if (r.rule < 0) return kUnreachable;
  return std::min(need * mins[r.rule], kUnreachable);
}

// Real configurations of one length walk, hash-consed, with memoized byte transitions and
// their distances.
class LengthConfigs {
 public:
  LengthConfigs(const LengthTables& lengths, Recognizer* rec) : lengths_(lengths), rec_(*rec) {}

  int32_t Add(Config c) {
    std::sort(c.heads.begin(), c.heads.end());
    std::string key(reinterpret_cast<const char*>(c.heads.data()), c.heads.size() * 4);
    key.push_back(c.accepting ? 'a' : 'n');
    auto [it, inserted] = ids_.emplace(std::move(key), static_cast<int32_t>(configs_.size()));
    if (inserted) {
      alive_.push_back(!c.heads.empty());
      ends_.push_back(!c.heads.empty() || c.accepting);
      distance_.push_back(lengths_.Distance(c, rec_.arena()));
      configs_.push_back(std::move(c));
      trans_.resize(trans_.size() + 256, -1);
      loops_.resize(loops_.size() + 8, 0);
    }
    return it->second;
  }
  int32_t Next(int32_t id, uint8_t byte) {
    int32_t t = trans_[static_cast<size_t>(id) * 256 + byte];
    if (t >= 0) return t;
    rec_.Advance(configs_[id], byte, &tmp_);
    t = Add(tmp_);
    trans_[static_cast<size_t>(id) * 256 + byte] = t;
    return t;
  }
  // Every byte of `set` (4 words) leads from `id` back to `id`; answers memoized per byte
  // (words 0-3 known to loop, 4-7 known not to).
  bool LoopsOn(int32_t id, const uint64_t* set) {
    // Indices, not pointers: Next() may add configurations and so grow loops_.
    const size_t yes = 8 * static_cast<size_t>(id), no = yes + 4;
    for (int w = 0; w < 4; ++w) {
      if (set[w] & loops_[no + w]) return false;
    }
    for (int w = 0; w < 4; ++w) {
      for (uint64_t unknown = set[w] & ~loops_[yes + w]; unknown != 0; unknown &= unknown - 1) {
        const int bit = __builtin_ctzll(unknown);
        const bool loops = Next(id, static_cast<uint8_t>(w * 64 + bit)) == id;
        loops_[(loops ? yes : no) + w] |= uint64_t{1} << bit;
        if (!loops) return false;
      }
    }
    return true;
  }
  bool alive(int32_t id) const { return alive_[id]; }
  // A token ending here is allowed: a head is left, or the root may end.
  bool ends(int32_t id) const { return ends_[id]; }
  int64_t distance(int32_t id) const { return distance_[id]; }

 private:
  const LengthTables& lengths_;
  Recognizer& rec_;
  std::vector<Config> configs_;
  std::vector<char> alive_, ends_;
  std::vector<int64_t> distance_;
  std::vector<int32_t> trans_;
  std::vector<uint64_t> loops_;
  std::unordered_map<std::string, int32_t> ids_;
  Config tmp_;
};

// For each byte-set element p followed by more byte-set elements in its alternative: the lengths
// n >= 2 of the tokens whose bytes i fall in the sets of elements p + i (one token then takes
// the head from p to p + n), as offsets into `lens`: lens[first[p] .. first[p + 1]). The trie
// is walked along the sets; each position visits at most kRunVisits trie nodes and all
// positions together kTotalVisits (a length left out only makes a distance larger).
void TokenRuns(const FlatGrammar& g, const TokenTrie& trie, std::vector<int32_t>* first,
               std::vector<uint16_t>* lens) {
  constexpr size_t kRunVisits = 4096, kTotalVisits = size_t{1} << 22;
  const auto& nodes = trie.nodes();
  first->assign(g.elems.size() + 1, 0);
  lens->clear();
  size_t total = 0;
  std::vector<uint8_t> found;
  std::vector<std::pair<uint32_t, int32_t>> stack;  // (trie node, its depth)
  for (size_t p = 0; p < g.elems.size(); ++p) {
    (*first)[p] = static_cast<int32_t>(lens->size());
    if (g.elems[p].kind != FlatGrammar::Kind::kBytes || p + 1 >= g.elems.size() ||
        g.elems[p + 1].kind != FlatGrammar::Kind::kBytes || total >= kTotalVisits) {
      continue;
    }
    size_t run = 0;
    while (p + run < g.elems.size() && g.elems[p + run].kind == FlatGrammar::Kind::kBytes) ++run;
    found.assign(run + 1, 0);
    size_t visits = 0;
    stack.assign(1, {0u, 0});
    while (!stack.empty() && visits < kRunVisits) {
      const auto [i, depth] = stack.back();
      stack.pop_back();
      if (static_cast<size_t>(depth) >= run) continue;
      const ByteSet& set = g.sets[g.elems[p + depth].arg];
      for (uint32_t c = i + 1; c < nodes[i].end && visits < kRunVisits; c = nodes[c].end) {
        ++visits;
        if (!set.Has(nodes[c].byte)) continue;
        if (nodes[c].own_end > nodes[c].tok_begin) found[depth + 1] = 1;
        stack.push_back({c, depth + 1});
      }
    }
    total += visits;
    for (size_t n = 2; n <= run && n <= 0xffff; ++n) {
      if (found[n]) lens->push_back(static_cast<uint16_t>(n));
    }
  }
  (*first)[g.elems.size()] = static_cast<int32_t>(lens->size());
}

}  // namespace

LengthTables::LengthTables(const FlatGrammar& g, const Vocabulary& vocab) : g_(g) {
  ByteSet single;
  for (int32_t t = 0; t < vocab.size(); ++t) {
    if (vocab.bytes(t).size() == 1) single.Set(static_cast<uint8_t>(vocab.bytes(t)[0]));
  }
  std::vector<int64_t> set_cost(g.sets.size());
  for (size_t s = 0; s < g.sets.size(); ++s) {
    bool any = false;
    for (int w = 0; w < 4; ++w) any = any || (g.sets[s].w[w] & single.w[w]) != 0;
    set_cost[s] = any ? 1 : kUnreachable;
  }
  std::vector<int32_t> run_first;
  std::vector<uint16_t> run_lens;
  TokenRuns(g, vocab.trie(), &run_first, &run_lens);
  const size_t n_rules = g.rule_alts.size() - 1;
  rule_min_.assign(n_rules, kUnreachable);
  rest_.assign(g.elems.size(), 0);
  // rest_ of every alternative from its end backwards, against the current rule minima; the
  // minima only decrease, so this settles (a shortest derivation uses each rule's shortest).
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = n_rules; r-- > 0;) {
      int64_t best = kUnreachable;
      for (int32_t a = g.rule_alts[r]; a < g.rule_alts[r + 1]; ++a) {
        int32_t end = g.alt_start[a];
        while (g.elems[end].kind != FlatGrammar::Kind::kEnd) ++end;
        rest_[end] = 0;
        for (int32_t p = end - 1; p >= g.alt_start[a]; --p) {
          const FlatGrammar::Elem& e = g.elems[p];
          int64_t here = 0;
          switch (e.kind) {
            case FlatGrammar::Kind::kBytes:
              here = set_cost[e.arg];
              break;
            case FlatGrammar::Kind::kRule:
              here = rule_min_[e.arg];
              break;
            case FlatGrammar::Kind::kRepeat:
              here = RepeatRest(g.repeats[e.arg], 0, rule_min_);
              break;
            case FlatGrammar::Kind::kEnd:
              break;
          }
          rest_[p] = AddSat(here, rest_[p + 1]);
          for (int32_t k = run_first[p]; k < run_first[p + 1]; ++k) {
            rest_[p] = std::min(rest_[p], AddSat(1, rest_[p + run_lens[k]]));
          }
        }
        best = std::min(best, rest_[g.alt_start[a]]);
      }
      if (best < rule_min_[r]) {
        rule_min_[r] = best;
        changed = true;
      }
    }
  }
  // Max grows to a fixed point unless a recursion nests deeper with each level: a rule still
  // growing after kSettle passes is taken as unbounded (never too small: only ever larger).
  rule_max_.assign(n_rules, 0);
  max_.assign(g.elems.size(), 0);
  for (int pass = 0, changed = 1; changed; ++pass) {
    changed = 0;
    for (size_t r = n_rules; r-- > 0;) {
      int64_t most = 0;
      for (int32_t a = g.rule_alts[r]; a < g.rule_alts[r + 1]; ++a) {
        int32_t end = g.alt_start[a];
        while (g.elems[end].kind != FlatGrammar::Kind::kEnd) ++end;
        max_[end] = 0;
        for (int32_t p = end - 1; p >= g.alt_start[a]; --p) max_[p] = MaxAt(p, 0);
        most = std::max(most, max_[g.alt_start[a]]);
      }
      if (most > rule_max_[r]) {
        rule_max_[r] = pass >= kSettle ? kUnreachable : most;
        changed = 1;
      }
    }
  }
  // Growth: x[p] is the most a head reached by the closure from a node at p costs within that
  // node's frame and the frames the closure pushes (-1: the closure only returns to the
  // caller), per rule the most of its alternatives'. A closure cannot nest without consuming
  // a byte (left recursion is rejected), so this settles; kSettle passes bound it anyway.
  std::vector<int64_t> rule_x(n_rules, -1), x(g.elems.size(), -1);
  for (int pass = 0, changed = 1; changed; ++pass) {
    changed = 0;
    for (size_t r = n_rules; r-- > 0;) {
      int64_t most = -1;
      for (int32_t a = g.rule_alts[r]; a < g.rule_alts[r + 1]; ++a) {
        int32_t end = g.alt_start[a];
        while (g.elems[end].kind != FlatGrammar::Kind::kEnd) ++end;
        for (int32_t p = end - 1; p >= g.alt_start[a]; --p) x[p] = ClosureCost(p, x, rule_x);
        most = std::max(most, x[g.alt_start[a]]);
      }
      if (most > rule_x[r]) {
        rule_x[r] = pass >= kSettle ? kUnreachable : most;
        changed = 1;
      }
    }
  }
  // A byte at a head's element (rest 1 or more there) moves it on to p + 1 or returns into a
  // continuation node, and the closure from that position costs at most x more than its rest
  // (a counted repetition's node: at most its body's x, at any count).
  for (size_t p = 0; p < g.elems.size(); ++p) {
    const FlatGrammar::Elem& e = g.elems[p];
    if (x[p] < 0) continue;
    int64_t excess = 0;
    if (e.kind == FlatGrammar::Kind::kRepeat) {
      const int32_t body = g.repeats[e.arg].rule;
      excess = body < 0 ? 0 : std::max<int64_t>(0, rule_x[body]);
    } else {
      excess = x[p] - std::min(rest_[p], x[p]);
    }
    if (x[p] >= kUnreachable || excess >= kUnreachable) {
      growth_ = kUnreachable;
      break;
    }
    growth_ = std::max(growth_, excess - 1);
    // A byte inside a run a longer token spans (its rest counted as that token) can leave the
    // head at p + 1 with a larger rest than it had at p.
    if (e.kind == FlatGrammar::Kind::kBytes && x[p + 1] >= 0) {
      if (x[p + 1] >= kUnreachable) {
        growth_ = kUnreachable;
        break;
      }
      growth_ = std::max(growth_, x[p + 1] - std::min(rest_[p], x[p + 1]));
    }
  }
}

int64_t LengthTables::ClosureCost(int32_t p, const std::vector<int64_t>& x,
                                  const std::vector<int64_t>& rule_x) const {
  const FlatGrammar::Elem& e = g_.elems[p];
  switch (e.kind) {
    case FlatGrammar::Kind::kBytes:
      return rest_[p];
    case FlatGrammar::Kind::kRule: {
      const int64_t via = rule_x[e.arg] < 0 ? -1 : AddSat(rule_x[e.arg], rest_[p + 1]);
      // A rule that can match nothing lets the closure go on past it.
      return rule_min_[e.arg] == 0 ? std::max(via, x[p + 1]) : via;
    }
    case FlatGrammar::Kind::kRepeat: {
      // At count 0 (the most iterations still needed); ending returns to the caller.
      const FlatGrammar::Repeat& r = g_.repeats[e.arg];
      if (r.rule < 0 || r.max == 0 || rule_x[r.rule] < 0) return -1;
      return AddSat(rule_x[r.rule], RepeatRest(r, 1, rule_min_));
    }
    case FlatGrammar::Kind::kEnd:
      break;
  }
  return -1;
}

int64_t LengthTables::MaxAt(int32_t pos, int32_t count) const {
  const FlatGrammar::Elem& e = g_.elems[pos];
  switch (e.kind) {
    case FlatGrammar::Kind::kBytes:
      return std::max(rest_[pos], max_[pos + 1]);
    case FlatGrammar::Kind::kRule:
      return std::max(AddSat(rest_[pos + 1], rule_max_[e.arg]), max_[pos + 1]);
    case FlatGrammar::Kind::kRepeat: {
      const FlatGrammar::Repeat& r = g_.repeats[e.arg];
      const int64_t here = RepeatRest(r, count, rule_min_);
      if (r.rule < 0) return here;
      return std::max(here, AddSat(RepeatRest(r, count + 1, rule_min_), rule_max_[r.rule]));
    }
    case FlatGrammar::Kind::kEnd:
      break;
  }
  return 0;
}

int64_t LengthTables::Ceiling(const Config& c, const StackArena& arena,
                              std::vector<int32_t>* chain) const {
  int64_t ceiling = 0;
  for (int32_t h : c.heads) {
    chain->clear();
    for (int32_t n = h; n >= 0; n = arena.node(n).parent) chain->push_back(n);
    int64_t above = 0;  // rest of the nodes above i
    for (size_t i = chain->size(); i-- > 0;) {
      const StackArena::Node& nd = arena.node((*chain)[i]);
      ceiling = std::max(ceiling, AddSat(MaxAt(nd.pos, nd.count), above));
      above = AddSat(above, Rest(nd.pos, nd.count));
    }
    if (ceiling >= kUnreachable) return kUnreachable;
  }
  return ceiling;
}

int64_t LengthTables::Rest(int32_t pos, int32_t count) const {
  const FlatGrammar::Elem& e = g_.elems[pos];
  if (e.kind != FlatGrammar::Kind::kRepeat) return rest_[pos];
  // The element after kRepeat is its alternative's kEnd.
  return RepeatRest(g_.repeats[e.arg], count, rule_min_);
}

int64_t LengthTables::Distance(const Config& c, const StackArena& arena) const {
  if (c.accepting) return 0;
  int64_t best = kUnreachable;
  for (int32_t h : c.heads) {
    int64_t d = 0;
    for (int32_t n = h; n >= 0 && d < best; n = arena.node(n).parent) {
      d = AddSat(d, Rest(arena.node(n).pos, arena.node(n).count));
    }
    best = std::min(best, d);
  }
  return best;
}

int64_t LengthTables::MostHead(const Config& c, const StackArena& arena) const {
  int64_t most = 0;
  for (int32_t h : c.heads) {
    int64_t d = 0;
    for (int32_t n = h; n >= 0; n = arena.node(n).parent) {
      d = AddSat(d, Rest(arena.node(n).pos, arena.node(n).count));
    }
    most = std::max(most, d);
  }
  return most;
}

Config LengthTables::FarCounts(const Config& c, int64_t longest, StackArena* arena) const {
  auto far = [&](const StackArena::Node& n) {
    const FlatGrammar::Elem& e = g_.elems[n.pos];
    if (e.kind != FlatGrammar::Kind::kRepeat || n.count < 0) return false;
    const FlatGrammar::Repeat& r = g_.repeats[e.arg];
    return r.rule >= 0 && rule_min_[r.rule] > 0 && n.count >= r.min &&
           (r.max < 0 || r.max - int64_t{n.count} >= longest);
  };
  std::vector<int32_t> chain;
  std::unordered_map<int32_t, int32_t> renamed;  // node -> its copy with far counts
  Config out;
  out.accepting = c.accepting;
  out.popped = c.popped;
  for (int32_t h : c.heads) {
    chain.clear();
    bool any = false;
    for (int32_t n = h; n >= 0; n = arena->node(n).parent) {
      chain.push_back(n);
      any = any || far(arena->node(n));
    }
    if (!any) {
      out.heads.push_back(h);
      continue;
    }
    int32_t parent = arena->node(chain.back()).parent;  // the root sentinel
    for (size_t i = chain.size(); i-- > 0;) {
      auto it = renamed.find(chain[i]);
      if (it != renamed.end()) {
        parent = it->second;
        continue;
      }
      const StackArena::Node n = arena->node(chain[i]);
      parent = arena->Intern(n.pos, parent, far(n) ? kCountFarAbove : n.count);
      renamed.emplace(chain[i], parent);
    }
    out.heads.push_back(parent);
  }
  std::sort(out.heads.begin(), out.heads.end());
  out.heads.erase(std::unique(out.heads.begin(), out.heads.end()), out.heads.end());
  return out;
}

LengthInfo ComputeLengthInfo(const LengthTables& lengths, const Vocabulary& vocab, Recognizer* rec,
                             const Config& real_start, uint32_t min_len) {
  const Config start = lengths.FarCounts(
      real_start, static_cast<int64_t>(vocab.trie().max_depth()), &rec->arena());
  LengthConfigs table(lengths, rec);
  const TokenTrie& trie = vocab.trie();
  const auto& nodes = trie.nodes();
  const auto& toks = trie.tokens();
  LengthInfo info;
  std::vector<int32_t> states(1, table.Add(start));
  info.distance = table.distance(states[0]);
  info.worst = 0;
  info.min_len = min_len;
  auto record = [&](int32_t tok, int64_t d) {
    info.worst = std::max(info.worst, d);
    if (d > info.distance) info.farther.push_back({d, tok});
    if (d < info.distance) info.closer.push_back({d, tok});
  };
  // Depth-first over the trie in preorder: states[d] is the configuration after the first d
  // bytes of the current branch.
  size_t i = 1;
  while (i < nodes.size()) {
    const TokenTrie::Node& nd = nodes[i];
    const size_t depth = nd.depth;
    if (trie.max_length_below(i) <= min_len) {
      i = nd.end;  // every token here is left out
      continue;
    }
    if (states.size() <= depth) states.resize(depth + 1);
    const int32_t s = table.Next(states[depth - 1], nd.byte);
    states[depth] = s;
    if (table.ends(s) && depth > min_len) {
      for (uint32_t t = nd.tok_begin; t < nd.own_end; ++t) record(toks[t], table.distance(s));
    }
    if (!table.alive(s)) {
      i = nd.end;  // nothing longer is allowed
      continue;
    }
    const uint64_t* below = trie.below_bytes(i);
    if (below != nullptr && table.LoopsOn(s, below)) {
      // Every token below ends in this configuration.
      for (uint32_t t = nd.own_end; t < nd.sub_end; ++t) record(toks[t], table.distance(s));
      i = nd.end;
      continue;
    }
    ++i;
  }
  std::sort(info.farther.begin(), info.farther.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::sort(info.closer.begin(), info.closer.end());
  return info;
}

void ApplyLengthLimit(const LengthInfo& info, int64_t budget, uint32_t* bitmask, size_t words) {
  if (budget <= 0 || budget - 1 >= info.worst) return;
  CHECK(info.min_len == 0 || budget - 1 >= info.distance);
  auto clear = [&](int32_t t) { bitmask[t >> 5] &= ~(1u << (t & 31)); };
  const int64_t allowed = budget - 1;
  if (allowed >= info.distance) {
    for (const auto& [d, t] : info.farther) {
      if (d <= allowed) break;
      clear(t);
    }
    return;
  }
  // Only tokens that come closer to an end can fit: keep those within the budget, or (none
  // fits: the budget was already too small) the closest ones. End-of-generation ids are not
  // set here (the root cannot end at a positive distance).
  if (info.closer.empty()) return;
  const int64_t keep = std::max(allowed, info.closer.front().first);
  std::vector<int32_t> kept;
  for (const auto& [d, t] : info.closer) {
    if (d > keep) break;
    if ((bitmask[t >> 5] >> (t & 31)) & 1u) kept.push_back(t);
  }
  std::fill(bitmask, bitmask + words, 0u);
  for (int32_t t : kept) bitmask[t >> 5] |= 1u << (t & 31);
}

}  // namespace tachyon::grammar
