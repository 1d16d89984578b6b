// JSON Schema -> GBNF: entry points, keyword dispatch, $ref, enum/const, anyOf/oneOf, scalars.
// Objects and arrays: json_schema_object.cc; allOf merging: json_schema_merge.cc.
#include "grammar/json_schema.h"

#include <algorithm>
#include <cctype>
#include <unordered_set>

#include "grammar/json_schema_internal.h"

namespace tachyon::grammar {
namespace schema_internal {
namespace {

const std::set<std::string, std::less<>> kAnnotations = {"title",
                                                         "description",
                                                         "default",
                                                         "examples",
                                                         "example",
                                                         "$schema",
                                                         "$id",
                                                         "id",
                                                         "$comment",
                                                         "deprecated",
                                                         "readOnly",
                                                         "writeOnly",
                                                         "contentMediaType",
                                                         "contentEncoding",
                                                         "contentSchema",
                                                         "$defs",
                                                         "definitions",
                                                         "$anchor",
                                                         "$dynamicAnchor",
                                                         "$vocabulary",
                                                         "then",
                                                         "else"};
const std::set<std::string, std::less<>> kAssertions = {"type",
                                                        "enum",
                                                        "const",
                                                        "properties",
                                                        "required",
                                                        "additionalProperties",
                                                        "patternProperties",
                                                        "minProperties",
                                                        "maxProperties",
                                                        "items",
                                                        "prefixItems",
                                                        "additionalItems",
                                                        "minItems",
                                                        "maxItems",
                                                        "anyOf",
                                                        "oneOf",
                                                        "allOf",
                                                        "$ref",
                                                        "format",
                                                        "pattern",
                                                        "minLength",
                                                        "maxLength",
                                                        "minimum",
                                                        "maximum",
                                                        "exclusiveMinimum",
                                                        "exclusiveMaximum"};
const std::set<std::string, std::less<>> kUnsupported = {"not",
                                                         "if",
                                                         "dependencies",
                                                         "dependentRequired",
                                                         "dependentSchemas",
                                                         "propertyNames",
                                                         "contains",
                                                         "minContains",
                                                         "maxContains",
                                                         "unevaluatedProperties",
                                                         "unevaluatedItems",
                                                         "multipleOf",
                                                         "$dynamicRef",
                                                         "$recursiveRef"};

std::string Sanitize(std::string_view hint) {
  std::string out;
  for (char c : hint) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u)) {
      out.push_back(static_cast<char>(std::tolower(u)));
    } else if (!out.empty() && out.back() != '-') {
      out.push_back('-');
    }
    if (out.size() >= 24) break;
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  // No '-' before a digit: the compiler names its helper rules "<rule>-<n>".
  std::string clean;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == '-' && i + 1 < out.size() &&
        std::isdigit(static_cast<unsigned char>(out[i + 1]))) {
      continue;
    }
    clean.push_back(out[i]);
  }
  return clean.empty() || std::isdigit(static_cast<unsigned char>(clean[0])) ? "r" + clean : clean;
}

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// The subschema whose $anchor (or draft-4 id "#name") is `name`, searched depth-first.
const Json* FindAnchor(const Json& s, const std::string& name, int depth) {
  if (depth > 64) return nullptr;
  if (s.is_object()) {
    auto a = s.find("$anchor");
    if (a != s.end() && a->is_string() && *a == name) return &s;
    for (const char* idk : {"$id", "id"}) {
      auto i = s.find(idk);
      if (i != s.end() && i->is_string() && *i == "#" + name) return &s;
    }
  }
  if (s.is_object() || s.is_array()) {
    for (const auto& v : s) {
      if (const Json* f = FindAnchor(v, name, depth + 1)) return f;
    }
  }
  return nullptr;
}

bool TypeMatches(const std::string& type, const Json& v) {
  if (type == "null") return v.is_null();
  if (type == "boolean") return v.is_boolean();
  if (type == "string") return v.is_string();
  if (type == "array") return v.is_array();
  if (type == "object") return v.is_object();
  if (type == "number") return v.is_number();
  if (type == "integer") {
    return v.is_number_integer() ||
           (v.is_number_float() &&
            v.get<double>() == static_cast<double>(static_cast<long long>(v.get<double>())));
  }
  return false;
}

}  // namespace

std::vector<std::string> InferTypes(const Json& s) {
  std::vector<std::string> types;
  if (!s.is_object()) return types;
  auto has = [&](std::initializer_list<const char*> keys) {
    return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return s.contains(k); });
  };
  if (has({"properties", "required", "additionalProperties", "patternProperties", "minProperties",
           "maxProperties"})) {
    types.push_back("object");
  }
  if (has({"items", "prefixItems", "additionalItems", "minItems", "maxItems"})) {
    types.push_back("array");
  }
  if (has({"minLength", "maxLength", "pattern"})) types.push_back("string");
  if (has({"format"}) && types.empty()) types.push_back("string");
  if (has({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) {
    types.push_back("number");
  }
  return types;
}

bool IsAnnotation(std::string_view key) {
  return kAnnotations.count(key) > 0;
}
bool IsAssertion(std::string_view key) {
  return kAssertions.count(key) > 0;
}
bool IsUnsupported(std::string_view key, const Json& value) {
  if (key == "uniqueItems") return value.is_boolean() && value.get<bool>();
  return kUnsupported.count(key) > 0;
}

bool HasAssertionsExcept(const Json& s, std::initializer_list<std::string_view> except) {
  if (!s.is_object()) return false;
  for (const auto& [k, v] : s.items()) {
    if (!IsAssertion(k) && !IsUnsupported(k, v)) continue;
    if (std::find(except.begin(), except.end(), k) == except.end()) return true;
  }
  return false;
}

Status Refuse(std::string_view keyword, const std::string& where, std::string_view why) {
  std::string m = "unsupported JSON Schema keyword '" + std::string(keyword) + "' at " +
                  (where.empty() ? std::string("/") : where);
  if (!why.empty()) m += ": " + std::string(why);
  return InvalidArgument(std::move(m));
}

Status Unsatisfiable(std::string_view what, const std::string& where) {
  return Status(
      StatusCode::kNotFound,
      std::string(what) + " at " + (where.empty() ? std::string("/") : where) + " admits no value");
}
bool IsUnsatisfiable(const Status& s) {
  return s.code() == StatusCode::kNotFound;
}

// ---- rules ----

Status Converter::CheckBudget() {
  if (std::chrono::steady_clock::now() > options_.deadline) {
    return InvalidArgument("JSON Schema conversion exceeded the compile budget");
  }
  if (bytes_ > options_.max_grammar_bytes) {
    return InvalidArgument("JSON Schema grammar larger than " +
                           std::to_string(options_.max_grammar_bytes) + " bytes");
  }
  return OkStatus();
}

std::string Converter::NewName(std::string_view hint) {
  if (names_.empty()) {
    for (const char* r : {"root", "ws", "char", "string", "str-tail", "number", "integer", "value",
                          "any-object", "any-array"}) {
      names_.insert(r);
    }
  }
  std::string base = Sanitize(hint);
  std::string name = base;
  for (int i = 2; names_.count(name); ++i) name = base + std::to_string(i);
  names_.insert(name);
  return name;
}

void Converter::Define(const std::string& name, std::string body) {
  bytes_ += name.size() + body.size() + 6;
  rules_.emplace_back(name, std::move(body));
}

std::string Converter::AddRule(std::string_view hint, std::string body) {
  auto it = by_body_.find(body);
  if (it != by_body_.end()) return it->second;
  std::string name = NewName(hint);
  by_body_.emplace(body, name);
  Define(name, std::move(body));
  return name;
}

std::string Converter::Ws() {
  if (options_.max_whitespace <= 0) return " ";
  if (!shared_.count("ws")) {
    shared_["ws"] = "ws";
    Define("ws", "[ \\t\\n]" + RepeatSuffix(0, options_.max_whitespace));
  }
  return " ws ";
}

std::string Converter::CharRule() {
  if (!shared_.count("char")) {
    shared_["char"] = "char";
    Define("char",
           "[^\\x22\\x5C\\x00-\\x1F] | \"\\\\\" ([\\x22\\x5C/bfnrt] | \"u\" "
           "([0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}))");
  }
  return "char";
}

std::string Converter::StringRule() {
  if (!shared_.count("string")) {
    const std::string c = CharRule();
    shared_["string"] = "string";
    Define("string", "\"\\\"\" " + c + "* \"\\\"\"");
  }
  return "string";
}

std::string Converter::NumberRule() {
  if (!shared_.count("number")) {
    shared_["number"] = "number";
    Define("number", "\"-\"? (\"0\" | [1-9] [0-9]*) (\".\" [0-9]+)? ([eE] [-+]? [0-9]+)?");
  }
  return "number";
}

std::string Converter::IntegerRule() {
  if (!shared_.count("integer")) {
    shared_["integer"] = "integer";
    Define("integer", "\"-\"? (\"0\" | [1-9] [0-9]*)");
  }
  return "integer";
}

std::string Converter::ValueRule() {
  if (!shared_.count("value")) {
    shared_["value"] = "value";
    Define("value", "any-object | any-array | " + StringRule() + " | " + NumberRule() +
                        " | \"true\" | \"false\" | \"null\"");
    AnyObjectRule();
    AnyArrayRule();
  }
  return "value";
}

std::string Converter::AnyObjectRule() {
  if (!shared_.count("any-object")) {
    shared_["any-object"] = "any-object";
    const std::string w = Ws();
    const std::string s = StringRule();
    const std::string kv = s + " \":\"" + w + "value";
    Define("any-object", "\"{\"" + w + "(" + kv + " (\",\"" + w + kv + ")*" + w + ")? \"}\"");
    ValueRule();
  }
  return "any-object";
}

std::string Converter::AnyArrayRule() {
  if (!shared_.count("any-array")) {
    shared_["any-array"] = "any-array";
    const std::string w = Ws();
    Define("any-array", "\"[\"" + w + "(value (\",\"" + w + "value)*" + w + ")? \"]\"");
    ValueRule();
  }
  return "any-array";
}

std::string Converter::AnyObjectGrammar() {
  std::string name = AnyObjectRule();
  std::string out = "root ::= " + name + "\n";
  for (const auto& [n, body] : rules_) out += n + " ::= " + body + "\n";
  return out;
}

Result<std::string> Converter::Run() {
  Result<std::string> top = Visit(root_, "", 0);
  if (!top.ok()) {
    if (IsUnsatisfiable(top.status())) return InvalidArgument(top.status().message());
    return top.status();
  }
  std::string expr = *top;
  RETURN_IF_ERROR(CheckBudget());
  std::string out = "root ::= " + expr + "\n";
  for (const auto& [n, body] : rules_) out += n + " ::= " + body + "\n";
  return out;
}

// ---- dispatch ----

Result<std::string> Converter::Visit(const Json& s, const std::string& where, int depth) {
  RETURN_IF_ERROR(CheckBudget());
  if (depth > 64) return Refuse("$ref/allOf", where, "nested deeper than 64");
  if (s.is_boolean()) {
    if (s.get<bool>()) return ValueRule();
    return Unsatisfiable("schema false", where);
  }
  if (!s.is_object()) {
    return InvalidArgument("schema at " + (where.empty() ? "/" : where) +
                           " is neither an object nor a boolean");
  }
  for (const auto& [k, v] : s.items()) {
    if (IsUnsupported(k, v)) return Refuse(k, where);
  }
  if (s.contains("$ref")) {
    const Json& ref = s["$ref"];
    if (!ref.is_string()) return Refuse("$ref", where, "not a string");
    if (!HasAssertionsExcept(s, {"$ref"})) return VisitRef(ref.get<std::string>(), where, depth);
    // Keywords beside $ref: both apply (draft 2019+; tighter than older drafts, which ignore
    // them).
    Json rest = s;
    rest.erase("$ref");
    Json all = rest.contains("allOf") ? rest["allOf"] : Json::array();
    if (!all.is_array()) return Refuse("allOf", where, "not an array");
    all.push_back(Json{{"$ref", ref}});
    rest["allOf"] = std::move(all);
    return Visit(rest, where, depth + 1);
  }
  if (s.contains("allOf")) {
    ASSIGN_OR_RETURN(Json merged, Deref(s, where, depth));
    return VisitMerged(merged, where + "/allOf", depth + 1);
  }
  if (s.contains("anyOf") || s.contains("oneOf")) return VisitAlternatives(s, where, depth);
  if (s.contains("enum") || s.contains("const")) return VisitEnum(s, where);
  return VisitTyped(s, where, depth);
}

Result<const Json*> Converter::Resolve(const std::string& ref, const std::string& where) {
  std::string r = ref;
  // A reference through the root's own id ("http://x/schema#/definitions/a").
  for (const char* idk : {"$id", "id"}) {
    if (!root_.is_object()) break;
    auto it = root_.find(idk);
    if (it == root_.end() || !it->is_string()) continue;
    std::string id = it->get<std::string>();
    if (!id.empty() && id.back() == '#') id.pop_back();
    if (!id.empty() && r.compare(0, id.size(), id) == 0 && r.size() > id.size() &&
        r[id.size()] == '#') {
      r = r.substr(id.size());
    } else if (!id.empty() && r == id) {
      r = "#";
    }
  }
  if (r == "#" || r.empty()) return &root_;
  if (r[0] != '#') return Refuse("$ref", where, "reference '" + ref + "' outside the document");
  if (r.size() > 1 && r[1] != '/') {
    const Json* a = FindAnchor(root_, PercentDecode(r.substr(1)), 0);
    if (!a) return Refuse("$ref", where, "anchor '" + ref + "' not found");
    return a;
  }
  try {
    Json::json_pointer p(PercentDecode(r.substr(1)));
    if (!root_.contains(p)) return Refuse("$ref", where, "'" + ref + "' does not resolve");
    return &root_.at(p);
  } catch (const std::exception& e) {
    return Refuse("$ref", where, "bad JSON pointer '" + ref + "'");
  }
}

Result<std::string> Converter::VisitRef(const std::string& ref, const std::string& where,
                                        int depth) {
  ASSIGN_OR_RETURN(const Json* target, Resolve(ref, where));
  const std::string key = std::to_string(reinterpret_cast<uintptr_t>(target));
  auto it = ref_rules_.find(key);
  if (it != ref_rules_.end()) return it->second;
  const size_t slash = ref.find_last_of("/#");
  std::string name = NewName(slash == std::string::npos ? ref : ref.substr(slash + 1));
  const size_t mark = rules_.size();
  ref_rules_.emplace(key, name);
  std::string target_where = ref.size() > 1 && ref[0] == '#' ? ref.substr(1) : ref;
  Result<std::string> expr = Visit(*target, target_where, depth + 1);
  if (!expr.ok()) {
    ForgetSince(mark, name);  // an unsatisfiable target may be dropped by the caller
    return expr.status();
  }
  Define(name, std::move(expr).value());
  return name;
}

Result<std::string> Converter::VisitMerged(const Json& s, const std::string& where, int depth) {
  if (!s.is_object()) return Visit(s, where, depth);
  const std::string key = "m:" + JsonText(s);
  auto it = ref_rules_.find(key);
  if (it != ref_rules_.end()) return it->second;
  std::string name = NewName(where.substr(where.find_last_of('/') + 1) + "-m");
  const size_t mark = rules_.size();
  ref_rules_.emplace(key, name);
  Result<std::string> expr = Visit(s, where, depth);
  if (!expr.ok()) {
    ForgetSince(mark, name);
    return expr.status();
  }
  Define(name, std::move(expr).value());
  return name;
}

void Converter::ForgetSince(size_t mark, const std::string& reserved) {
  std::set<std::string> gone = {reserved};
  for (size_t i = mark; i < rules_.size(); ++i) gone.insert(rules_[i].first);
  rules_.resize(mark);
  for (auto it = by_body_.begin(); it != by_body_.end();) {
    it = gone.count(it->second) ? by_body_.erase(it) : std::next(it);
  }
  for (auto it = ref_rules_.begin(); it != ref_rules_.end();) {
    it = gone.count(it->second) ? ref_rules_.erase(it) : std::next(it);
  }
  for (auto it = shared_.begin(); it != shared_.end();) {
    it = gone.count(it->second) ? shared_.erase(it) : std::next(it);
  }
}

Result<std::string> Converter::VisitEnum(const Json& s, const std::string& where) {
  for (const auto& [k, v] : s.items()) {
    if ((IsAssertion(k) || IsUnsupported(k, v)) &&
        !(k == "enum" || k == "const" || k == "type" || k == "minLength" || k == "maxLength" ||
          k == "minimum" || k == "maximum")) {
      return Refuse(k, where, "alongside enum/const");
    }
  }
  std::vector<Json> values;
  if (s.contains("enum")) {
    if (!s["enum"].is_array()) return Refuse("enum", where, "not an array");
    for (const Json& v : s["enum"]) values.push_back(v);
  }
  if (s.contains("const")) {
    if (s.contains("enum") && std::find(values.begin(), values.end(), s["const"]) == values.end()) {
      values.clear();
    } else {
      values = {s["const"]};
    }
  }
  std::vector<std::string> types;
  if (s.contains("type")) {
    const Json& t = s["type"];
    if (t.is_string()) types.push_back(t.get<std::string>());
    if (t.is_array()) {
      for (const Json& x : t) {
        if (x.is_string()) types.push_back(x.get<std::string>());
      }
    }
  }
  std::vector<std::string> alts;
  std::unordered_set<std::string> seen;  // alts, for a linear dedup
  for (const Json& v : values) {
    if (!types.empty() &&
        std::none_of(types.begin(), types.end(), [&](auto& t) { return TypeMatches(t, v); })) {
      continue;
    }
    if (v.is_string()) {
      const auto len = static_cast<int64_t>(DecodeUtf8(v.get<std::string>()).size());
      if (s.contains("minLength") && s["minLength"].is_number() && len < s["minLength"]) continue;
      if (s.contains("maxLength") && s["maxLength"].is_number() && len > s["maxLength"]) continue;
    }
    if (v.is_number()) {
      const double d = v.get<double>();
      if (s.contains("minimum") && s["minimum"].is_number() && d < s["minimum"].get<double>()) {
        continue;
      }
      if (s.contains("maximum") && s["maximum"].is_number() && d > s["maximum"].get<double>()) {
        continue;
      }
    }
    std::string lit = Literal(JsonText(v));
    if (seen.insert(lit).second) alts.push_back(std::move(lit));
    if (alts.size() % 1024 == 0) RETURN_IF_ERROR(CheckBudget());  // an enum may be long
  }
  if (alts.empty()) {
    return Unsatisfiable("enum/const", where);
  }
  std::string body;
  for (const auto& a : alts) body += (body.empty() ? "" : " | ") + a;
  return AddRule(where.substr(where.find_last_of('/') + 1) + "-enum", body);
}

Result<std::string> Converter::VisitAlternatives(const Json& s, const std::string& where,
                                                 int depth) {
  const bool one = s.contains("oneOf");
  const char* key = one ? "oneOf" : "anyOf";
  const Json& list = s[key];
  if (!list.is_array() || list.empty()) return Refuse(key, where, "not a non-empty array");
  Json rest = s;
  rest.erase(key);
  const bool has_rest = HasAssertionsExcept(rest, {});
  std::vector<Json> branches;
  std::vector<std::string> wheres;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string w = where + "/" + key + "/" + std::to_string(i);
    if (has_rest || one) {
      ASSIGN_OR_RETURN(Json b, Deref(list[i], w, depth + 1));
      if (has_rest) {
        ASSIGN_OR_RETURN(Json r, Deref(rest, where, depth + 1));
        ASSIGN_OR_RETURN(b, Merge(r, b, w, depth + 1));
      }
      branches.push_back(std::move(b));
    } else {
      branches.push_back(list[i]);
    }
    wheres.push_back(w);
  }
  if (one) {
    // Exactly one: no text generated for branch i may be valid under branch j as written.
    // Where that is not yet sure, branch i is narrowed (tighter, still valid) and checked again.
    const std::vector<Json> written = branches;
    for (size_t i = 0; i < branches.size(); ++i) {
      if (branches[i].is_boolean() && !branches[i].get<bool>()) continue;
      for (size_t j = 0; j < branches.size(); ++j) {
        if (j == i || (written[j].is_boolean() && !written[j].get<bool>())) continue;
        int tries = 0;
        while (!GenFails(branches[i], written[j], 0)) {
          if (++tries > 4 || !Tighten(&branches[i], written[j])) {
            return Refuse("oneOf", where,
                          "branches " + std::to_string(std::min(i, j)) + " and " +
                              std::to_string(std::max(i, j)) +
                              " may both match (exactly one cannot be enforced)");
          }
        }
      }
    }
  }
  std::vector<std::string> alts;
  for (size_t i = 0; i < branches.size(); ++i) {
    if (branches[i].is_boolean() && !branches[i].get<bool>()) continue;  // admits nothing
    Result<std::string> r = has_rest || one ? VisitMerged(branches[i], wheres[i], depth + 1)
                                            : Visit(branches[i], wheres[i], depth + 1);
    if (!r.ok() && IsUnsatisfiable(r.status())) continue;
    ASSIGN_OR_RETURN(std::string e, std::move(r));
    if (std::find(alts.begin(), alts.end(), e) == alts.end()) alts.push_back(std::move(e));
  }
  if (alts.empty()) {
    return Unsatisfiable(key, where);
  }
  if (alts.size() == 1) return alts[0];
  std::string body;
  for (const auto& a : alts) body += (body.empty() ? "" : " | ") + a;
  return AddRule(where.substr(where.find_last_of('/') + 1) + "-alt", body);
}

// ---- scalars ----

Result<std::string> Converter::VisitTyped(const Json& s, const std::string& where, int depth) {
  std::vector<std::string> types;
  if (s.contains("type")) {
    const Json& t = s["type"];
    if (t.is_string()) {
      types.push_back(t.get<std::string>());
    } else if (t.is_array()) {
      for (const Json& x : t) {
        if (!x.is_string()) return Refuse("type", where, "not a string");
        types.push_back(x.get<std::string>());
      }
    } else {
      return Refuse("type", where, "neither a string nor an array");
    }
    if (types.empty()) return Unsatisfiable("type []", where);
  } else {
    // No type: the types whose keywords the schema uses (docs/grammar.md), else any value.
    types = InferTypes(s);
    if (types.empty()) return ValueRule();
  }
  const bool has_number = std::find(types.begin(), types.end(), "number") != types.end();
  std::vector<std::string> alts;
  Status unsat;
  for (const std::string& t : types) {
    Result<std::string> r = TypeExpr(s, t, has_number, where, depth);
    if (!r.ok() && IsUnsatisfiable(r.status())) {
      unsat = r.status();  // this type admits nothing: the others remain
      continue;
    }
    ASSIGN_OR_RETURN(std::string e, std::move(r));
    if (e.empty()) continue;
    if (std::find(alts.begin(), alts.end(), e) == alts.end()) alts.push_back(std::move(e));
  }
  if (alts.empty()) return unsat.ok() ? Unsatisfiable("type", where) : unsat;
  if (alts.size() == 1) return alts[0];
  std::string body;
  for (const auto& a : alts) body += (body.empty() ? "" : " | ") + a;
  return AddRule(where.substr(where.find_last_of('/') + 1) + "-types", body);
}

Result<std::string> Converter::TypeExpr(const Json& s, const std::string& t, bool has_number,
                                        const std::string& where, int depth) {
  {
    std::string e;
    if (t == "null") {
      e = "\"null\"";
    } else if (t == "boolean") {
      e = "(\"true\" | \"false\")";
    } else if (t == "integer") {
      if (has_number) return std::string();  // covered by number
      ASSIGN_OR_RETURN(e, NumberExpr(s, where, true));
    } else if (t == "number") {
      ASSIGN_OR_RETURN(e, NumberExpr(s, where, false));
    } else if (t == "string") {
      ASSIGN_OR_RETURN(e, StringExpr(s, where));
    } else if (t == "array") {
      ASSIGN_OR_RETURN(e, ArrayExpr(s, where, depth));
    } else if (t == "object") {
      ASSIGN_OR_RETURN(e, ObjectExpr(s, where, depth));
    } else {
      return Refuse("type", where, "unknown type '" + t + "'");
    }
    return e;
  }
}

Result<std::string> Converter::NumberExpr(const Json& s, const std::string& where, bool integer) {
  Bound lo, hi;
  auto read = [&](const char* key, bool exclusive, bool lower) -> Status {
    if (!s.contains(key)) return OkStatus();
    ASSIGN_OR_RETURN(Bound b, ReadBound(s[key], exclusive, lower, integer, where + "/" + key));
    lo = lower ? Stricter(lo, b, true) : lo;
    hi = lower ? hi : Stricter(hi, b, false);
    return OkStatus();
  };
  // Draft 4: exclusiveMinimum/Maximum are booleans modifying minimum/maximum.
  const bool ex_min_bool = s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_boolean();
  const bool ex_max_bool = s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_boolean();
  RETURN_IF_ERROR(read("minimum", ex_min_bool && s["exclusiveMinimum"].get<bool>(), true));
  RETURN_IF_ERROR(read("maximum", ex_max_bool && s["exclusiveMaximum"].get<bool>(), false));
  if (!ex_min_bool) RETURN_IF_ERROR(read("exclusiveMinimum", true, true));
  if (!ex_max_bool) RETURN_IF_ERROR(read("exclusiveMaximum", true, false));
  if (!lo.present && !hi.present) return integer ? IntegerRule() : NumberRule();
  std::string e = integer ? IntegerRangeExpr(lo, hi) : NumberRangeExpr(lo, hi);
  if (e.empty()) {
    return Unsatisfiable("minimum/maximum", where);
  }
  return AddRule(integer ? "int-range" : "num-range", e);
}

Result<std::string> Converter::StringExpr(const Json& s, const std::string& where) {
  int64_t min_len = 0, max_len = -1;
  for (const char* k : {"minLength", "maxLength"}) {
    if (!s.contains(k)) continue;
    const Json& v = s[k];
    if (!v.is_number_integer() || v.get<int64_t>() < 0) {
      return Refuse(k, where, "not a non-negative integer");
    }
    (k[1] == 'i' ? min_len : max_len) = v.get<int64_t>();
  }
  if (max_len >= 0 && min_len > max_len) {
    return Unsatisfiable("minLength/maxLength", where);
  }
  if (max_len > 100000 || min_len > 100000) {
    return Refuse(max_len > 100000 ? "maxLength" : "minLength", where, "above 100000");
  }
  const std::string quote = "\"\\\"\"";
  if (s.contains("pattern")) {
    if (!s["pattern"].is_string()) return Refuse("pattern", where, "not a string");
    if (s.contains("format")) return Refuse("format", where, "together with pattern");
    auto content =
        RegexToJsonContent(s["pattern"].get<std::string>(), min_len, max_len, CharRule());
    if (!content.ok()) return Refuse("pattern", where, content.status().message());
    return AddRule("pattern", quote + " " + *content + " " + quote);
  }
  if (s.contains("format") && s["format"].is_string()) {
    const std::string f = s["format"].get<std::string>();
    ASSIGN_OR_RETURN(std::optional<std::string> content, FormatContentExpr(f, where));
    if (content) {
      if (min_len > 0 || max_len >= 0) {
        return Refuse(min_len > 0 ? "minLength" : "maxLength", where, "together with format");
      }
      return AddRule(f, quote + " " + *content + " " + quote);
    }
  }
  if (min_len == 0 && max_len < 0) return StringRule();
  return AddRule("string-len",
                 quote + " " + CharRule() + RepeatSuffix(min_len, max_len) + " " + quote);
}

}  // namespace schema_internal

Result<std::string> JsonSchemaToGbnf(std::string_view schema_json,
                                     const JsonSchemaOptions& options) {
  schema_internal::Json root;
  try {
    root = schema_internal::Json::parse(schema_json);
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("JSON Schema is not valid JSON: ") + e.what());
  }
  try {
    schema_internal::Converter c(root, options);
    return c.Run();
  } catch (const std::exception& e) {  // a nlohmann type error on an odd schema value
    return InvalidArgument(std::string("JSON Schema not understood: ") + e.what());
  }
}

std::string JsonObjectGbnf(const JsonSchemaOptions& options) {
  schema_internal::Json root;
  schema_internal::Converter c(root, options);
  return c.AnyObjectGrammar();
}

}  // namespace tachyon::grammar
