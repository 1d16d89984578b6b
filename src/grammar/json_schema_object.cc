// Objects and arrays of the JSON Schema converter.
//
// Objects: the declared properties in declaration order (required ones always, optional ones
// present or not), then the required keys that are not declared, then the free keys
// (patternProperties, or additionalProperties) in any number and order. The comma placement
// is encoded with two rules per property (`first` = nothing written yet, `after` = a comma comes
// before the next property), so the grammar is linear in the number of properties.
#include <regex>

#include "grammar/json_schema_internal.h"

namespace tachyon::grammar::schema_internal {
namespace {

bool IsFalse(const Json& s) {
  return s.is_boolean() && !s.get<bool>();
}

struct Trie {
  std::map<uint32_t, Trie> kids;
  bool terminal = false;
};

Result<int64_t> Count(const Json& s, const char* key, int64_t dflt, const std::string& where) {
  if (!s.contains(key)) return dflt;
  const Json& v = s[key];
  if (v.is_number_float() && v.get<double>() >= 0 &&
      v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>()))) {
    return static_cast<int64_t>(v.get<double>());
  }
  if (!v.is_number_integer() || v.get<int64_t>() < 0) {
    return Refuse(key, where, "not a non-negative integer");
  }
  if (v.get<int64_t>() > 100000) return Refuse(key, where, "above 100000");
  return v.get<int64_t>();
}

}  // namespace

// A JSON string (with quotes) whose decoded value is none of `names`, built over the trie of the
// names: at each node the string may end (unless a name ends there), continue with a child, or
// leave the trie with any other character. Characters along the trie are written as a
// well-formed encoder writes them (no \u escapes of plain characters).
class ObjectBuilder {
 public:
  explicit ObjectBuilder(Converter* c) : c_(c) {}

  std::string KeyNotIn(const std::vector<std::string>& names) {
    if (names.empty()) return c_->StringRule();
    Trie root;
    for (const std::string& n : names) {
      Trie* t = &root;
      for (uint32_t cp : DecodeUtf8(n)) t = &t->kids[cp];
      t->terminal = true;
    }
    return c_->AddRule("key-other", "\"\\\"\" " + Node(root));
  }

 private:
  std::string Node(const Trie& t) {
    const std::string quote = "\"\\\"\"";
    std::vector<std::string> alts;
    if (!t.terminal) alts.push_back(quote);
    CodeRanges others = {{0, 0x10FFFF}};
    CodeRanges taken;
    for (const auto& [cp, kid] : t.kids) {
      alts.push_back(JsonCharsExpr({{cp, cp}}) + " " + Node(kid));
      taken.emplace_back(cp, cp);
    }
    // Complement of the children.
    CodeRanges rest;
    uint32_t next = 0;
    for (auto [a, b] : taken) {
      if (a > next) rest.emplace_back(next, a - 1);
      next = b + 1;
    }
    if (next <= 0x10FFFF) rest.emplace_back(next, 0x10FFFF);
    const std::string leave = JsonCharsExpr(rest);
    if (!leave.empty()) {
      alts.push_back(leave + " " + c_->AddRule("str-tail", c_->CharRule() + "* " + quote));
    }
    std::string body;
    for (const auto& a : alts) body += (body.empty() ? "" : " | ") + a;
    return c_->AddRule("key", body);
  }

  Converter* c_;
};

Result<std::string> Converter::ObjectExpr(const Json& s, const std::string& where, int depth) {
  const std::string w = Ws();
  const Json empty = Json::object();
  const Json& props = s.contains("properties") ? s["properties"] : empty;
  if (!props.is_object()) return Refuse("properties", where, "not an object");
  std::vector<std::string> required;
  if (s.contains("required")) {
    if (!s["required"].is_array()) return Refuse("required", where, "not an array");
    for (const Json& r : s["required"]) {
      if (!r.is_string()) return Refuse("required", where, "not an array of strings");
      if (std::find(required.begin(), required.end(), r) == required.end()) {
        required.push_back(r.get<std::string>());
      }
    }
  }
  const bool add_explicit = s.contains("additionalProperties");
  const Json add =
      add_explicit ? s["additionalProperties"] : Json(options_.additional_properties_default);
  const Json& pats = s.contains("patternProperties") ? s["patternProperties"] : empty;
  if (!pats.is_object()) return Refuse("patternProperties", where, "not an object");

  std::optional<std::regex> pattern;
  if (!pats.empty()) {
    if (pats.size() > 1) return Refuse("patternProperties", where, "more than one pattern");
    if (add_explicit && !IsFalse(add)) {
      return Refuse("patternProperties", where, "with additionalProperties other than false");
    }
    try {
      pattern.emplace(pats.begin().key(), std::regex::ECMAScript);
    } catch (const std::regex_error&) {
      return Refuse("patternProperties", where, "pattern not understood");
    }
  }
  auto matches = [&](const std::string& k) { return pattern && std::regex_search(k, *pattern); };

  struct Entry {
    std::string name;
    const Json* schema;
    std::string where;
    bool required;
  };
  std::vector<Entry> entries;
  std::vector<std::string> names;
  const Json any = Json(true);
  for (const auto& [k, v] : props.items()) {
    const bool req = std::find(required.begin(), required.end(), k) != required.end();
    if (matches(k)) {
      return Refuse("patternProperties", where, "pattern matches declared property '" + k + "'");
    }
    names.push_back(k);
    if (IsFalse(v)) {
      if (req) return Unsatisfiable("required property '" + k + "' (schema false)", where);
      continue;
    }
    entries.push_back({k, &v, where + "/properties/" + PointerToken(k), req});
  }
  for (const std::string& k : required) {
    if (props.contains(k)) continue;
    names.push_back(k);
    if (matches(k)) {
      entries.push_back({k, &pats.begin().value(), where + "/patternProperties", true});
    } else if (add_explicit && IsFalse(add)) {
      return Unsatisfiable("required property '" + k + "' beside additionalProperties false",
                           where);
    } else {
      entries.push_back({k, add_explicit ? &s["additionalProperties"] : &any,
                         where + "/additionalProperties", true});
    }
  }

  // Values; an optional property whose schema admits no value is left out.
  std::vector<std::string> values;
  {
    std::vector<Entry> kept;
    for (Entry& e : entries) {
      Result<std::string> v = Visit(*e.schema, e.where, depth + 1);
      if (!v.ok() && IsUnsatisfiable(v.status()) && !e.required) continue;
      ASSIGN_OR_RETURN(std::string value, std::move(v));
      kept.push_back(e);
      values.push_back(std::move(value));
    }
    entries = std::move(kept);
  }

  // Free keys.
  std::string free_kv;
  if (pattern) {
    const std::string key_where = where + "/patternProperties/" + PointerToken(pats.begin().key());
    auto content = RegexToJsonContent(pats.begin().key(), 0, -1, CharRule());
    if (!content.ok()) return Refuse("patternProperties", where, content.status().message());
    const std::string key = AddRule("pkey", "\"\\\"\" " + *content + " \"\\\"\"");
    Result<std::string> value = Visit(pats.begin().value(), key_where, depth + 1);
    if (!value.ok() && !IsUnsatisfiable(value.status())) return value.status();
    if (value.ok()) free_kv = AddRule("pkv", key + " \":\"" + w + *value);
  } else if (!IsFalse(add)) {
    ObjectBuilder b(this);
    const std::string key = b.KeyNotIn(names);
    Result<std::string> value = Visit(add, where + "/additionalProperties", depth + 1);
    if (!value.ok() && !IsUnsatisfiable(value.status())) return value.status();
    if (value.ok()) free_kv = AddRule("akv", key + " \":\"" + w + *value);
  }

  ASSIGN_OR_RETURN(int64_t min_p, Count(s, "minProperties", 0, where));
  ASSIGN_OR_RETURN(int64_t max_p, Count(s, "maxProperties", -1, where));
  int64_t n_req = 0;
  for (const Entry& e : entries) n_req += e.required;
  const auto n = static_cast<int64_t>(entries.size());
  if (max_p == 0 || (max_p >= 0 && n == 0 && max_p < min_p)) free_kv.clear();
  if (max_p >= 0 && max_p < n_req) {
    return Unsatisfiable("maxProperties below the required properties", where);
  }
  if (free_kv.empty()) {
    if (min_p > n) return Unsatisfiable("minProperties", where);
    if (min_p > std::max<int64_t>(n_req, 1)) {
      return Refuse("minProperties", where, "above the required properties");
    }
    if (max_p >= 0 && max_p < n) return Refuse("maxProperties", where, "below the properties");
  } else if (n == 0) {
    if (min_p > 1) return Refuse("minProperties", where, "above 1 for free keys");
  } else {
    if (min_p > std::max<int64_t>(n_req, 1)) {
      return Refuse("minProperties", where, "above the required properties");
    }
    if (max_p >= 0) return Refuse("maxProperties", where, "with properties and free keys");
  }

  // after[i]: properties i.. once something was written (each with its comma); then free keys.
  std::string free_tail;
  if (!free_kv.empty()) {
    const int64_t lo = n == 0 ? std::max<int64_t>(0, min_p - 1) : 0;
    const int64_t hi = (n == 0 && max_p > 0) ? max_p - 1 : -1;
    if (hi != 0) free_tail = "(\",\"" + w + free_kv + ")" + RepeatSuffix(lo, hi);
  }
  std::vector<std::string> kv(n);
  for (int64_t i = 0; i < n; ++i) {
    kv[i] = Literal(JsonText(Json(entries[i].name))) + " \":\"" + w + values[i];
  }
  std::vector<std::string> after(n + 1);
  after[n] = free_tail.empty() ? "" : AddRule("more", free_tail);
  for (int64_t i = n - 1; i >= 0; --i) {
    std::string item = "\",\"" + w + kv[i];
    std::string body = entries[i].required ? item : "(" + item + ")?";
    if (!after[i + 1].empty()) body += " " + after[i + 1];
    after[i] = AddRule("after-" + entries[i].name, body);
  }
  // first[i]: non-empty content starting at property i with nothing written yet.
  std::string first = free_kv.empty() ? "" : free_kv + (after[n].empty() ? "" : " " + after[n]);
  for (int64_t i = n - 1; i >= 0; --i) {
    std::string here = kv[i] + (after[i + 1].empty() ? "" : " " + after[i + 1]);
    if (!entries[i].required && !first.empty()) here += " | " + first;
    first = AddRule("first-" + entries[i].name, here);
  }
  const bool nullable = n_req == 0 && min_p == 0;
  std::string body;
  if (first.empty()) {
    body = "\"{\"" + w + "\"}\"";
  } else if (nullable) {
    body = "\"{\"" + w + "(" + first + w + ")? \"}\"";
  } else {
    body = "\"{\"" + w + first + w + "\"}\"";
  }
  return AddRule(where.substr(where.find_last_of('/') + 1) + "-object", body);
}

Result<std::string> Converter::ArrayExpr(const Json& s, const std::string& where, int depth) {
  const std::string w = Ws();
  std::vector<const Json*> prefix;
  std::vector<std::string> prefix_where;
  const Json any = Json(true);
  const Json* rest = &any;
  std::string rest_where = where + "/items";
  if (s.contains("prefixItems")) {
    if (!s["prefixItems"].is_array()) return Refuse("prefixItems", where, "not an array");
    for (size_t i = 0; i < s["prefixItems"].size(); ++i) {
      prefix.push_back(&s["prefixItems"][i]);
      prefix_where.push_back(where + "/prefixItems/" + std::to_string(i));
    }
    if (s.contains("items")) rest = &s["items"];
  } else if (s.contains("items") && s["items"].is_array()) {
    for (size_t i = 0; i < s["items"].size(); ++i) {
      prefix.push_back(&s["items"][i]);
      prefix_where.push_back(where + "/items/" + std::to_string(i));
    }
    if (s.contains("additionalItems")) {
      rest = &s["additionalItems"];
      rest_where = where + "/additionalItems";
    }
  } else if (s.contains("items")) {
    rest = &s["items"];
  }
  ASSIGN_OR_RETURN(int64_t min, Count(s, "minItems", 0, where));
  ASSIGN_OR_RETURN(int64_t max, Count(s, "maxItems", -1, where));
  // Item schemas that admit no value end the array before them.
  auto k = static_cast<int64_t>(prefix.size());
  std::vector<std::string> items;
  for (int64_t i = 0; i < k; ++i) {
    Result<std::string> e = Visit(*prefix[i], prefix_where[i], depth + 1);
    if (!e.ok() && !IsUnsatisfiable(e.status())) return e.status();
    if (!e.ok()) {
      k = i;
      max = max < 0 ? i : std::min(max, i);
      rest = nullptr;
      break;
    }
    items.push_back(*e);
  }
  prefix.resize(k);
  std::string rest_expr;
  if (rest) {
    Result<std::string> e = Visit(*rest, rest_where, depth + 1);
    if (!e.ok() && !IsUnsatisfiable(e.status())) return e.status();
    if (e.ok()) {
      rest_expr = *e;
    } else {
      rest = nullptr;
    }
  }
  if (!rest) max = max < 0 ? k : std::min(max, k);
  if (max >= 0 && min > max) {
    return Unsatisfiable("minItems/maxItems", where);
  }
  if (max == 0) return AddRule("empty-array", "\"[\"" + w + "\"]\"");
  const int64_t used = max >= 0 ? std::min(k, max) : k;
  if (max >= 0 && max <= k) rest_expr.clear();
  std::string body;
  if (k == 0) {
    const std::string more = "(\",\"" + w + rest_expr + ")" +
                             RepeatSuffix(std::max<int64_t>(0, min - 1), max < 0 ? -1 : max - 1);
    body = rest_expr + (max == 1 ? "" : " " + more);
  } else {
    items.resize(used);
    // Items after the prefix, once all k were written.
    std::string tail;
    if (used == k && !rest_expr.empty()) {
      const int64_t lo = std::max<int64_t>(0, min - k);
      const int64_t hi = max < 0 ? -1 : max - k;
      tail = "(\",\"" + w + rest_expr + ")" + RepeatSuffix(lo, hi);
    }
    for (int64_t i = used - 1; i >= 1; --i) {
      std::string seq = "\",\"" + w + items[i] + (tail.empty() ? "" : " " + tail);
      tail = "(" + seq + ")" + (i >= min ? "?" : "");
    }
    body = items[0] + (tail.empty() ? "" : " " + tail);
  }
  const std::string inner = AddRule("items", body);
  if (min == 0) return AddRule("array", "\"[\"" + w + "(" + inner + w + ")? \"]\"");
  return AddRule("array", "\"[\"" + w + inner + w + "\"]\"");
}

}  // namespace tachyon::grammar::schema_internal
