#include "grammar/ir.h"

#include <algorithm>

#include "grammar/utf8_ranges.h"

namespace tachyon::grammar {

Status Deadline::Error() const {
  return InvalidArgument("grammar exceeds the compile budget of " +
                         std::to_string(budget_.count() / 1000.0) + " ms");
}

int32_t GrammarBuilder::AddByteSet(const ByteSet& set) {
  auto [it, inserted] = set_ids_.emplace(set, static_cast<int32_t>(sets_.size()));
  if (inserted) sets_.push_back(set);
  return it->second;
}

int32_t GrammarBuilder::RuleId(std::string_view name) {
  auto [it, inserted] = rule_ids_.emplace(std::string(name), static_cast<int32_t>(rules_.size()));
  if (inserted) rules_.push_back(Rule{std::string(name), {}, false, ""});
  return it->second;
}

int32_t GrammarBuilder::NewHelperRule(std::string_view base) {
  std::string name;
  do {
    name = std::string(base) + "~" + std::to_string(++helpers_);
  } while (rule_ids_.count(name) != 0);
  const int32_t r = RuleId(name);
  rules_[r].defined = true;
  return r;
}

void GrammarBuilder::MarkDefined(int32_t rule, std::string where) {
  rules_[rule].defined = true;
  rules_[rule].where = std::move(where);
}

void GrammarBuilder::AppendLiteral(std::string_view text, Sequence* out) {
  for (char c : text) {
    ByteSet s;
    s.Set(static_cast<uint8_t>(c));
    out->push_back({Symbol::Kind::kBytes, AddByteSet(s)});
  }
}

Status GrammarBuilder::AppendCharClass(std::vector<std::pair<uint32_t, uint32_t>> ranges,
                                       bool negated, std::string_view base, Sequence* out) {
  for (auto& [lo, hi] : ranges) {
    if (lo > hi || hi > 0x10FFFF) return InvalidArgument("bad character range");
  }
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<uint32_t, uint32_t>> merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && r.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  if (negated) {
    std::vector<std::pair<uint32_t, uint32_t>> comp;
    uint32_t next = 0;
    for (const auto& [lo, hi] : merged) {
      if (lo > next) comp.push_back({next, lo - 1});
      next = hi + 1;
    }
    if (next <= 0x10FFFF) comp.push_back({next, 0x10FFFF});
    merged = std::move(comp);
  }
  // Cut out the surrogates.
  std::vector<std::pair<uint32_t, uint32_t>> valid;
  for (const auto& [lo, hi] : merged) {
    if (hi < 0xD800 || lo > 0xDFFF) {
      valid.push_back({lo, hi});
      continue;
    }
    if (lo < 0xD800) valid.push_back({lo, 0xD7FF});
    if (hi > 0xDFFF) valid.push_back({0xE000, hi});
  }
  std::vector<ByteRangeSeq> seqs;
  for (const auto& [lo, hi] : valid) Utf8Sequences(lo, hi, &seqs);
  ByteSet ascii;
  std::vector<Sequence> alts;
  for (const ByteRangeSeq& seq : seqs) {
    if (seq.size() == 1) {
      ascii.SetRange(seq[0].first, seq[0].second);
      continue;
    }
    Sequence alt;
    for (const auto& [lo, hi] : seq) {
      ByteSet s;
      s.SetRange(lo, hi);
      alt.push_back({Symbol::Kind::kBytes, AddByteSet(s)});
    }
    alts.push_back(std::move(alt));
  }
  if (!ascii.Empty())
    alts.insert(alts.begin(), Sequence{{Symbol::Kind::kBytes, AddByteSet(ascii)}});
  if (alts.empty()) {
    // Matches nothing: an empty helper rule (Finish drops what depends on it).
    out->push_back({Symbol::Kind::kRule, NewHelperRule(base)});
    return OkStatus();
  }
  out->push_back(Group(std::move(alts), base));
  return OkStatus();
}

Symbol GrammarBuilder::Group(std::vector<Sequence> alts, std::string_view base) {
  if (alts.size() == 1 && alts[0].size() == 1) return alts[0][0];
  const int32_t r = NewHelperRule(base);
  for (auto& a : alts) AddAlternative(r, std::move(a));
  return {Symbol::Kind::kRule, r};
}

Status GrammarBuilder::AppendRepeat(Sequence x, int min, int max, std::string_view base,
                                    Sequence* out, Deadline& deadline) {
  if (min < 0 || (max >= 0 && max < min)) {
    return InvalidArgument("bad repetition {" + std::to_string(min) + "," + std::to_string(max) +
                           "}");
  }
  if (min > kMaxRepeat || max > kMaxRepeat) {
    return InvalidArgument("repetition count above the limit of " + std::to_string(kMaxRepeat));
  }
  if (x.empty() || max == 0) return OkStatus();
  if (max > kExpandUpTo || (max < 0 && min > kExpandUpTo)) {
    // One counted repetition rule whose single alternative references the body rule.
    Symbol body = Group({std::move(x)}, base);
    if (body.kind != Symbol::Kind::kRule) {
      const int32_t wrap = NewHelperRule(base);
      AddAlternative(wrap, {body});
      body = {Symbol::Kind::kRule, wrap};
    }
    const int32_t rep = NewHelperRule(base);
    AddAlternative(rep, {body});
    rules_[rep].rep_min = min;
    rules_[rep].rep_max = max;
    symbols_ += 2;
    if (symbols_ > kMaxSymbols) return InvalidArgument("grammar too large (repetitions)");
    out->push_back({Symbol::Kind::kRule, rep});
    return OkStatus();
  }
  const Symbol s = Group({std::move(x)}, base);
  for (int i = 0; i < min; ++i) {
    if (deadline.Expired()) return deadline.Error();
    out->push_back(s);
  }
  symbols_ += static_cast<size_t>(min) + 2 * static_cast<size_t>(std::max(0, max - min));
  if (symbols_ > kMaxSymbols) return InvalidArgument("grammar too large (repetitions)");
  if (max < 0) {
    const int32_t star = NewHelperRule(base);
    AddAlternative(star, {s, {Symbol::Kind::kRule, star}});
    AddAlternative(star, {});
    out->push_back({Symbol::Kind::kRule, star});
    return OkStatus();
  }
  if (max == min) return OkStatus();
  // x{0,k}: O_k ::= x O_(k-1) | "", O_1 ::= x | "".
  int32_t prev = -1;
  for (int i = 0; i < max - min; ++i) {
    if (deadline.Expired()) return deadline.Error();
    const int32_t o = NewHelperRule(base);
    Sequence seq = {s};
    if (prev >= 0) seq.push_back({Symbol::Kind::kRule, prev});
    AddAlternative(o, std::move(seq));
    AddAlternative(o, {});
    prev = o;
  }
  out->push_back({Symbol::Kind::kRule, prev});
  return OkStatus();
}

}  // namespace tachyon::grammar
