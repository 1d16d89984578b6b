#include "server/constraint_fields.h"

#include <gtest/gtest.h>

#include "server/testing/fake_backend.h"

namespace tachyon::server {
namespace {

using nlohmann::ordered_json;
using Kind = grammar::ConstraintSpec::Kind;

constexpr int kVocab = FakeBackend::kVocabSize;

RequestedConstraint Parsed(const ordered_json& body) {
  auto r = ParseConstraintFields(body);
  EXPECT_TRUE(r.ok()) << body.dump() << ": " << (r.ok() ? "" : r.error().message);
  if (!r.ok() || !r.value()) {
    ADD_FAILURE() << "no constraint from " << body.dump();
    return {};
  }
  return *r.value();
}

// `body` is refused with a 400 naming `param`, in the message too.
void ExpectRefused(const ordered_json& body, const std::string& param) {
  auto r = ParseConstraintFields(body);
  ASSERT_FALSE(r.ok()) << body.dump();
  EXPECT_EQ(r.error().http_status, 400);
  EXPECT_EQ(r.error().type, "invalid_request_error");
  EXPECT_EQ(r.error().param, param) << r.error().message;
  EXPECT_NE(r.error().message.find(param), std::string::npos) << r.error().message;
}

TEST(ConstraintFieldsTest, NoConstraint) {
  for (const ordered_json& body :
       {ordered_json::object(), ordered_json{{"response_format", {{"type", "text"}}}},
        ordered_json{{"response_format", nullptr}, {"grammar", nullptr}},
        ordered_json{{"structured_outputs", {{"json_object", false}}}}}) {
    auto r = ParseConstraintFields(body);
    ASSERT_TRUE(r.ok()) << body.dump();
    EXPECT_FALSE(r.value().has_value()) << body.dump();
  }
}

TEST(ConstraintFieldsTest, OpenAiResponseFormat) {
  RequestedConstraint c = Parsed({{"response_format", {{"type", "json_object"}}}});
  EXPECT_EQ(c.spec.kind, Kind::kJsonObject);
  EXPECT_EQ(c.param, "response_format");

  // The schema keeps the client's property order.
  ordered_json schema = {{"type", "object"},
                         {"properties", {{"zeta", {{"type", "string"}}}, {"alpha", {{"type", "integer"}}}}},
                         {"required", {"zeta", "alpha"}}};
  c = Parsed({{"response_format",
               {{"type", "json_schema"},
                {"json_schema", {{"name", "s"}, {"schema", schema}, {"strict", true}}}}}});
  EXPECT_EQ(c.spec.kind, Kind::kJsonSchema);
  EXPECT_EQ(c.spec.source, schema.dump());
  EXPECT_LT(c.spec.source.find("zeta"), c.spec.source.find("alpha"));
  EXPECT_EQ(c.param, "response_format.json_schema.schema");

  // llama.cpp: json_object with a schema.
  c = Parsed({{"response_format", {{"type", "json_object"}, {"schema", {{"type", "array"}}}}}});
  EXPECT_EQ(c.spec.kind, Kind::kJsonSchema);
  EXPECT_EQ(c.spec.source, R"({"type":"array"})");
}

TEST(ConstraintFieldsTest, MalformedResponseFormat) {
  ExpectRefused({{"response_format", {{"type", "json_schema"}}}}, "response_format.json_schema");
  ExpectRefused({{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "s"}}}}}},
                "response_format.json_schema.schema");
  ExpectRefused({{"response_format",
                  {{"type", "json_schema"},
                   {"json_schema", {{"name", 3}, {"schema", ordered_json::object()}}}}}},
                "response_format.json_schema.name");
  ExpectRefused({{"response_format",
                  {{"type", "json_schema"},
                   {"json_schema", {{"strict", "yes"}, {"schema", ordered_json::object()}}}}}},
                "response_format.json_schema.strict");
  ExpectRefused({{"response_format",
                  {{"type", "json_schema"}, {"json_schema", {{"schema", ordered_json::array()}}}}}},
                "response_format.json_schema.schema");
  ExpectRefused({{"response_format", {{"type", "yaml"}}}}, "response_format");
  ExpectRefused({{"response_format", {{"kind", "json_object"}}}}, "response_format");
}

TEST(ConstraintFieldsTest, VllmStructuredOutputs) {
  RequestedConstraint c = Parsed({{"structured_outputs", {{"regex", "[0-9]{3}"}}}});
  EXPECT_EQ(c.spec.kind, Kind::kRegex);
  EXPECT_EQ(c.spec.source, "[0-9]{3}");
  EXPECT_EQ(c.param, "structured_outputs.regex");

  c = Parsed({{"structured_outputs", {{"choice", {"yes", "no"}}}}});
  EXPECT_EQ(c.spec.kind, Kind::kChoice);
  EXPECT_EQ(c.spec.choices, (std::vector<std::string>{"yes", "no"}));

  c = Parsed({{"structured_outputs", {{"grammar", "root ::= \"a\""}}}});
  EXPECT_EQ(c.spec.kind, Kind::kGbnf);
  EXPECT_EQ(c.spec.source, "root ::= \"a\"");

  c = Parsed({{"structured_outputs", {{"json", {{"type", "integer"}}}}}});
  EXPECT_EQ(c.spec.kind, Kind::kJsonSchema);
  EXPECT_EQ(c.spec.source, R"({"type":"integer"})");
  // A schema as JSON text, as vLLM also takes it.
  c = Parsed({{"structured_outputs", {{"json", R"({"type": "integer"})"}}}});
  EXPECT_EQ(c.spec.source, R"({"type":"integer"})");

  c = Parsed({{"structured_outputs", {{"json_object", true}, {"regex", nullptr}}}});
  EXPECT_EQ(c.spec.kind, Kind::kJsonObject);
}

TEST(ConstraintFieldsTest, MalformedStructuredOutputs) {
  ExpectRefused({{"structured_outputs", "json"}}, "structured_outputs");
  ExpectRefused({{"structured_outputs", {{"", nullptr}}}}, "structured_outputs.");
  ExpectRefused({{"structured_outputs", {{"jsn", nullptr}, {"regex", "a"}}}}, "structured_outputs.jsn");
  ExpectRefused({{"structured_outputs", {{"regex", ""}}}}, "structured_outputs.regex");
  ExpectRefused({{"structured_outputs", {{"regex", 5}}}}, "structured_outputs.regex");
  ExpectRefused({{"structured_outputs", {{"choice", ordered_json::array()}}}},
                "structured_outputs.choice");
  ExpectRefused({{"structured_outputs", {{"choice", {"a", 1}}}}}, "structured_outputs.choice");
  ExpectRefused({{"structured_outputs", {{"json", "{not json"}}}}, "structured_outputs.json");
  ExpectRefused({{"structured_outputs", {{"json", 7}}}}, "structured_outputs.json");
  ExpectRefused({{"structured_outputs", {{"json", true}}}}, "structured_outputs.json");
  // A schema's text is held to a body's limits: nested past them, it is refused (its dump
  // recursed through every level and overflowed the stack).
  const std::string deep = "{\"a\": " + std::string(200000, '[') + std::string(200000, ']') + "}";
  ExpectRefused({{"structured_outputs", {{"json", deep}}}}, "structured_outputs.json");
  ExpectRefused({{"json_schema", deep}}, "json_schema");
  ExpectRefused({{"structured_outputs", {{"json_object", "yes"}}}},
                "structured_outputs.json_object");
  ExpectRefused({{"structured_outputs", {{"structural_tag", "{}"}}}},
                "structured_outputs.structural_tag");
  ExpectRefused({{"structured_outputs", {{"regex", "a"}, {"choice", {"b"}}}}},
                "structured_outputs.choice");
}

TEST(ConstraintFieldsTest, CompleteWithinMaxTokens) {
  const ordered_json schema = {{"type", "object"}};
  RequestedConstraint rf = Parsed({{"response_format",
                                    {{"type", "json_schema"},
                                     {"json_schema", {{"name", "x"}, {"schema", schema}}},
                                     {"complete_within_max_tokens", true}}}});
  EXPECT_EQ(rf.complete_within_max_tokens, std::optional<bool>(true));
  RequestedConstraint so = Parsed(
      {{"structured_outputs", {{"complete_within_max_tokens", false}, {"regex", "[a-z]+"}}}});
  EXPECT_EQ(so.spec.kind, Kind::kRegex);
  EXPECT_EQ(so.complete_within_max_tokens, std::optional<bool>(false));
  EXPECT_FALSE(Parsed({{"grammar", "root ::= \"a\""}}).complete_within_max_tokens.has_value());
  EXPECT_FALSE(Parsed({{"response_format", {{"type", "json_object"}}}})
                   .complete_within_max_tokens.has_value());
  ExpectRefused({{"response_format", {{"type", "json_object"}, {"complete_within_max_tokens", 1}}}},
                "response_format.complete_within_max_tokens");
  ExpectRefused(
      {{"structured_outputs", {{"json_object", true}, {"complete_within_max_tokens", "y"}}}},
      "structured_outputs.complete_within_max_tokens");
}

TEST(ConstraintFieldsTest, LlamaCppFields) {
  RequestedConstraint c = Parsed({{"grammar", "root ::= [a-z]+"}});
  EXPECT_EQ(c.spec.kind, Kind::kGbnf);
  EXPECT_EQ(c.param, "grammar");
  c = Parsed({{"json_schema", {{"type", "object"}}}});
  EXPECT_EQ(c.spec.kind, Kind::kJsonSchema);
  EXPECT_EQ(c.param, "json_schema");
  ExpectRefused({{"grammar", ordered_json::object()}}, "grammar");
  ExpectRefused({{"json_schema", "nope"}}, "json_schema");
}

TEST(ConstraintFieldsTest, MoreThanOneConstraintIsRefused) {
  ExpectRefused({{"response_format", {{"type", "json_object"}}}, {"grammar", "root ::= \"a\""}},
                "grammar");
  ExpectRefused({{"json_schema", {{"type", "object"}}},
                 {"structured_outputs", {{"regex", "a"}}}},
                "json_schema");
  ExpectRefused({{"response_format", {{"type", "json_object"}}},
                 {"structured_outputs", {{"choice", {"a"}}}}},
                "structured_outputs.choice");
}

// Both endpoints carry the constraint in CommonParams.
TEST(ConstraintFieldsTest, BothEndpointsParseIt) {
  auto completion = ParseCompletionRequest(
      ordered_json{{"prompt", "hi"}, {"structured_outputs", {{"choice", {"x", "y"}}}}}, kVocab);
  ASSERT_TRUE(completion.ok()) << completion.error().message;
  ASSERT_TRUE(completion.value().common.constraint.has_value());
  EXPECT_EQ(completion.value().common.constraint->spec.kind, Kind::kChoice);

  auto chat = ParseChatRequest(
      ordered_json{{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                   {"response_format", {{"type", "json_object"}}}},
      kVocab);
  ASSERT_TRUE(chat.ok()) << chat.error().message;
  ASSERT_TRUE(chat.value().common.constraint.has_value());
  EXPECT_EQ(chat.value().common.constraint->spec.kind, Kind::kJsonObject);

  auto plain = ParseChatRequest(ordered_json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}},
                                kVocab);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain.value().common.constraint.has_value());
}

}  // namespace
}  // namespace tachyon::server
