// GrammarBuilder::Finish: undefined rules, productivity, reachability, left recursion, and
// flattening into the matcher's form.
#include <algorithm>

#include "grammar/ir.h"

namespace tachyon::grammar {
namespace {

// Marks rules that satisfy "some alternative has only OK symbols" to a fixpoint, where a
// symbol is OK if it is a byte set accepted by `bytes_ok` or a marked rule. Worklist over
// symbol occurrences: linear in the grammar's size.
template <typename BytesOk>
std::vector<char> Fixpoint(const std::vector<std::vector<Sequence>>& rules,
                           const std::vector<char>& alt_enabled, BytesOk bytes_ok) {
  const size_t n = rules.size();
  std::vector<char> marked(n, 0);
  std::vector<int32_t> alt_rule, missing;
  std::vector<std::vector<int32_t>> uses(n);  // rule -> alts it occurs in (once per occurrence)
  std::vector<int32_t> work;
  size_t a = 0;
  for (size_t r = 0; r < n; ++r) {
    for (const Sequence& seq : rules[r]) {
      const auto id = static_cast<int32_t>(alt_rule.size());
      alt_rule.push_back(static_cast<int32_t>(r));
      int32_t miss = alt_enabled[a++] ? 0 : 1 << 30;
      for (const Symbol& s : seq) {
        if (s.kind == Symbol::Kind::kBytes) {
          if (!bytes_ok(s.index)) miss = 1 << 30;
        } else {
          ++miss;
          uses[s.index].push_back(id);
        }
      }
      missing.push_back(miss);
      if (miss == 0 && !marked[r]) {
        marked[r] = 1;
        work.push_back(static_cast<int32_t>(r));
      }
    }
  }
  while (!work.empty()) {
    const int32_t r = work.back();
    work.pop_back();
    for (int32_t id : uses[r]) {
      if (--missing[id] == 0 && !marked[alt_rule[id]]) {
        marked[alt_rule[id]] = 1;
        work.push_back(alt_rule[id]);
      }
    }
  }
  return marked;
}

}  // namespace

Result<FlatGrammar> GrammarBuilder::Finish(int32_t root, Deadline& deadline) const {
  const size_t n = rules_.size();
  std::vector<std::vector<Sequence>> alts(n);
  size_t total = 0;
  for (size_t r = 0; r < n; ++r) {
    alts[r] = rules_[r].alts;
    // A counted repetition is analysed as body | "" (min 0) or body (min > 0): the same
    // productivity, nullability and reachability.
    if (rules_[r].rep_min == 0) alts[r].emplace_back();
    for (const Sequence& s : alts[r]) total += s.size() + 1;
  }
  if (total > kMaxSymbols) return InvalidArgument("grammar too large");
  for (size_t r = 0; r < n; ++r) {
    for (const Sequence& seq : alts[r]) {
      for (const Symbol& s : seq) {
        if (s.kind == Symbol::Kind::kRule && !rules_[s.index].defined) {
          return InvalidArgument("undefined rule '" + rules_[s.index].name + "'");
        }
      }
    }
  }
  if (deadline.Expired()) return deadline.Error();
  std::vector<char> all_on(total, 1);
  // Productive rules: those deriving at least one finite byte string.
  const std::vector<char> productive =
      Fixpoint(alts, all_on, [&](int32_t set) { return !sets_[set].Empty(); });
  std::vector<char> alt_on;
  for (size_t r = 0; r < n; ++r) {
    for (const Sequence& seq : alts[r]) {
      bool ok = true;
      for (const Symbol& s : seq) {
        ok = ok && (s.kind == Symbol::Kind::kBytes ? !sets_[s.index].Empty()
                                                   : static_cast<bool>(productive[s.index]));
      }
      alt_on.push_back(ok);
    }
  }
  if (!productive[root]) {
    return InvalidArgument("grammar matches nothing (rule '" + rules_[root].name +
                           "' can never complete)");
  }
  const std::vector<char> nullable = Fixpoint(alts, alt_on, [](int32_t) { return false; });
  if (deadline.Expired()) return deadline.Error();

  // Reachable rules through enabled alternatives, numbered in discovery order (root = 0).
  std::vector<size_t> first_alt(n + 1, 0);
  for (size_t r = 0; r < n; ++r) first_alt[r + 1] = first_alt[r] + alts[r].size();
  std::vector<int32_t> new_id(n, -1), order = {root};
  new_id[root] = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const int32_t r = order[i];
    for (size_t k = 0; k < alts[r].size(); ++k) {
      if (!alt_on[first_alt[r] + k]) continue;
      for (const Symbol& s : alts[r][k]) {
        if (s.kind == Symbol::Kind::kRule && new_id[s.index] < 0) {
          new_id[s.index] = static_cast<int32_t>(order.size());
          order.push_back(s.index);
        }
      }
    }
  }

  // Left recursion: a cycle of "A reaches B before consuming a byte" edges containing an edge
  // where B is not the last symbol (the matcher's stack would grow without bound). Tarjan's
  // strongly connected components, iteratively.
  const size_t m = order.size();
  std::vector<std::vector<std::pair<int32_t, bool>>> edges(m);  // (target, grows)
  for (size_t i = 0; i < m; ++i) {
    const int32_t r = order[i];
    for (size_t k = 0; k < alts[r].size(); ++k) {
      if (!alt_on[first_alt[r] + k]) continue;
      const Sequence& seq = alts[r][k];
      for (size_t j = 0; j < seq.size(); ++j) {
        if (seq[j].kind == Symbol::Kind::kBytes) break;
        // Each iteration of a counted repetition stacks a node (the count): it grows.
        const bool grows = j + 1 < seq.size() || rules_[r].rep_min >= 0;
        edges[i].push_back({new_id[seq[j].index], grows});
        if (!nullable[seq[j].index]) break;
      }
    }
  }
  std::vector<int32_t> index(m, -1), low(m, 0), comp(m, -1), stack;
  std::vector<std::pair<int32_t, size_t>> call;
  int32_t counter = 0, ncomp = 0;
  for (size_t s0 = 0; s0 < m; ++s0) {
    if (index[s0] >= 0) continue;
    call.push_back({static_cast<int32_t>(s0), 0});
    index[s0] = low[s0] = counter++;
    stack.push_back(static_cast<int32_t>(s0));
    while (!call.empty()) {
      auto& [v, e] = call.back();
      if (e < edges[v].size()) {
        const int32_t w = edges[v][e++].first;
        if (index[w] < 0) {
          index[w] = low[w] = counter++;
          stack.push_back(w);
          call.push_back({w, 0});
        } else if (comp[w] < 0) {
          low[v] = std::min(low[v], index[w]);
        }
        continue;
      }
      if (low[v] == index[v]) {
        int32_t w;
        do {
          w = stack.back();
          stack.pop_back();
          comp[w] = ncomp;
        } while (w != v);
        ++ncomp;
      }
      const int32_t done = v;
      call.pop_back();
      if (!call.empty()) low[call.back().first] = std::min(low[call.back().first], low[done]);
    }
  }
  for (size_t i = 0; i < m; ++i) {
    for (const auto& [w, grows] : edges[i]) {
      if (grows && comp[w] == comp[i]) {
        return InvalidArgument("left recursion: rule '" + rules_[order[i]].name +
                               "' can reach itself before matching any byte (rewrite it with "
                               "repetition, e.g. x ::= y (\"op\" y)*)");
      }
    }
  }
  if (deadline.Expired()) return deadline.Error();

  FlatGrammar g;
  g.sets = sets_;
  g.root = 0;
  g.rule_alts.push_back(0);
  for (size_t i = 0; i < m; ++i) {
    const int32_t r = order[i];
    g.rule_names.push_back(rules_[r].name);
    if (rules_[r].rep_min >= 0) {
      const int32_t body = rules_[r].alts[0][0].index;
      const bool body_on = alt_on[first_alt[r]] != 0;
      g.alt_start.push_back(static_cast<int32_t>(g.elems.size()));
      g.elems.push_back({FlatGrammar::Kind::kRepeat, static_cast<int32_t>(g.repeats.size())});
      g.elems.push_back({FlatGrammar::Kind::kEnd, 0});
      g.repeats.push_back({body_on ? new_id[body] : -1, rules_[r].rep_min, rules_[r].rep_max,
                           static_cast<bool>(nullable[body])});
      g.rule_alts.push_back(static_cast<int32_t>(g.alt_start.size()));
      continue;
    }
    for (size_t k = 0; k < alts[r].size(); ++k) {
      if (!alt_on[first_alt[r] + k]) continue;
      g.alt_start.push_back(static_cast<int32_t>(g.elems.size()));
      for (const Symbol& s : alts[r][k]) {
        if (s.kind == Symbol::Kind::kBytes) {
          g.elems.push_back({FlatGrammar::Kind::kBytes, s.index});
        } else {
          g.elems.push_back({FlatGrammar::Kind::kRule, new_id[s.index]});
        }
      }
      g.elems.push_back({FlatGrammar::Kind::kEnd, 0});
    }
    g.rule_alts.push_back(static_cast<int32_t>(g.alt_start.size()));
  }
  return g;
}

}  // namespace tachyon::grammar
