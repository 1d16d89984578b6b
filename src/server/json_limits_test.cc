#include "server/json_limits.h"

#include <gtest/gtest.h>

#include <string>

namespace tachyon::server {
namespace {

std::string Nested(const std::string& open, const std::string& close, int n,
                   const std::string& core = "1") {
  std::string s;
  for (int i = 0; i < n; ++i) s += open;
  s += core;
  for (int i = 0; i < n; ++i) s += close;
  return s;
}

JsonShape Shape(std::string_view text) {
  JsonShape shape;
  EXPECT_FALSE(CheckJsonLimits(text, {}, &shape).has_value()) << text;
  return shape;
}

TEST(JsonLimitsTest, MeasuresDepthAndValues) {
  EXPECT_EQ(Shape("1").depth, 0);
  EXPECT_EQ(Shape("1").values, 1u);
  EXPECT_EQ(Shape("  ").values, 0u);
  EXPECT_EQ(Shape("{}").depth, 1);
  EXPECT_EQ(Shape("{}").values, 1u);
  EXPECT_EQ(Shape("[]").values, 1u);
  EXPECT_EQ(Shape(R"({"a": [1, 2]})").depth, 2);
  EXPECT_EQ(Shape(R"({"a": [1, 2]})").values, 4u);
  EXPECT_EQ(Shape(R"({"a": {}, "b": [[], [null]]})").values, 6u);
  EXPECT_EQ(Shape(R"([[[]], {"k": {"x": 1}}])").depth, 3);
  // Brackets, commas, quotes and escapes inside strings are text.
  EXPECT_EQ(Shape(R"({"[[[{": "]],\"{,,"})").depth, 1);
  EXPECT_EQ(Shape(R"({"[[[{": "]],\"{,,"})").values, 2u);
  EXPECT_EQ(Shape(R"(["\\", "[", "\\\"["])").depth, 1);
  EXPECT_EQ(Shape(R"(["\\", "[", "\\\"["])").values, 4u);
}

TEST(JsonLimitsTest, DepthLimitIsInclusive) {
  EXPECT_FALSE(CheckJsonLimits(Nested("[", "]", kMaxJsonDepth)).has_value());
  auto e = CheckJsonLimits(Nested("[", "]", kMaxJsonDepth + 1));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->http_status, 400);
  EXPECT_EQ(e->code, "json_too_deep");
  EXPECT_NE(e->message.find("64"), std::string::npos) << e->message;
  JsonLimits tight;
  tight.max_depth = 2;
  EXPECT_FALSE(CheckJsonLimits("[[1], {\"a\": 2}]", tight).has_value());
  EXPECT_TRUE(CheckJsonLimits("[[{}]]", tight).has_value());
}

TEST(JsonLimitsTest, UnbalancedTextIsScannedWithoutUnderflow) {
  // Invalid JSON is left to the parser; the scan only must not misbehave.
  EXPECT_FALSE(CheckJsonLimits("]]]]}}}[").has_value());
  EXPECT_FALSE(CheckJsonLimits("\"unterminated [[[[").has_value());
  EXPECT_FALSE(CheckJsonLimits("\\").has_value());
  EXPECT_TRUE(CheckJsonLimits(std::string(100, '[')).has_value());
}

TEST(JsonLimitsTest, ValueAndByteLimits) {
  JsonLimits limits;
  limits.max_values = 4;
  EXPECT_FALSE(CheckJsonLimits("[1, 2, 3]", limits).has_value());
  auto e = CheckJsonLimits("[1, 2, 3, 4]", limits);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code, "json_too_many_values");
  EXPECT_NE(e->message.find("4 values"), std::string::npos) << e->message;
  limits = {};
  limits.max_bytes = 8;
  EXPECT_FALSE(CheckJsonLimits("[1,2,3] ", limits).has_value());
  e = CheckJsonLimits("[1, 2, 3]", limits);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code, "json_too_large");
}

TEST(JsonLimitsTest, DeepBodiesAreRefusedBeforeParsing) {
  // 100,000 levels: the shape that used to overflow the io thread's stack.
  const std::string deep_object = Nested("{\"a\":", "}", 100000);
  const std::string deep_array = "{\"messages\": " + Nested("[", "]", 100000, "") + "}";
  for (const std::string* body : {&deep_object, &deep_array}) {
    auto j = ParseJsonBody(*body);
    ASSERT_FALSE(j.ok());
    EXPECT_EQ(j.error().code, "json_too_deep");
    auto o = ParseOrderedJsonBody(*body);
    ASSERT_FALSE(o.ok());
    EXPECT_EQ(o.error().code, "json_too_deep");
    nlohmann::json shape = nlohmann::json::parse(j.error().Body());
    EXPECT_EQ(shape["error"]["type"], "invalid_request_error");
    EXPECT_EQ(shape["error"]["code"], "json_too_deep");
    EXPECT_FALSE(ParseBoundedJson(*body).has_value());
  }
  // At the limit the body parses.
  auto ok = ParseOrderedJsonBody(Nested("{\"a\":", "}", kMaxJsonDepth));
  ASSERT_TRUE(ok.ok()) << ok.error().message;
}

TEST(JsonLimitsTest, ParsesBodies) {
  EXPECT_FALSE(ParseJsonBody("{\"a\": ").ok());
  EXPECT_FALSE(ParseJsonBody("[1, 2]").ok());
  EXPECT_EQ(ParseJsonBody("").error().http_status, 400);
  EXPECT_EQ(ParseJsonBody("{\"a\": \"\xff\"}").error().http_status, 400);
  auto j = ParseOrderedJsonBody(R"({"b": 1, "a": [true]})");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j.value().begin().key(), "b");
  EXPECT_EQ(*ParseBoundedJson("[1, 2]"), nlohmann::json::array({1, 2}));
  EXPECT_FALSE(ParseBoundedJson("[1, 2").has_value());
}

// The ordered parse builds the document itself (nlohmann's takes O(n^2) in an object's
// members): the same value as nlohmann's ordered parse, member order and repeated keys (first
// position, last value) included.
TEST(JsonLimitsTest, OrderedParseIsNlohmanns) {
  for (const char* text : {
           R"({"b": 1, "a": [true, null, {"z": 2.5, "y": "s"}], "c": {}})",
           R"({"a": 1, "b": 2, "a": 3})",
           R"({"a": {"x": 1}, "b": [], "a": [1, {"a": 2, "a": {"q": -7}}]})",
           R"({"n": 18446744073709551615, "m": -9223372036854775808, "e": 1e308})",
           R"([1, [2, [3, {"k": "v"}]]])",
           R"("text")",
       }) {
    const auto want = nlohmann::ordered_json::parse(text);
    const auto got = ParseBoundedOrderedJson(text);
    ASSERT_TRUE(got.has_value()) << text;
    EXPECT_EQ(*got, want) << text;
    EXPECT_EQ(got->dump(), want.dump()) << text;
  }
  for (const char* bad : {"{\"a\": }", "{\"a\" 1}", "[1, 2", "{} {}", ""}) {
    EXPECT_FALSE(ParseBoundedOrderedJson(bad).has_value()) << bad;
  }
}

// An object of 200,000 members (a whole vocabulary's logit_bias is 150,000): parsed, in order.
TEST(JsonLimitsTest, ManyMembersKeepTheirOrder) {
  constexpr int kMembers = 200000;
  std::string body = "{\"logit_bias\": {";
  for (int i = kMembers - 1; i >= 0; --i) {
    body += "\"" + std::to_string(i) + "\": " + std::to_string(i % 7) + (i ? ", " : "}}");
  }
  auto j = ParseOrderedJsonBody(body);
  ASSERT_TRUE(j.ok()) << j.error().message;
  const auto& bias = j.value()["logit_bias"];
  ASSERT_EQ(bias.size(), static_cast<size_t>(kMembers));
  int want = kMembers - 1;
  for (const auto& [key, value] : bias.items()) {
    ASSERT_EQ(key, std::to_string(want));
    ASSERT_EQ(value, want % 7);
    --want;
  }
}

}  // namespace
}  // namespace tachyon::server
