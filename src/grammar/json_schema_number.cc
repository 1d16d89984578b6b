// Numeric bounds of the JSON Schema converter: exact integer ranges as digit-string grammars,
// and JSON numbers between integer-valued bounds.
//
// Magnitudes are decimal digit strings without leading zeros, so bounds of any size (a double's
// 9.2e18 or 1e300) are handled exactly and the grammar stays linear in the number of digits.
#include <cmath>
#include <cstdio>

#include "grammar/json_schema_internal.h"

namespace tachyon::grammar::schema_internal {
namespace {

int CmpMag(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  return a.compare(b) < 0 ? -1 : (a == b ? 0 : 1);
}

std::string IncMag(std::string a) {
  int i = static_cast<int>(a.size()) - 1;
  while (i >= 0 && a[i] == '9') a[i--] = '0';
  if (i < 0) return "1" + a;
  ++a[i];
  return a;
}

// REQUIRES: a != "0".
std::string DecMag(std::string a) {
  int i = static_cast<int>(a.size()) - 1;
  while (a[i] == '0') a[i--] = '9';
  --a[i];
  size_t nz = a.find_first_not_of('0');
  return nz == std::string::npos ? "0" : a.substr(nz);
}

// Signed comparison of two present bounds (values only).
int CmpSigned(const Bound& a, const Bound& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  int c = CmpMag(a.digits, b.digits);
  return a.negative ? -c : c;
}

void AddOne(Bound* b, int delta) {
  if (b->digits == "0") {
    b->digits = "1";
    b->negative = delta < 0;
    return;
  }
  const bool away = (delta > 0) != b->negative;  // magnitude grows
  b->digits = away ? IncMag(b->digits) : DecMag(b->digits);
  if (b->digits == "0") b->negative = false;
}

std::string DigitClass(char lo, char hi) {
  if (lo == hi) return std::string("\"") + lo + "\"";
  if (lo == '0' && hi == '9') return "[0-9]";
  return std::string("[") + lo + "-" + hi + "]";
}

std::string AnyDigits(size_t n) {
  if (n == 0) return "";
  return "[0-9]" + RepeatSuffix(static_cast<int64_t>(n), static_cast<int64_t>(n));
}

std::string Join(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

// Digit strings of a's length between a and b. REQUIRES: same length, a <= b.
std::string SameLength(const std::string& a, const std::string& b) {
  if (a == b) return "\"" + a + "\"";
  size_t i = 0;
  while (a[i] == b[i]) ++i;
  const std::string prefix = i ? "\"" + a.substr(0, i) + "\" " : "";
  const size_t rest = a.size() - i - 1;
  if (rest == 0) return prefix + DigitClass(a[i], b[i]);
  const bool lo_full = a.find_first_not_of('0', i + 1) == std::string::npos;
  const bool hi_full = b.find_first_not_of('9', i + 1) == std::string::npos;
  const char start = lo_full ? a[i] : static_cast<char>(a[i] + 1);
  const char end = hi_full ? b[i] : static_cast<char>(b[i] - 1);
  std::vector<std::string> alts;
  if (!lo_full) {
    alts.push_back(std::string("\"") + a[i] + "\" " +
                   SameLength(a.substr(i + 1), std::string(rest, '9')));
  }
  if (start <= end) alts.push_back(DigitClass(start, end) + " " + AnyDigits(rest));
  if (!hi_full) {
    alts.push_back(std::string("\"") + b[i] + "\" " +
                   SameLength(std::string(rest, '0'), b.substr(i + 1)));
  }
  return prefix + Join(alts);
}

// Non-negative integers (digit strings) in [a, b]; b empty = unbounded. "" if empty.
std::string NonNegative(const std::string& a, const std::string& b) {
  if (!b.empty() && CmpMag(a, b) > 0) return "";
  std::vector<std::string> alts;
  const size_t la = a.size();
  const size_t lb = b.empty() ? la : b.size();
  for (size_t len = la; len <= lb; ++len) {
    const std::string low = len == la ? a : "1" + std::string(len - 1, '0');
    const std::string high = (!b.empty() && len == lb) ? b : std::string(len, '9');
    alts.push_back(SameLength(low, high));
  }
  if (b.empty()) alts.push_back("[1-9] [0-9]" + RepeatSuffix(static_cast<int64_t>(la), -1));
  return Join(alts);
}

const char kFrac[] = "(\".\" [0-9]+)";
const char kNonZeroFrac[] = "(\".\" [0-9]* [1-9] [0-9]*)";
const char kZeroFrac[] = "(\".\" \"0\"+)";
const char kExp[] = "([eE] [-+]? [0-9]+)";

// Magnitudes m (number text without sign) with a <= m (a < m if a_excl) and m <= b (m < b if
// b_excl; b empty = unbounded). REQUIRES: a is a magnitude.
std::string Magnitudes(const std::string& a, bool a_excl, const std::string& b, bool b_excl) {
  std::vector<std::string> alts;
  const bool exponent = a == "0" && b.empty();  // m * 10^e keeps the sign and nonzero-ness
  const std::string exp = exponent ? std::string(" ") + kExp + "?" : "";
  const std::string lo_int = a_excl ? IncMag(a) : a;
  std::string hi_int;  // b - 1, or unbounded
  bool int_part_possible = true;
  if (!b.empty()) {
    if (b == "0") {
      int_part_possible = false;
    } else {
      hi_int = DecMag(b);
    }
  }
  if (int_part_possible) {
    std::string ints = NonNegative(lo_int, hi_int);
    if (!ints.empty()) alts.push_back(ints + " " + kFrac + "?" + exp);
  }
  if (a_excl && (b.empty() || CmpMag(a, b) < 0)) {
    alts.push_back("\"" + a + "\" " + kNonZeroFrac + exp);
  }
  if (!b.empty() && !b_excl) {
    const int c = CmpMag(a, b);
    if (c < 0 || (c == 0 && !a_excl)) alts.push_back("\"" + b + "\" " + kZeroFrac + "?");
  }
  if (alts.empty()) return "";
  return Join(alts);
}

}  // namespace

Bound Stricter(const Bound& a, const Bound& b, bool lower) {
  if (!a.present) return b;
  if (!b.present) return a;
  const int c = CmpSigned(a, b);
  if (c == 0) return a.exclusive ? a : b;
  return (c > 0) == lower ? a : b;
}

std::string IntegerRangeExpr(const Bound& lo, const Bound& hi) {
  if (lo.present && hi.present && CmpSigned(lo, hi) > 0) return "";
  std::vector<std::string> alts;
  if (lo.present && !lo.negative) return NonNegative(lo.digits, hi.present ? hi.digits : "");
  if (hi.present && hi.negative) {
    std::string m = NonNegative(hi.digits, lo.present ? lo.digits : "");
    return m.empty() ? "" : "\"-\" " + m;
  }
  // Negative part (lo < 0 or unbounded), then 0..hi.
  alts.push_back("\"-\" " + NonNegative("1", lo.present ? lo.digits : ""));
  alts.push_back(NonNegative("0", hi.present ? hi.digits : ""));
  return Join(alts);
}

std::string NumberRangeExpr(const Bound& lo, const Bound& hi) {
  if (lo.present && hi.present) {
    const int c = CmpSigned(lo, hi);
    if (c > 0 || (c == 0 && (lo.exclusive || hi.exclusive))) return "";
  }
  std::vector<std::string> alts;
  // Negative numbers: magnitudes in (max(0, -hi), -lo].
  if (!lo.present || lo.negative) {
    std::string a = "0";
    bool a_excl = true;
    if (hi.present && hi.negative) {
      a = hi.digits;
      a_excl = hi.exclusive;
    }
    std::string m = Magnitudes(a, a_excl, lo.present ? lo.digits : "", lo.exclusive);
    if (!m.empty()) alts.push_back("\"-\" " + m);
  }
  // Non-negative numbers: [max(0, lo), hi].
  if (!hi.present || !hi.negative) {
    const bool lo_nonneg = lo.present && !lo.negative;
    const std::string a = lo_nonneg ? lo.digits : "0";
    const bool a_excl = lo_nonneg && lo.exclusive;
    std::string m = Magnitudes(a, a_excl, hi.present ? hi.digits : "", hi.exclusive);
    if (!m.empty()) alts.push_back(m);
  }
  if (alts.empty()) return "";
  return Join(alts);
}

Result<Bound> ReadBound(const Json& v, bool exclusive, bool lower, bool integer,
                        const std::string& where) {
  Bound b;
  b.present = true;
  b.exclusive = exclusive;
  if (v.is_number_unsigned()) {
    b.digits = std::to_string(v.get<uint64_t>());
  } else if (v.is_number_integer()) {
    const int64_t x = v.get<int64_t>();
    b.negative = x < 0;
    const uint64_t mag = x < 0 ? uint64_t{0} - static_cast<uint64_t>(x) : static_cast<uint64_t>(x);
    b.digits = std::to_string(mag);
  } else if (v.is_number_float()) {
    double d = v.get<double>();
    if (!std::isfinite(d)) return Refuse("minimum/maximum", where, "the bound is not finite");
    if (d != std::floor(d)) {
      if (!integer) return Refuse("minimum/maximum", where, "non-integer bound on a number");
      d = lower ? std::floor(d) : std::ceil(d);  // then made inclusive below
      b.exclusive = true;
    }
    b.negative = d < 0;
    char buf[400];
    std::snprintf(buf, sizeof(buf), "%.0f", std::fabs(d));
    b.digits = buf;
  } else {
    return Refuse("minimum/maximum", where, "the bound is not a number");
  }
  if (b.digits == "0") b.negative = false;
  if (integer && b.exclusive) {
    AddOne(&b, lower ? 1 : -1);
    b.exclusive = false;
  }
  return b;
}

}  // namespace tachyon::grammar::schema_internal
