#include "server/protocol.h"

#include <gtest/gtest.h>

#include "server/json_limits.h"
#include "server/sse.h"
#include "server/testing/fake_backend.h"

namespace tachyon::server {
namespace {

using nlohmann::json;

ApiError CompletionError(const json& body) {
  auto r = ParseCompletionRequest(body, FakeBackend::kVocabSize);
  EXPECT_FALSE(r.ok()) << body.dump();
  return r.ok() ? ApiError{} : r.error();
}

TEST(ProtocolTest, ParsesCompletionDefaults) {
  auto r = ParseCompletionRequest(json{{"model", "m"}, {"prompt", "hi"}}, FakeBackend::kVocabSize);
  ASSERT_TRUE(r.ok());
  const CompletionRequest& c = r.value();
  EXPECT_EQ(c.common.model, "m");
  ASSERT_EQ(c.prompts.size(), 1u);
  EXPECT_EQ(std::get<std::string>(c.prompts[0]), "hi");
  EXPECT_FALSE(c.common.max_tokens_set);
  EXPECT_EQ(c.common.sampling.temperature, 1.0f);
  EXPECT_EQ(c.common.n, 1);
  EXPECT_FALSE(c.common.stream);
  EXPECT_EQ(c.common.sampling.logprobs, -1);
}

TEST(ProtocolTest, ParsesEveryCompletionParameter) {
  json body = {{"prompt", json::array({"a", "b"})},
               {"max_tokens", 7},
               {"temperature", 0.5},
               {"top_p", 0.9},
               {"top_k", 40},
               {"min_p", 0.05},
               {"presence_penalty", 0.5},
               {"frequency_penalty", -0.5},
               {"repetition_penalty", 1.1},
               {"logit_bias", {{"65", 5}, {"66", -100}}},
               {"seed", 42},
               {"stop", json::array({"x", "yz"})},
               {"n", 3},
               {"logprobs", 2},
               {"echo", true},
               {"ignore_eos", true},
               {"priority", -3},
               {"min_tokens", 2},
               {"cache_salt", "tenant-a"},
               {"stop_token_ids", {3, 9}},
               {"user", "u1"},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}},
               {"some_unknown_field", {1, 2, 3}}};
  auto r = ParseCompletionRequest(body, FakeBackend::kVocabSize);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const CompletionRequest& c = r.value();
  const sampling::SamplingParams& s = c.common.sampling;
  EXPECT_EQ(c.prompts.size(), 2u);
  EXPECT_TRUE(c.common.max_tokens_set);
  EXPECT_EQ(s.max_tokens, 7);
  EXPECT_FLOAT_EQ(s.temperature, 0.5f);
  EXPECT_FLOAT_EQ(s.top_p, 0.9f);
  EXPECT_EQ(s.top_k, 40);
  EXPECT_FLOAT_EQ(s.min_p, 0.05f);
  EXPECT_FLOAT_EQ(s.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(s.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(s.repetition_penalty, 1.1f);
  EXPECT_EQ(s.logit_bias, (std::vector<std::pair<int32_t, float>>{{65, 5.0f}, {66, -100.0f}}));
  EXPECT_EQ(*s.seed, 42u);
  EXPECT_EQ(s.stop, (std::vector<std::string>{"x", "yz"}));
  EXPECT_EQ(c.common.n, 3);
  EXPECT_EQ(s.logprobs, 2);
  EXPECT_TRUE(c.echo);
  EXPECT_TRUE(s.ignore_eos);
  EXPECT_EQ(c.common.priority, -3);
  EXPECT_EQ(s.min_tokens, 2);
  EXPECT_EQ(c.common.cache_salt, "tenant-a");
  EXPECT_EQ(s.stop_token_ids, (std::vector<int32_t>{3, 9}));
  EXPECT_EQ(c.common.user, "u1");
  EXPECT_TRUE(c.common.stream);
  EXPECT_TRUE(c.common.include_usage);
}

TEST(ProtocolTest, ParsesTokenPrompts) {
  auto one = ParseCompletionRequest(json{{"prompt", {1, 2, 3}}}, FakeBackend::kVocabSize);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(std::get<std::vector<int32_t>>(one.value().prompts[0]),
            (std::vector<int32_t>{1, 2, 3}));
  auto many = ParseCompletionRequest(json{{"prompt", {{1, 2}, {3}}}}, FakeBackend::kVocabSize);
  ASSERT_TRUE(many.ok());
  EXPECT_EQ(many.value().prompts.size(), 2u);
  EXPECT_EQ(CompletionError({{"prompt", {1, 999}}}).param, "prompt");
  EXPECT_EQ(CompletionError({{"prompt", json::array()}}).param, "prompt");
  EXPECT_EQ(CompletionError({{"prompt", {{1}, json::array()}}}).param, "prompt");
  EXPECT_EQ(CompletionError(json::object()).param, "prompt");
  EXPECT_EQ(CompletionError({{"prompt", 5}}).param, "prompt");
}

TEST(ProtocolTest, NullMeansUnset) {
  auto r = ParseCompletionRequest(
      json{{"prompt", "x"}, {"temperature", nullptr}, {"max_tokens", nullptr}, {"stop", nullptr}},
      FakeBackend::kVocabSize);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().common.sampling.temperature, 1.0f);
  EXPECT_FALSE(r.value().common.max_tokens_set);
}

TEST(ProtocolTest, RejectsWrongTypesAndRangesNamingTheParam) {
  struct Case {
    const char* field;
    json value;
  };
  std::vector<Case> cases = {
      {"temperature", "hot"},
      {"temperature", 2.5},
      {"temperature", -0.1},
      {"top_p", 0},
      {"top_p", 1.5},
      {"top_k", -2},
      {"top_k", 1.5},
      {"min_p", 2},
      {"presence_penalty", 3},
      {"frequency_penalty", -3},
      {"repetition_penalty", 0},
      {"max_tokens", 0},
      {"max_tokens", "10"},
      {"n", 0},
      {"n", 100},
      {"logprobs", 21},
      {"logprobs", true},
      {"echo", "yes"},
      {"stream", 1},
      {"stop", 5},
      {"stop", json::array({"a", 1})},
      {"stop", json::array({"a", std::string(kMaxStopStringBytes + 1, 's')})},
      {"seed", "x"},
      {"logit_bias", {{"abc", 1}}},
      {"logit_bias", {{"5", 101}}},
      {"logit_bias", {{"100000", 1}}},
      {"user", 5},
      {"priority", "high"},
      {"priority", 1e9},
      {"min_tokens", -1},
      {"min_tokens", "3"},
      {"min_tokens", 1.5},
      {"cache_salt", 5},
      {"cache_salt", ""},
      {"cache_salt", std::string(kMaxCacheSaltBytes + 1, 's')},
      {"stop_token_ids", "x"},
      {"stop_token_ids", json::array({1, "a"})},
      {"stop_token_ids", json::array({100000})},
      {"stop_token_ids", json::array({-1})},
  };
  for (const auto& c : cases) {
    json body = {{"prompt", "x"}, {c.field, c.value}};
    ApiError e = CompletionError(body);
    EXPECT_EQ(e.http_status, 400) << c.field;
    EXPECT_EQ(e.param, c.field) << body.dump();
    EXPECT_EQ(e.type, "invalid_request_error");
    EXPECT_NE(e.message.find(c.field), std::string::npos) << e.message;
  }
}

TEST(ProtocolTest, MinTokensAndCacheSaltOnBothEndpoints) {
  // min_tokens may not exceed max_tokens (or chat's max_completion_tokens).
  ApiError e = CompletionError({{"prompt", "x"}, {"max_tokens", 4}, {"min_tokens", 5}});
  EXPECT_EQ(e.param, "min_tokens");
  EXPECT_NE(e.message.find("max_tokens"), std::string::npos) << e.message;
  auto ok = ParseCompletionRequest({{"prompt", "x"}, {"max_tokens", 5}, {"min_tokens", 5}},
                                   FakeBackend::kVocabSize);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok.value().common.sampling.min_tokens, 5);
  // Unset max_tokens: the server checks min_tokens against the context later.
  ok = ParseCompletionRequest({{"prompt", "x"}, {"min_tokens", 100}}, FakeBackend::kVocabSize);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok.value().common.sampling.min_tokens, 100);

  const json messages = {{{"role", "user"}, {"content", "x"}}};
  auto chat = ParseChatRequest(
      {{"messages", messages}, {"min_tokens", 3}, {"cache_salt", "s1"}, {"stop_token_ids", {7}}},
      FakeBackend::kVocabSize);
  ASSERT_TRUE(chat.ok()) << chat.error().message;
  EXPECT_EQ(chat.value().common.sampling.min_tokens, 3);
  EXPECT_EQ(chat.value().common.cache_salt, "s1");
  EXPECT_EQ(chat.value().common.sampling.stop_token_ids, std::vector<int32_t>{7});
  auto bad =
      ParseChatRequest({{"messages", messages}, {"max_completion_tokens", 2}, {"min_tokens", 3}},
                       FakeBackend::kVocabSize);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().param, "min_tokens");
  bad = ParseChatRequest({{"messages", messages}, {"cache_salt", json::array({"a"})}},
                         FakeBackend::kVocabSize);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().param, "cache_salt");
  // Absent: no minimum and the shared namespace.
  chat = ParseChatRequest({{"messages", messages}}, FakeBackend::kVocabSize);
  ASSERT_TRUE(chat.ok());
  EXPECT_EQ(chat.value().common.sampling.min_tokens, 0);
  EXPECT_EQ(chat.value().common.cache_salt, "");
}

TEST(ProtocolTest, StreamOptionsNeedStream) {
  EXPECT_EQ(CompletionError({{"prompt", "x"}, {"stream_options", {{"include_usage", true}}}}).param,
            "stream_options");
  EXPECT_EQ(CompletionError(
                {{"prompt", "x"}, {"stream", true}, {"stream_options", {{"include_usage", "y"}}}})
                .param,
            "stream_options.include_usage");
}

TEST(ProtocolTest, ParsesChat) {
  json body = {
      {"model", "m"},
      {"messages",
       {{{"role", "system"}, {"content", "be brief"}},
        {{"role", "user"},
         {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}},
        {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array()}},
        {{"role", "tool"}, {"content", "42"}, {"tool_call_id", "t1"}}}},
      {"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}},
      {"tool_choice", "auto"},
      {"max_completion_tokens", 9},
      {"max_tokens", 3},
      {"logprobs", true},
      {"top_logprobs", 2}};
  auto r = ParseChatRequest(body, FakeBackend::kVocabSize);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const ChatRequest& c = r.value();
  EXPECT_EQ(c.common.sampling.max_tokens, 9);
  EXPECT_EQ(c.common.sampling.logprobs, 2);
  const json& ctx = c.template_context;
  EXPECT_EQ(ctx["messages"][1]["content"], "a\nb");
  EXPECT_TRUE(ctx["messages"][2]["content"].is_null());
  EXPECT_EQ(ctx["messages"][3]["tool_call_id"], "t1");
  EXPECT_EQ(ctx["tools"][0]["function"]["name"], "f");
  EXPECT_EQ(ctx["add_generation_prompt"], true);
}

TEST(ProtocolTest, RejectsBadChat) {
  auto err = [](const json& body) {
    auto r = ParseChatRequest(body, FakeBackend::kVocabSize);
    EXPECT_FALSE(r.ok()) << body.dump();
    return r.ok() ? std::string() : r.error().param;
  };
  EXPECT_EQ(err(json::object()), "messages");
  EXPECT_EQ(err({{"messages", json::array()}}), "messages");
  EXPECT_EQ(err({{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}), "messages[0].role");
  EXPECT_EQ(err({{"messages", {{{"role", "user"}}}}}), "messages[0].content");
  EXPECT_EQ(err({{"messages", {{{"role", "user"}, {"content", 5}}}}}), "messages[0].content");
  EXPECT_EQ(err({{"messages",
                  {{{"role", "user"},
                    {"content", {{{"type", "image_url"}, {"image_url", {{"url", "x"}}}}}}}}}}),
            "messages[0].content");
  json ok_msgs = {{{"role", "user"}, {"content", "x"}}};
  EXPECT_EQ(err({{"messages", ok_msgs}, {"top_logprobs", 2}}), "top_logprobs");
  EXPECT_EQ(err({{"messages", ok_msgs}, {"logprobs", true}, {"top_logprobs", 30}}), "top_logprobs");
  EXPECT_EQ(err({{"messages", ok_msgs}, {"tools", "x"}}), "tools");
  EXPECT_EQ(err({{"messages", ok_msgs}, {"tool_choice", "sometimes"}}), "tool_choice");
  EXPECT_EQ(err({{"messages", ok_msgs}, {"max_completion_tokens", -1}}), "max_completion_tokens");
}

TEST(ProtocolTest, ToolChoiceNoneHidesTools) {
  json body = {{"messages", {{{"role", "user"}, {"content", "x"}}}},
               {"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}},
               {"tool_choice", "none"}};
  auto r = ParseChatRequest(body, FakeBackend::kVocabSize);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.value().template_context["tools"].is_null());
  EXPECT_TRUE(r.value().tool_names.empty());
  EXPECT_EQ(r.value().tool_choice.mode, ToolChoice::Mode::kNone);
}

TEST(ProtocolTest, SamplingDefaultsFillUnsetFields) {
  SamplingDefaults d;
  d.temperature = 0.7f;
  d.top_p = 0.8f;
  d.top_k = 20;
  d.min_p = 0.05f;
  d.repetition_penalty = 1.1f;
  auto r = ParseCompletionRequest({{"prompt", "x"}}, FakeBackend::kVocabSize, d);
  ASSERT_TRUE(r.ok());
  const sampling::SamplingParams& s = r.value().common.sampling;
  EXPECT_FLOAT_EQ(s.temperature, 0.7f);
  EXPECT_FLOAT_EQ(s.top_p, 0.8f);
  EXPECT_EQ(s.top_k, 20);
  EXPECT_FLOAT_EQ(s.min_p, 0.05f);
  EXPECT_FLOAT_EQ(s.repetition_penalty, 1.1f);
  // What the request sets wins; null means unset.
  auto c = ParseChatRequest({{"messages", {{{"role", "user"}, {"content", "x"}}}},
                             {"temperature", 0},
                             {"top_p", nullptr}},
                            FakeBackend::kVocabSize, d);
  ASSERT_TRUE(c.ok());
  EXPECT_FLOAT_EQ(c.value().common.sampling.temperature, 0.0f);
  EXPECT_FLOAT_EQ(c.value().common.sampling.top_p, 0.8f);
}

TEST(ProtocolTest, ToolChoiceForms) {
  json tools = {{{"type", "function"}, {"function", {{"name", "f"}}}},
                {{"type", "function"}, {"function", {{"name", "g"}}}}};
  json msgs = {{{"role", "user"}, {"content", "x"}}};
  auto parse = [&](json extra) {
    json body = {{"messages", msgs}, {"tools", tools}};
    body.update(extra);
    return ParseChatRequest(body, FakeBackend::kVocabSize);
  };
  auto r = parse(json::object());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().tool_choice.mode, ToolChoice::Mode::kAuto);
  EXPECT_EQ(r.value().tool_names, (std::vector<std::string>{"f", "g"}));
  EXPECT_TRUE(r.value().parallel_tool_calls);
  r = parse({{"tool_choice", "required"}, {"parallel_tool_calls", false}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().tool_choice.mode, ToolChoice::Mode::kRequired);
  EXPECT_FALSE(r.value().parallel_tool_calls);
  r = parse({{"tool_choice", {{"type", "function"}, {"function", {{"name", "g"}}}}}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().tool_choice.mode, ToolChoice::Mode::kFunction);
  EXPECT_EQ(r.value().tool_choice.function, "g");
  // The template sees tool_choice as given.
  EXPECT_EQ(r.value().template_context["tool_choice"]["function"]["name"], "g");
  for (json bad : {json{{"tool_choice", {{"type", "function"}, {"function", {{"name", "h"}}}}}},
                   json{{"tool_choice", {{"type", "function"}}}}, json{{"tool_choice", 3}}}) {
    auto e = parse(bad);
    ASSERT_FALSE(e.ok()) << bad.dump();
    EXPECT_EQ(e.error().param, "tool_choice");
  }
  auto e = parse({{"parallel_tool_calls", "yes"}});
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().param, "parallel_tool_calls");
  e = ParseChatRequest(json{{"messages", msgs}, {"tool_choice", "required"}},
                       FakeBackend::kVocabSize);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().param, "tool_choice");
}

TEST(ProtocolTest, MalformedJson) {
  EXPECT_FALSE(ParseJsonBody("{\"a\": ").ok());
  EXPECT_FALSE(ParseJsonBody("[1, 2]").ok());
  EXPECT_EQ(ParseJsonBody("").error().http_status, 400);
  EXPECT_TRUE(ParseJsonBody("{}").ok());
}

TEST(ProtocolTest, ErrorShape) {
  ApiError e = InvalidParam("temperature", "bad");
  json j = json::parse(e.Body());
  EXPECT_EQ(j["error"]["message"], "bad");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "temperature");
  EXPECT_TRUE(j["error"]["code"].is_null());
  ApiError busy = ApiErrorFromStatus(ResourceExhausted("queue full"));
  EXPECT_EQ(busy.http_status, 429);
  EXPECT_GT(busy.retry_after_s, 0);
  EXPECT_EQ(ApiErrorFromStatus(Unauthenticated("x")).http_status, 401);
  EXPECT_EQ(ApiErrorFromStatus(Internal("x")).http_status, 500);
}

TEST(ProtocolTest, SseFramingSurvivesInvalidUtf8AndNewlines) {
  json event = {{"text", std::string("a\nb\xff\xe2\x82")}};
  std::string s = SseData(event);
  EXPECT_EQ(s.rfind("data: ", 0), 0u);
  EXPECT_EQ(s.substr(s.size() - 2), "\n\n");
  EXPECT_EQ(s.find('\n'), s.size() - 2);  // the event is a single line
  json back = json::parse(s.substr(6));
  EXPECT_EQ(back["text"], "a\nb\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
}

// Found by schemathesis: 5e-324 is in (0, 1] but a float rounds it to 0; it must not be rejected.
TEST(ProtocolTest, TinyPositiveValuesOfOpenRangesAreAccepted) {
  auto r = ParseCompletionRequest(
      json{{"prompt", "x"}, {"top_p", 5e-324}, {"repetition_penalty", 1e-300}},
      FakeBackend::kVocabSize);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_GT(r.value().common.sampling.top_p, 0.0f);
  EXPECT_GT(r.value().common.sampling.repetition_penalty, 0.0f);
}

}  // namespace
}  // namespace tachyon::server
