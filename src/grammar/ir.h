// The internal grammar IR shared by every front-end (GBNF, regex, choice, JSON Schema via GBNF).
//
// A grammar is a set of rules over BYTES: each rule is a list of alternatives, each alternative
// a sequence of symbols, a symbol either a byte set (one byte out of a 256-bit set) or a
// reference to a rule. Characters beyond ASCII are byte sequences (a character class becomes a
// helper rule whose alternatives are UTF-8 byte-range sequences, see utf8_ranges.h);
// repetitions become helper rules (x* -> R ::= x R | ""; small counts x{m,n} -> m copies then a
// chain of optional ones) or, for counts above kExpandUpTo, one counted repetition rule that the
// matcher runs with a counter (its stack node carries the iteration count). GrammarBuilder
// collects rules; Finish() checks and flattens them into a FlatGrammar, the form the matcher
// runs.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "util/status.h"

namespace tachyon::grammar {

struct ByteSet {
  uint64_t w[4] = {0, 0, 0, 0};
  bool Has(uint8_t b) const { return (w[b >> 6] >> (b & 63)) & 1; }
  void Set(uint8_t b) { w[b >> 6] |= uint64_t{1} << (b & 63); }
  void SetRange(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) Set(static_cast<uint8_t>(b));
  }
  bool Empty() const { return (w[0] | w[1] | w[2] | w[3]) == 0; }
  bool operator==(const ByteSet&) const = default;
};

// The compile budget: Expired() is cheap enough to call in every loop (it reads the clock only
// every 256 calls).
class Deadline {
 public:
  explicit Deadline(std::chrono::microseconds budget)
      : budget_(budget), end_(std::chrono::steady_clock::now() + budget) {}
  bool Expired() {
    if ((++calls_ & 255) != 0) return expired_;
    if (!expired_) expired_ = std::chrono::steady_clock::now() > end_;
    return expired_;
  }
  // The InvalidArgument that reports it.
  Status Error() const;

 private:
  std::chrono::microseconds budget_;
  std::chrono::steady_clock::time_point end_;
  uint32_t calls_ = 0;
  bool expired_ = false;
};

struct Symbol {
  enum class Kind : uint8_t { kBytes, kRule };
  Kind kind;
  int32_t index;  // byte set index or rule index
};
using Sequence = std::vector<Symbol>;

// Runnable form. Element positions index `elems`; every alternative's symbols are followed by
// a kEnd element. A counted repetition rule has one alternative [kRepeat, kEnd]: its stack node
// counts the finished iterations of the body rule; at count c the body may start again while
// c < max (max -1: unbounded, the count then saturates at min) and the rule may end once
// c >= min.
struct FlatGrammar {
  enum class Kind : uint8_t { kBytes, kRule, kEnd, kRepeat };
  struct Elem {
    Kind kind;
    int32_t arg;  // kBytes: index into sets; kRule: rule index; kRepeat: index into repeats
  };
  struct Repeat {
    int32_t rule;  // the body; -1 when it can never complete (then only the exit remains)
    int32_t min;
    int32_t max;    // -1: unbounded
    bool nullable;  // the body can match the empty string
  };
  std::vector<Elem> elems;
  std::vector<Repeat> repeats;
  std::vector<ByteSet> sets;
  std::vector<int32_t> alt_start;  // element position of each alternative's first element
  std::vector<int32_t> rule_alts;  // rule r's alternatives: alt_start[rule_alts[r], [r + 1])
  std::vector<std::string> rule_names;
  int32_t root = 0;
};

class GrammarBuilder {
 public:
  // Limits on what a grammar may grow to (beyond them Finish or the adders fail).
  static constexpr size_t kMaxSymbols = 4'000'000;
  static constexpr int kMaxRepeat = 100'000;
  // x{m,n} with n (or, unbounded, m) at most this is expanded into rule copies; above it, a
  // counted repetition rule.
  static constexpr int kExpandUpTo = 4;

  int32_t AddByteSet(const ByteSet& set);
  // The rule named `name`, created (undefined) on first use.
  int32_t RuleId(std::string_view name);
  // A new helper rule named base + "~" + a number (no GBNF rule name contains "~").
  int32_t NewHelperRule(std::string_view base);
  // Defines (or extends) rule r.
  void AddAlternative(int32_t rule, Sequence seq) { rules_[rule].alts.push_back(std::move(seq)); }
  bool defined(int32_t rule) const { return rules_[rule].defined; }
  // Marks rule r as defined; the location is for error messages.
  void MarkDefined(int32_t rule, std::string where);
  const std::string& defined_at(int32_t rule) const { return rules_[rule].where; }
  const std::string& name(int32_t rule) const { return rules_[rule].name; }
  size_t num_rules() const { return rules_.size(); }

  // Appends the bytes of `text` as byte-set symbols.
  void AppendLiteral(std::string_view text, Sequence* out);
  // Appends one character out of the code point ranges (sorted or not, inclusive; negated:
  // any code point outside them), as UTF-8 byte sequences. Surrogates never match.
  Status AppendCharClass(std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negated,
                         std::string_view base, Sequence* out);
  // x{min,max} (max -1: unbounded) appended to *out. `base` names helper rules.
  Status AppendRepeat(Sequence x, int min, int max, std::string_view base, Sequence* out,
                      Deadline& deadline);
  // A symbol standing for the alternatives (one helper rule unless a single one-symbol
  // sequence).
  Symbol Group(std::vector<Sequence> alts, std::string_view base);

  // Checks and flattens: every referenced rule must be defined (names of undefined ones in the
  // error), alternatives that can never match anything are dropped, the root must match
  // something, and left recursion (a rule reaching itself before consuming a byte, except as
  // the last symbol) is rejected by name. Only rules reachable from `root` are kept.
  Result<FlatGrammar> Finish(int32_t root, Deadline& deadline) const;

 private:
  struct Rule {
    std::string name;
    std::vector<Sequence> alts;
    bool defined = false;
    std::string where;
    // A counted repetition rule (rep_min >= 0): alts is one sequence, a reference to the body.
    int32_t rep_min = -1, rep_max = -1;
  };
  struct SetHash {
    size_t operator()(const ByteSet& s) const {
      return s.w[0] * 31 + s.w[1] * 17 + s.w[2] * 7 + s.w[3];
    }
  };
  std::vector<Rule> rules_;
  std::unordered_map<std::string, int32_t> rule_ids_;
  std::vector<ByteSet> sets_;
  std::unordered_map<ByteSet, int32_t, SetHash> set_ids_;
  size_t helpers_ = 0;
  size_t symbols_ = 0;
};

}  // namespace tachyon::grammar
