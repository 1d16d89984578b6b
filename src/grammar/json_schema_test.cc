#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include "grammar/testing/grammar_testing.h"

namespace tachyon::grammar {
namespace {

// A schema compiled over the byte vocabulary; Accepts() feeds a text byte by byte.
class Schema {
 public:
  explicit Schema(const std::string& schema, JsonSchemaOptions o = {}) {
    auto r = JsonSchemaToGbnf(schema, o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok()) {
      gbnf_ = *r;
      g_ = testing::CompileGbnf(gbnf_);
    }
  }
  bool Accepts(const std::string& text) const { return g_ && testing::MatchesBytes(*g_, text); }
  const std::string& gbnf() const { return gbnf_; }

 private:
  std::string gbnf_;
  std::shared_ptr<const CompiledGrammar> g_;
};

std::string Refusal(const std::string& schema) {
  auto r = JsonSchemaToGbnf(schema);
  EXPECT_FALSE(r.ok()) << *r;
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

TEST(JsonSchemaTest, ScalarTypes) {
  Schema s(R"({"type": ["integer", "boolean", "null"]})");
  for (const char* ok : {"0", "-12", "907", "true", "false", "null"})
    EXPECT_TRUE(s.Accepts(ok)) << ok;
  for (const char* bad : {"01", "1.5", "-", "\"x\"", "nul", "[]", " 1"}) {
    EXPECT_FALSE(s.Accepts(bad)) << bad;
  }
  Schema n(R"({"type": "number"})");
  for (const char* ok : {"0", "-0.5", "1e9", "2.5E-3", "10"}) EXPECT_TRUE(n.Accepts(ok)) << ok;
  for (const char* bad : {".5", "1.", "+1", "1e", "0x1", "NaN"})
    EXPECT_FALSE(n.Accepts(bad)) << bad;
}

TEST(JsonSchemaTest, IntegerRangesAreExact) {
  Schema s(R"({"type": "integer", "minimum": 3, "maximum": 120})");
  for (int v = -5; v <= 130; ++v) {
    EXPECT_EQ(s.Accepts(std::to_string(v)), v >= 3 && v <= 120) << v;
  }
  EXPECT_FALSE(s.Accepts("003"));
  Schema neg(R"({"type": "integer", "exclusiveMinimum": -15, "exclusiveMaximum": 7})");
  for (int v = -30; v <= 30; ++v) {
    EXPECT_EQ(neg.Accepts(std::to_string(v)), v > -15 && v < 7) << v;
  }
  EXPECT_FALSE(neg.Accepts("-0"));
  Schema draft4(R"({"type": "integer", "minimum": 0, "exclusiveMinimum": true, "maximum": 2.5})");
  EXPECT_FALSE(draft4.Accepts("0"));
  EXPECT_TRUE(draft4.Accepts("1"));
  EXPECT_TRUE(draft4.Accepts("2"));
  EXPECT_FALSE(draft4.Accepts("3"));
  // A bound beyond int64.
  Schema big(R"({"type": "integer", "maximum": 9223372036854776000})");
  // The bound is read as written (a JSON integer here, as Python reads it too).
  EXPECT_TRUE(big.Accepts("9223372036854776000"));
  EXPECT_FALSE(big.Accepts("9223372036854776001"));
  EXPECT_TRUE(big.Accepts("-99999999999999999999999"));
  Schema lower(R"({"type": "integer", "minimum": 10})");
  EXPECT_TRUE(lower.Accepts("10"));
  EXPECT_TRUE(lower.Accepts("123456789012345678901234567890"));
  EXPECT_FALSE(lower.Accepts("9"));
  EXPECT_FALSE(lower.Accepts("-11"));
}

TEST(JsonSchemaTest, NumberBounds) {
  Schema unit(R"({"type": "number", "minimum": 0, "maximum": 1})");
  for (const char* ok : {"0", "0.0", "0.25", "1", "1.000"}) EXPECT_TRUE(unit.Accepts(ok)) << ok;
  for (const char* bad : {"-0.1", "1.01", "2", "1e0", "-1"}) EXPECT_FALSE(unit.Accepts(bad)) << bad;
  Schema pos(R"({"type": "number", "exclusiveMinimum": 0})");
  for (const char* ok : {"0.001", "3", "2e5", "0.5E-3"}) EXPECT_TRUE(pos.Accepts(ok)) << ok;
  for (const char* bad : {"0", "0.000", "-1", "0e5"}) EXPECT_FALSE(pos.Accepts(bad)) << bad;
  Schema lat(R"({"type": "number", "minimum": -90, "maximum": 90})");
  for (const char* ok : {"-90", "-89.99", "0", "45.5", "90.0"}) EXPECT_TRUE(lat.Accepts(ok)) << ok;
  for (const char* bad : {"-90.5", "90.01", "100"}) EXPECT_FALSE(lat.Accepts(bad)) << bad;
  EXPECT_NE(Refusal(R"({"type": "number", "minimum": 0.5})").find("'minimum/maximum'"),
            std::string::npos);
}

TEST(JsonSchemaTest, StringsEscapesAndLengths) {
  Schema s(R"({"type": "string"})");
  for (const char* ok :
       {R"("")", R"("a\"b")", R"("\\")", R"("\u00e9\n")", "\"\xC3\xA9\"", R"("/")"}) {
    EXPECT_TRUE(s.Accepts(ok)) << ok;
  }
  for (const char* bad : {"\"a\nb\"", R"("\x")", R"("\ud800")", R"("abc)", R"('a')"}) {
    EXPECT_FALSE(s.Accepts(bad)) << bad;
  }
  Schema len(R"({"type": "string", "minLength": 2, "maxLength": 3})");
  EXPECT_FALSE(len.Accepts(R"("a")"));
  EXPECT_TRUE(len.Accepts(R"("ab")"));
  EXPECT_TRUE(len.Accepts("\"\xC3\xA9\xC3\xA9\xC3\xA9\""));  // 3 code points, 6 bytes
  EXPECT_TRUE(len.Accepts(R"("a\nb")"));                     // an escape is one character
  EXPECT_FALSE(len.Accepts(R"("abcd")"));
}

TEST(JsonSchemaTest, EnumAndConst) {
  Schema e(R"({"enum": ["red", 1, null, {"a": [true]}], "description": "x"})");
  for (const char* ok : {R"("red")", "1", "null", R"({"a":[true]})"})
    EXPECT_TRUE(e.Accepts(ok)) << ok;
  for (const char* bad : {R"("blue")", "2", R"("1")"}) EXPECT_FALSE(e.Accepts(bad)) << bad;
  Schema typed(R"({"type": "string", "enum": ["a", "bb", 3], "maxLength": 1})");
  EXPECT_TRUE(typed.Accepts(R"("a")"));
  EXPECT_FALSE(typed.Accepts(R"("bb")"));
  EXPECT_FALSE(typed.Accepts("3"));
  Schema c(R"({"const": "fixed"})");
  EXPECT_TRUE(c.Accepts(R"("fixed")"));
  EXPECT_FALSE(c.Accepts(R"("other")"));
}

TEST(JsonSchemaTest, ObjectsKeepDeclaredOrder) {
  Schema s(R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"},
               "c": {"type": "boolean"}}, "required": ["b"]})");
  for (const char* ok : {R"({"b":""})", R"({"a":1,"b":"x"})", R"({"b":"x","c":true})",
                         R"({"a":1,"b":"x","c":false})"}) {
    EXPECT_TRUE(s.Accepts(ok)) << ok;
  }
  for (const char* bad : {"{}", R"({"a":1})", R"({"b":"x","a":1})", R"({"b":"x","d":1})",
                          R"({"b":"x",})", R"({,"b":"x"})", R"({"b":1})"}) {
    EXPECT_FALSE(s.Accepts(bad)) << bad;
  }
  Schema none(R"({"type": "object", "properties": {"a": {"type": "integer"}}})");
  EXPECT_TRUE(none.Accepts("{}"));
  EXPECT_TRUE(none.Accepts(R"({"a":2})"));
}

TEST(JsonSchemaTest, AdditionalProperties) {
  Schema extra(R"({"type": "object", "properties": {"id": {"type": "integer"}},
                   "additionalProperties": {"type": "string"}})");
  EXPECT_TRUE(extra.Accepts(R"({"id":1,"x":"y","z":""})"));
  EXPECT_TRUE(extra.Accepts(R"({"x":"y"})"));
  EXPECT_FALSE(extra.Accepts(R"({"x":1})"));
  // A declared key never comes back as a free key (its value would skip its own schema).
  EXPECT_FALSE(extra.Accepts(R"({"id":"s"})"));
  EXPECT_FALSE(extra.Accepts(R"({"id":1,"id":"s"})"));
  EXPECT_TRUE(extra.Accepts(R"({"i":"s","idx":"t","":"u"})"));
  Schema closed(R"({"properties": {"a": {}}, "additionalProperties": false})");
  EXPECT_TRUE(closed.Accepts(R"({"a":[1,{"b":null}]})"));
  EXPECT_FALSE(closed.Accepts(R"({"b":1})"));
  JsonSchemaOptions spec_default;
  spec_default.additional_properties_default = true;
  Schema open(R"({"properties": {"a": {"type": "integer"}}})", spec_default);
  EXPECT_TRUE(open.Accepts(R"({"a":1,"zz":[true]})"));
  Schema strict(R"({"properties": {"a": {"type": "integer"}}})");
  EXPECT_FALSE(strict.Accepts(R"({"a":1,"zz":[true]})"));
}

TEST(JsonSchemaTest, PatternPropertiesAndPropertyCounts) {
  Schema s(R"({"type": "object", "patternProperties": {"^[0-9]+$": {"type": "string"}},
               "additionalProperties": false, "minProperties": 1})");
  EXPECT_TRUE(s.Accepts(R"({"12":"a","3":"b"})"));
  EXPECT_FALSE(s.Accepts("{}"));
  EXPECT_FALSE(s.Accepts(R"({"x":"a"})"));
  EXPECT_FALSE(s.Accepts(R"({"1":2})"));
  Schema max(R"({"additionalProperties": {"type": "integer"}, "maxProperties": 2})");
  EXPECT_TRUE(max.Accepts(R"({"a":1,"b":2})"));
  EXPECT_FALSE(max.Accepts(R"({"a":1,"b":2,"c":3})"));
  EXPECT_NE(Refusal(R"({"patternProperties": {"a": {}, "b": {}}})").find("'patternProperties'"),
            std::string::npos);
}

TEST(JsonSchemaTest, WhitespacePolicy) {
  const char* schema = R"({"type": "object", "properties": {"a": {"type": "array",
                          "items": {"type": "integer"}}, "b": {"type": "null"}}})";
  Schema s(schema);
  for (const char* ok : {R"({"a":[1,2],"b":null})", R"({"a": [1, 2], "b": null})",
                         "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": null\n}"}) {
    EXPECT_TRUE(s.Accepts(ok)) << ok;
  }
  for (const char* bad : {R"({"a" :[1]})", R"({"a":[1 ,2]})", R"( {"a":[1]})", R"({"a":[1]} )"}) {
    EXPECT_FALSE(s.Accepts(bad)) << bad;
  }
  EXPECT_TRUE(s.Accepts("{" + std::string(20, ' ') + "}"));
  EXPECT_FALSE(s.Accepts("{" + std::string(21, ' ') + "}"));
  JsonSchemaOptions compact;
  compact.max_whitespace = 0;
  Schema c(schema, compact);
  EXPECT_TRUE(c.Accepts(R"({"a":[1,2],"b":null})"));
  EXPECT_FALSE(c.Accepts(R"({"a": [1,2]})"));
}

TEST(JsonSchemaTest, Arrays) {
  Schema s(R"({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3})");
  EXPECT_FALSE(s.Accepts("[1]"));
  EXPECT_TRUE(s.Accepts("[1,2]"));
  EXPECT_TRUE(s.Accepts("[1,2,3]"));
  EXPECT_FALSE(s.Accepts("[1,2,3,4]"));
  EXPECT_FALSE(s.Accepts("[1,\"a\"]"));
  Schema tuple(R"({"prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false})");
  EXPECT_TRUE(tuple.Accepts("[]"));
  EXPECT_TRUE(tuple.Accepts(R"(["a"])"));
  EXPECT_TRUE(tuple.Accepts(R"(["a",1])"));
  EXPECT_FALSE(tuple.Accepts(R"(["a",1,2])"));
  EXPECT_FALSE(tuple.Accepts("[1]"));
  Schema draft4(R"({"items": [{"const": 0}], "additionalItems": {"type": "boolean"},
                    "minItems": 1})");
  EXPECT_TRUE(draft4.Accepts("[0,true,false]"));
  EXPECT_FALSE(draft4.Accepts("[]"));
  EXPECT_FALSE(draft4.Accepts("[0,1]"));
}

TEST(JsonSchemaTest, Combinators) {
  Schema any(R"({"anyOf": [{"type": "string", "maxLength": 1}, {"type": "integer"}]})");
  EXPECT_TRUE(any.Accepts(R"("a")"));
  EXPECT_TRUE(any.Accepts("5"));
  EXPECT_FALSE(any.Accepts(R"("ab")"));
  Schema nullable(R"({"oneOf": [{"type": "null"}, {"type": "object", "properties":
                      {"x": {"type": "integer"}}, "required": ["x"]}]})");
  EXPECT_TRUE(nullable.Accepts("null"));
  EXPECT_TRUE(nullable.Accepts(R"({"x":1})"));
  // Objects told apart by a required discriminator are exclusive.
  Schema tagged(R"({"oneOf": [
      {"properties": {"kind": {"const": "a"}, "v": {"type": "integer"}}, "required": ["kind"]},
      {"properties": {"kind": {"const": "b"}, "w": {"type": "string"}}, "required": ["kind"]}]})");
  EXPECT_TRUE(tagged.Accepts(R"({"kind":"a","v":1})"));
  EXPECT_TRUE(tagged.Accepts(R"({"kind":"b","w":"x"})"));
  EXPECT_FALSE(tagged.Accepts(R"({"kind":"b","v":1})"));
  EXPECT_NE(Refusal(R"({"oneOf": [{"type": "integer"}, {"type": "number"}]})").find("'oneOf' at /"),
            std::string::npos);
  // Narrowed branches: an optional key the other branch rejects is always written ...
  Schema closed(R"({"oneOf": [
      {"type": "object", "additionalProperties": false, "properties": {"ps": {"type": "string"}}},
      {"type": "object", "additionalProperties": false, "properties": {"sh": {"type": "string"}}}]})");
  EXPECT_TRUE(closed.Accepts(R"({"ps":"x"})"));
  EXPECT_TRUE(closed.Accepts(R"({"sh":"y"})"));
  EXPECT_FALSE(closed.Accepts("{}"));  // valid under both branches, so under neither oneOf
  // ... and a key the other branch requires is never written.
  Schema either(R"({"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                    "oneOf": [{"required": ["a"]}, {"required": ["b"]}]})");
  EXPECT_TRUE(either.Accepts(R"({"a":1})"));
  EXPECT_TRUE(either.Accepts(R"({"b":2})"));
  EXPECT_FALSE(either.Accepts(R"({"a":1,"b":2})"));
  Schema all(R"({"allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                           {"properties": {"b": {"type": "string"}, "a": {"minimum": 5}},
                            "required": ["b"]}]})");
  EXPECT_TRUE(all.Accepts(R"({"a":7,"b":"x"})"));
  EXPECT_FALSE(all.Accepts(R"({"a":4,"b":"x"})"));
  EXPECT_FALSE(all.Accepts(R"({"a":7})"));
  EXPECT_NE(Refusal(R"({"allOf": [{"pattern": "a"}, {"pattern": "b"}]})").find("'pattern'"),
            std::string::npos);
}

TEST(JsonSchemaTest, RefsAndRecursion) {
  Schema tree(R"({"$defs": {"node": {"type": "object", "properties": {
      "v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
      "required": ["v"]}}, "$ref": "#/$defs/node"})");
  EXPECT_TRUE(tree.Accepts(R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[{"v":4,"kids":[]}]}]})"));
  EXPECT_FALSE(tree.Accepts(R"({"v":1,"kids":[{"w":2}]})"));
  Schema self(R"({"type": "object", "properties": {"next": {"$ref": "#"}}})");
  EXPECT_TRUE(self.Accepts(R"({"next":{"next":{}}})"));
  Schema escaped(R"({"definitions": {"a/b": {"type": "integer"}},
                     "properties": {"x": {"$ref": "#/definitions/a~1b"}}})");
  EXPECT_TRUE(escaped.Accepts(R"({"x":3})"));
  EXPECT_NE(Refusal(R"({"$ref": "#/definitions/missing"})").find("'$ref' at /"), std::string::npos);
  EXPECT_NE(Refusal(R"({"$ref": "other.json#/a"})").find("outside the document"),
            std::string::npos);
}

TEST(JsonSchemaTest, Formats) {
  Schema date(R"({"type": "string", "format": "date"})");
  EXPECT_TRUE(date.Accepts(R"("2024-02-28")"));
  EXPECT_TRUE(date.Accepts(R"("1999-12-31")"));
  EXPECT_FALSE(date.Accepts(R"("2024-02-30")"));
  EXPECT_FALSE(date.Accepts(R"("2024-13-01")"));
  Schema dt(R"({"format": "date-time"})");
  EXPECT_TRUE(dt.Accepts(R"("2024-05-01T12:30:00Z")"));
  EXPECT_TRUE(dt.Accepts(R"("2024-05-01T12:30:00.123+02:00")"));
  EXPECT_FALSE(dt.Accepts(R"("2024-05-01 12:30:00Z")"));
  Schema uuid(R"({"format": "uuid"})");
  EXPECT_TRUE(uuid.Accepts(R"("123e4567-e89b-12d3-a456-426614174000")"));
  EXPECT_FALSE(uuid.Accepts(R"("123e4567e89b12d3a456426614174000")"));
  Schema ip4(R"({"format": "ipv4"})");
  EXPECT_TRUE(ip4.Accepts(R"("192.168.0.255")"));
  EXPECT_FALSE(ip4.Accepts(R"("192.168.0.256")"));
  EXPECT_FALSE(ip4.Accepts(R"("01.2.3.4")"));
  Schema ip6(R"({"format": "ipv6"})");
  for (const char* ok : {R"("::1")", R"("fe80::1:2")", R"("2001:db8:0:0:1:0:0:1")", R"("::")",
                         R"("::ffff:1.2.3.4")"}) {
    EXPECT_TRUE(ip6.Accepts(ok)) << ok;
  }
  EXPECT_FALSE(ip6.Accepts(R"("1:2:3:4:5:6:7:8:9")"));
  Schema email(R"({"format": "email"})");
  EXPECT_TRUE(email.Accepts(R"("a.b+c@example.com")"));
  EXPECT_FALSE(email.Accepts(R"("a@b")"));
  Schema uri(R"({"format": "uri"})");
  EXPECT_TRUE(uri.Accepts(R"("https://example.com/a?b=c#d")"));
  EXPECT_TRUE(uri.Accepts(R"("urn:isbn:0451450523")"));
  EXPECT_FALSE(uri.Accepts(R"("no scheme")"));
  Schema dur(R"({"format": "duration"})");
  for (const char* ok : {R"("P1Y2M3DT4H5M6S")", R"("PT5M")", R"("P3W")", R"("P1D")"}) {
    EXPECT_TRUE(dur.Accepts(ok)) << ok;
  }
  for (const char* bad : {R"("P")", R"("PT")", R"("P1H")", R"("1D")"}) {
    EXPECT_FALSE(dur.Accepts(bad)) << bad;
  }
  // Formats validators do not know are annotations.
  Schema odd(R"({"type": "string", "format": "int32"})");
  EXPECT_TRUE(odd.Accepts(R"("anything")"));
  EXPECT_NE(Refusal(R"({"format": "regex"})").find("'format'"), std::string::npos);
}

TEST(JsonSchemaTest, Patterns) {
  Schema p(R"({"type": "string", "pattern": "^[a-z]+-\\d{2}$"})");
  EXPECT_TRUE(p.Accepts(R"("ab-12")"));
  EXPECT_FALSE(p.Accepts(R"("ab-1")"));
  EXPECT_FALSE(p.Accepts(R"("Ab-12")"));
  Schema search(R"({"type": "string", "pattern": "x+y"})");  // unanchored: search semantics
  EXPECT_TRUE(search.Accepts(R"("..xxy..")"));
  EXPECT_FALSE(search.Accepts(R"("xz")"));
  Schema quote(R"({"pattern": "^a\"[^b]$"})");  // the JSON encoding of '"' is \"
  EXPECT_TRUE(quote.Accepts(R"("a\"c")"));
  EXPECT_TRUE(quote.Accepts(R"("a\"\\")"));
  EXPECT_FALSE(quote.Accepts(R"("a"c")"));
  EXPECT_FALSE(quote.Accepts(R"("a\"b")"));
  Schema len(R"({"type": "string", "pattern": "^[a-z]+$", "maxLength": 3})");
  EXPECT_TRUE(len.Accepts(R"("abc")"));
  EXPECT_FALSE(len.Accepts(R"("abcd")"));
  // Several variable parts and maxLength: repetitions capped so every match fits (tighter).
  Schema capped(R"({"type": "string", "pattern": "^[a-z]+:[0-9]*$", "maxLength": 9})");
  EXPECT_TRUE(capped.Accepts(R"("abc:123")"));
  EXPECT_FALSE(capped.Accepts(R"("abcdefgh:12")"));
  EXPECT_FALSE(capped.Accepts(R"("abc-123")"));
  Schema whole(R"({"type": "string", "pattern": "[0-9]{4}", "minLength": 4, "maxLength": 4})");
  EXPECT_TRUE(whole.Accepts(R"("2024")"));
  EXPECT_FALSE(whole.Accepts(R"("x2024")"));
  Schema empty_or(R"j({"pattern": "(^$)|(^[a-f]{2}$)"})j");
  EXPECT_TRUE(empty_or.Accepts(R"("")"));
  EXPECT_TRUE(empty_or.Accepts(R"("ab")"));
  EXPECT_FALSE(empty_or.Accepts(R"("abc")"));
  // Branches with different anchors, each unanchored side kept to its branches only.
  Schema mixed(R"({"type": "string", "pattern": "^ab|cd$|ef|^gh$|ij"})");
  for (const char* ok : {R"("abz")", R"("zcd")", R"("zefz")", R"("gh")", R"("zijz")", R"("ab")"}) {
    EXPECT_TRUE(mixed.Accepts(ok)) << ok;
  }
  for (const char* bad : {R"("zab")", R"("cdz")", R"("zgh")", R"("ghz")", R"("ae")", R"("")"}) {
    EXPECT_FALSE(mixed.Accepts(bad)) << bad;
  }
  for (const char* bad :
       {R"j({"pattern": "(?=a)"})j", R"j({"pattern": "(a)\\1"})j", R"j({"pattern": "\\bx"})j"}) {
    EXPECT_NE(Refusal(bad).find("'pattern'"), std::string::npos) << bad;
  }
}

TEST(JsonSchemaTest, RefusalsNameKeywordAndPointer) {
  EXPECT_EQ(Refusal(R"({"properties": {"a": {"not": {"type": "string"}}}})"),
            "unsupported JSON Schema keyword 'not' at /properties/a");
  EXPECT_EQ(Refusal(R"({"items": {"type": "array", "uniqueItems": true}})"),
            "unsupported JSON Schema keyword 'uniqueItems' at /items");
  EXPECT_NE(Refusal(R"({"if": {}, "then": {}})").find("'if' at /"), std::string::npos);
  EXPECT_NE(Refusal("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(Refusal(R"({"type": "integer", "minimum": 5, "maximum": 1})").find("admits no value"),
            std::string::npos);
}

TEST(JsonSchemaTest, AnnotationsAndUnknownKeywordsAreIgnored) {
  Schema s(R"({"$schema": "x", "$id": "y", "title": "t", "description": "d", "examples": [1],
               "default": 2, "$comment": "c", "javaType": "Long", "readonly": true,
               "type": "integer"})");
  EXPECT_TRUE(s.Accepts("42"));
  EXPECT_EQ(s.gbnf(), Schema(R"({"type": "integer"})").gbnf());
}

TEST(JsonSchemaTest, JsonObjectAndAnyValue) {
  auto g = testing::CompileGbnf(JsonObjectGbnf());
  ASSERT_TRUE(g);
  EXPECT_TRUE(testing::MatchesBytes(*g, R"({"a": [1, {"b": null}], "c": "d"})"));
  EXPECT_TRUE(testing::MatchesBytes(*g, "{}"));
  EXPECT_FALSE(testing::MatchesBytes(*g, "[]"));
  EXPECT_FALSE(testing::MatchesBytes(*g, R"({"a": })"));
  Schema any("{}");
  EXPECT_TRUE(any.Accepts("[1,\"x\",{\"y\":false}]"));
}

TEST(JsonSchemaTest, DeadlineAndSizeLimits) {
  JsonSchemaOptions past;
  past.deadline = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  auto r = JsonSchemaToGbnf(R"({"type": "string"})", past);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("compile budget"), std::string::npos);
  JsonSchemaOptions tiny;
  tiny.max_grammar_bytes = 64;
  auto big = JsonSchemaToGbnf(R"({"properties": {"a": {"format": "ipv6"}}})", tiny);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("larger than"), std::string::npos);
  // Counts stay counts: a huge maxItems is one bounded repetition, not an expansion.
  auto counted = JsonSchemaToGbnf(R"({"items": {"type": "integer"}, "maxItems": 100000})");
  ASSERT_TRUE(counted.ok());
  EXPECT_LT(counted->size(), 2000u);
}

}  // namespace
}  // namespace tachyon::grammar
