// allOf for the JSON Schema converter: $ref resolution into plain schemas, exact merging of
// schemas (refusing what cannot be merged exactly), and the disjointness test behind oneOf.
#include <algorithm>
#include <set>

#include "grammar/json_schema_internal.h"

namespace tachyon::grammar::schema_internal {
namespace {

bool IsFalse(const Json& s) {
  return s.is_boolean() && !s.get<bool>();
}
bool IsTrue(const Json& s) {
  return (s.is_boolean() && s.get<bool>()) || (s.is_object() && s.empty());
}

// allOf of two subschemas, kept lazy (merged when visited).
Json Both(const Json& x, const Json& y) {
  if (IsFalse(x) || IsFalse(y)) return Json(false);
  if (IsTrue(x)) return y;
  if (IsTrue(y) || x == y) return x;
  return Json{{"allOf", Json::array({x, y})}};
}

std::vector<std::string> TypeList(const Json& t) {
  std::vector<std::string> out;
  if (t.is_string()) out.push_back(t.get<std::string>());
  if (t.is_array()) {
    for (const Json& x : t) {
      if (x.is_string()) out.push_back(x.get<std::string>());
    }
  }
  return out;
}

bool HasType(const std::vector<std::string>& ts, const std::string& t) {
  return std::find(ts.begin(), ts.end(), t) != ts.end();
}

// Values of enum/const, or nullopt.
std::optional<std::vector<Json>> Values(const Json& s) {
  if (!s.is_object()) return std::nullopt;
  if (s.contains("const")) return std::vector<Json>{s["const"]};
  if (s.contains("enum") && s["enum"].is_array()) {
    return std::vector<Json>(s["enum"].begin(), s["enum"].end());
  }
  return std::nullopt;
}

std::string TypeOf(const Json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

}  // namespace

Result<Json> Converter::Deref(const Json& s0, const std::string& where, int depth) {
  Json s = s0;
  for (int guard = 0;; ++guard) {
    RETURN_IF_ERROR(CheckBudget());
    if (depth + guard > 64) return Refuse("$ref/allOf", where, "nested deeper than 64");
    if (!s.is_object()) return s;
    if (s.contains("$ref")) {
      if (!s["$ref"].is_string()) return Refuse("$ref", where, "not a string");
      ASSIGN_OR_RETURN(const Json* target, Resolve(s["$ref"].get<std::string>(), where));
      Json rest = s;
      rest.erase("$ref");
      if (!HasAssertionsExcept(rest, {})) {
        s = *target;
        continue;
      }
      ASSIGN_OR_RETURN(Json t, Deref(*target, where, depth + guard + 1));
      ASSIGN_OR_RETURN(Json r, Deref(rest, where, depth + guard + 1));
      return Merge(r, t, where, depth + guard + 1);
    }
    if (s.contains("allOf")) {
      const Json& all = s["allOf"];
      if (!all.is_array()) return Refuse("allOf", where, "not an array");
      Json acc = s;
      acc.erase("allOf");
      for (size_t i = 0; i < all.size(); ++i) {
        const std::string w = where + "/allOf/" + std::to_string(i);
        ASSIGN_OR_RETURN(Json b, Deref(all[i], w, depth + guard + 1));
        ASSIGN_OR_RETURN(acc, Merge(acc, b, w, depth + guard + 1));
      }
      return acc;
    }
    return s;
  }
}

Result<Json> Converter::Merge(const Json& a, const Json& b, const std::string& where, int depth) {
  RETURN_IF_ERROR(CheckBudget());
  if (IsFalse(a) || IsFalse(b)) return Json(false);
  if (a.is_boolean()) return b;
  if (b.is_boolean()) return a;
  if (!a.is_object() || !b.is_object()) {
    return InvalidArgument("schema at " + where + " is neither an object nor a boolean");
  }
  Json r = a;
  auto max_of = [&](const char* k, bool larger) {
    const Json& x = a[k];
    const Json& y = b[k];
    if (!x.is_number() || !y.is_number()) return;
    r[k] = (x.get<double>() < y.get<double>()) == larger ? y : x;
  };
  for (const auto& [k, vb] : b.items()) {
    if (!IsAssertion(k) && !IsUnsupported(k, vb)) continue;  // annotations, unknown keywords
    if (k == "properties" || k == "additionalProperties") continue;  // below
    if (!a.contains(k)) {
      r[k] = vb;
      continue;
    }
    const Json& va = a[k];
    if (va == vb) continue;
    if (k == "type") {
      std::vector<std::string> ta = TypeList(va), tb = TypeList(vb), both;
      for (const auto& t : ta) {
        if (HasType(tb, t) || (t == "integer" && HasType(tb, "number"))) both.push_back(t);
        if (t == "number" && HasType(tb, "integer") && !HasType(both, "integer")) {
          both.push_back("integer");
        }
      }
      if (both.empty()) return Json(false);
      r[k] = both;
    } else if (k == "required") {
      Json req = va.is_array() ? va : Json::array();
      if (vb.is_array()) {
        std::set<Json> in_req(req.begin(), req.end());
        for (const Json& x : vb) {
          if (in_req.insert(x).second) req.push_back(x);
        }
      }
      r[k] = req;
    } else if (k == "items" || k == "additionalItems") {
      if (va.is_array() || vb.is_array()) {
        return Refuse("allOf", where, "merging two tuple '" + k + "'");
      }
      r[k] = Both(va, vb);
    } else if (k == "minLength" || k == "minItems" || k == "minProperties") {
      max_of(k.c_str(), true);
    } else if (k == "maxLength" || k == "maxItems" || k == "maxProperties") {
      max_of(k.c_str(), false);
    } else if ((k == "minimum" || k == "maximum") &&
               !(a.contains("exclusiveMinimum") || a.contains("exclusiveMaximum") ||
                 b.contains("exclusiveMinimum") || b.contains("exclusiveMaximum"))) {
      max_of(k.c_str(), k == "minimum");
    } else if (k == "enum") {
      if (!va.is_array() || !vb.is_array()) return Refuse("enum", where, "not an array");
      Json both = Json::array();
      const std::set<Json> in_b(vb.begin(), vb.end());  // (a linear scan per value was O(a b))
      for (const Json& x : va) {
        if (in_b.count(x)) both.push_back(x);
      }
      if (both.empty()) return Json(false);
      r[k] = both;
    } else if (k == "const") {
      return Json(false);  // two different constants
    } else if (k == "anyOf") {
      if (!va.is_array() || !vb.is_array()) return Refuse("anyOf", where, "not an array");
      if (va.size() * vb.size() > 64) {
        return Refuse("allOf", where, "merging two anyOf lists of more than 64 combinations");
      }
      Json prod = Json::array();
      for (const Json& x : va) {
        for (const Json& y : vb) prod.push_back(Both(x, y));
      }
      r[k] = prod;
    } else {
      return Refuse(k, where, "two different values under allOf cannot be merged");
    }
  }
  // Properties: a key declared on one side is also checked by the other side's
  // additionalProperties (when that side has no patternProperties).
  const bool pa = a.contains("patternProperties"), pb = b.contains("patternProperties");
  const bool obj_a = a.contains("properties") || a.contains("additionalProperties");
  const bool obj_b = b.contains("properties") || b.contains("additionalProperties");
  if ((pa && obj_b) || (pb && obj_a) ||
      (pa && pb && a["patternProperties"] != b["patternProperties"])) {
    return Refuse("patternProperties", where, "merging patternProperties under allOf");
  }
  if (obj_a || obj_b) {
    const Json empty = Json::object();
    const Json& props_a = a.contains("properties") ? a["properties"] : empty;
    const Json& props_b = b.contains("properties") ? b["properties"] : empty;
    if (!props_a.is_object() || !props_b.is_object()) {
      return Refuse("properties", where, "not an object");
    }
    const Json* add_a = a.contains("additionalProperties") ? &a["additionalProperties"] : nullptr;
    const Json* add_b = b.contains("additionalProperties") ? &b["additionalProperties"] : nullptr;
    Json props = Json::object();
    for (const auto& [k, v] : props_a.items()) {
      if (props_b.contains(k)) {
        props[k] = Both(v, props_b[k]);
      } else {
        props[k] = add_b ? Both(v, *add_b) : v;
      }
    }
    for (const auto& [k, v] : props_b.items()) {
      if (!props_a.contains(k)) props[k] = add_a ? Both(v, *add_a) : v;
    }
    if (!props.empty()) r["properties"] = props;
    if (add_a && add_b) {
      r["additionalProperties"] = Both(*add_a, *add_b);
    } else if (add_b) {
      r["additionalProperties"] = *add_b;
    }
  }
  return r;
}

bool Converter::GenFails(const Json& a0, const Json& b0, int depth) {
  if (depth > 8) return false;
  auto da = Deref(a0, "", 0);
  auto db = Deref(b0, "", 0);
  if (!da.ok() || !db.ok()) return false;
  const Json& a = *da;
  const Json& b = *db;
  if (IsFalse(a) || IsFalse(b)) return true;
  if (!a.is_object() || !b.is_object()) return false;
  for (const char* k : {"anyOf", "oneOf"}) {
    if (a.contains(k) && a[k].is_array() && !HasAssertionsExcept(a, {k})) {
      return std::all_of(a[k].begin(), a[k].end(),
                         [&](const Json& x) { return GenFails(x, b, depth + 1); });
    }
    if (b.contains(k) && b[k].is_array() && !HasAssertionsExcept(b, {k})) {
      return std::all_of(b[k].begin(), b[k].end(),
                         [&](const Json& y) { return GenFails(a, y, depth + 1); });
    }
  }
  // Types a generates, and types b accepts.
  const auto values_a = Values(a);
  const auto values_b = Values(b);
  std::vector<std::string> gen;
  if (values_a) {
    for (const Json& v : *values_a) gen.push_back(TypeOf(v));
  } else if (a.contains("type")) {
    gen = TypeList(a["type"]);
  } else {
    gen = InferTypes(a);
    if (gen.empty()) return false;  // any value: too wide to reason about here
  }
  std::vector<std::string> accept;
  if (values_b) {
    for (const Json& v : *values_b) accept.push_back(TypeOf(v));
  } else if (b.contains("type")) {
    accept = TypeList(b["type"]);
  }
  auto overlaps = [&](const std::string& t) {
    if (accept.empty()) return true;
    const bool num = t == "number" || t == "integer";
    return std::any_of(accept.begin(), accept.end(), [&](const std::string& u) {
      return u == t || (num && (u == "number" || u == "integer"));
    });
  };
  for (const std::string& t : gen) {
    if (!overlaps(t)) continue;
    if (values_a) {
      if (!values_b) return false;
      for (const Json& v : *values_a) {
        if (std::find(values_b->begin(), values_b->end(), v) != values_b->end()) return false;
      }
      continue;
    }
    if (t != "object") return false;
    // Objects: b requires a key a never writes, or a requires a key b rejects.
    const Json empty = Json::object();
    const Json& props_a = a.contains("properties") ? a["properties"] : empty;
    const Json& props_b = b.contains("properties") ? b["properties"] : empty;
    const Json req_a = a.contains("required") ? a["required"] : Json::array();
    const Json req_b = b.contains("required") ? b["required"] : Json::array();
    const bool a_free =
        a.contains("patternProperties") ||
        (a.contains("additionalProperties") ? !IsFalse(a["additionalProperties"])
                                            : options_.additional_properties_default);
    bool fails = false;
    for (const Json& k : req_b) {
      if (!k.is_string() || a_free) break;
      const std::string key = k.get<std::string>();
      if ((!props_a.contains(key) || IsFalse(props_a[key])) &&
          std::find(req_a.begin(), req_a.end(), k) == req_a.end()) {
        fails = true;
      }
    }
    for (const Json& k : req_a) {
      if (fails || !k.is_string()) break;
      const std::string key = k.get<std::string>();
      if (b.contains("additionalProperties") && IsFalse(b["additionalProperties"]) &&
          !b.contains("patternProperties") && !props_b.contains(key)) {
        fails = true;
      } else if (props_a.contains(key) && props_b.contains(key) &&
                 GenFails(props_a[key], props_b[key], depth + 1)) {
        fails = true;
      }
    }
    if (!fails) return false;
  }
  return true;
}

bool Converter::Tighten(Json* gen, const Json& other0) {
  auto other_r = Deref(other0, "", 0);
  if (!other_r.ok() || !gen->is_object() || !other_r->is_object()) return false;
  const Json& other = *other_r;
  const std::vector<std::string> types =
      gen->contains("type") ? TypeList((*gen)["type"]) : InferTypes(*gen);
  if (types != std::vector<std::string>{"object"} || !gen->contains("properties") ||
      !(*gen)["properties"].is_object()) {
    return false;
  }
  if (!gen->contains("required") || !(*gen)["required"].is_array()) {
    (*gen)["required"] = Json::array();  // before taking references into *gen
  }
  Json& props = (*gen)["properties"];
  Json& req = (*gen)["required"];
  auto required = [&](const Json& s, const std::string& k) {
    if (!s.contains("required") || !s["required"].is_array()) return false;
    return std::find(s["required"].begin(), s["required"].end(), Json(k)) != s["required"].end();
  };
  const bool free =
      gen->contains("patternProperties") ||
      (gen->contains("additionalProperties") ? !IsFalse((*gen)["additionalProperties"])
                                             : options_.additional_properties_default);
  const Json empty = Json::object();
  const Json& oprops =
      other.contains("properties") && other["properties"].is_object() ? other["properties"] : empty;
  const bool other_closed = other.contains("additionalProperties") &&
                            IsFalse(other["additionalProperties"]) &&
                            !other.contains("patternProperties");
  for (auto& [k, v] : props.items()) {
    if (IsFalse(v) || required(*gen, k)) continue;
    // A discriminator: this branch's values of k are never valid for the other branch.
    if (oprops.contains(k) && GenFails(v, oprops[k], 1)) {
      req.push_back(k);
      return true;
    }
    // A key the other branch rejects: always write it.
    if (other_closed && !oprops.contains(k)) {
      req.push_back(k);
      return true;
    }
  }
  if (!free) {
    // A key the other branch requires: never write it.
    for (auto& [k, v] : props.items()) {
      if (!IsFalse(v) && !required(*gen, k) && required(other, k)) {
        v = false;
        return true;
      }
    }
  }
  return false;
}

}  // namespace tachyon::grammar::schema_internal
