#include "server/anthropic_api.h"

#include <gtest/gtest.h>

#include "server/api.h"
#include "server/testing/fake_backend.h"
#include "server/testing/test_channel.h"

namespace tachyon::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

TEST(AnthropicParseTest, BlocksBecomeChatMessages) {
  auto r = ParseMessagesRequest(ordered_json::parse(R"({
    "model": "tiny", "max_tokens": 9, "temperature": 0.5, "top_k": 4, "stop_sequences": ["x"],
    "system": [{"type": "text", "text": "s1"}, {"type": "text", "text": "s2"}],
    "messages": [
      {"role": "user", "content": "q"},
      {"role": "assistant", "content": [{"type": "text", "text": "looking"},
        {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
                                   {"type": "text", "text": "and?"}]}],
    "tools": [{"name": "f", "description": "d", "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "any", "disable_parallel_tool_use": true}})"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  const ordered_json& chat = r.value();
  EXPECT_EQ(chat["max_tokens"], 9);
  EXPECT_EQ(chat["top_k"], 4);
  EXPECT_EQ(chat["stop"], ordered_json::array({"x"}));
  EXPECT_EQ(chat["tool_choice"], "required");
  EXPECT_EQ(chat["parallel_tool_calls"], false);
  EXPECT_EQ(chat["tools"][0]["function"]["parameters"]["type"], "object");
  const ordered_json& m = chat["messages"];
  ASSERT_EQ(m.size(), 5u) << m.dump();
  EXPECT_EQ(m[0], ordered_json({{"role", "system"}, {"content", "s1\ns2"}}));
  EXPECT_EQ(m[2]["content"], "looking");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["arguments"], R"({"a":1})");
  EXPECT_EQ(m[3], ordered_json({{"role", "tool"}, {"tool_call_id", "t1"}, {"content", "ok"}}));
  EXPECT_EQ(m[4], ordered_json({{"role", "user"}, {"content", "and?"}}));
}

TEST(AnthropicParseTest, ErrorsNameTheField) {
  struct Case {
    const char* body;
    const char* param;
  };
  const std::string msgs = R"("messages": [{"role": "user", "content": "q"}])";
  for (const Case& c : {
           Case{R"({"messages": [{"role": "user", "content": "q"}]})", "max_tokens"},
           Case{R"({"max_tokens": 1})", "messages"},
           Case{R"({"max_tokens": 1, "messages": [{"role": "system", "content": "q"}]})",
                "messages[0].role"},
           Case{R"({"max_tokens": 1, "messages": [{"role": "user", "content": [
                {"type": "image", "source": {}}]}]})",
                "messages[0].content[0].type"},
           Case{R"({"max_tokens": 1, "messages": [{"role": "user", "content": [
                {"type": "tool_use", "id": "a", "name": "f", "input": {}}]}]})",
                "messages[0].content[0].type"},
           Case{R"({"max_tokens": 1, "messages": [{"role": "assistant", "content": "x"}]})",
                "messages"},
           Case{R"({"max_tokens": 1, "temperature": 1.5, "messages": [{"role": "user",
                "content": "q"}]})",
                "temperature"},
           Case{R"({"max_tokens": 1, "thinking": {"type": "enabled", "budget_tokens": 9},
                "messages": [{"role": "user", "content": "q"}]})",
                "thinking"},
           Case{R"({"max_tokens": 1, "output_config": {"format": {"type": "json_schema"}},
                "messages": [{"role": "user", "content": "q"}]})",
                "output_config.format"},
           Case{R"({"max_tokens": 1, "tools": [{"type": "web_search_20250305", "name": "w"}],
                "messages": [{"role": "user", "content": "q"}]})",
                "tools[0].type"},
           Case{R"({"max_tokens": 1, "tool_choice": {"type": "tool"},
                "messages": [{"role": "user", "content": "q"}]})",
                "tool_choice.name"},
       }) {
    auto r = ParseMessagesRequest(ordered_json::parse(c.body));
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.error().param, c.param) << c.body << ": " << r.error().message;
  }
  // count_tokens takes no max_tokens.
  EXPECT_TRUE(ParseMessagesRequest(ordered_json::parse("{" + msgs + "}"), true).ok());
}

TEST(AnthropicErrorTest, ShapeAndTypes) {
  ApiError e = InvalidParam("max_tokens", "'max_tokens' is required.");
  json body = json::parse(AnthropicErrorBody(e));
  EXPECT_EQ(body["type"], "error");
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(body["error"]["message"], "'max_tokens' is required.");
  for (auto [status, type] : {std::pair{401, "authentication_error"},
                              {404, "not_found_error"},
                              {429, "rate_limit_error"},
                              {503, "overloaded_error"},
                              {500, "api_error"},
                              {413, "request_too_large"}}) {
    e.http_status = status;
    EXPECT_EQ(json::parse(AnthropicErrorBody(e))["error"]["type"], type) << status;
  }
  EXPECT_TRUE(IsAnthropicPath("/v1/messages"));
  EXPECT_TRUE(IsAnthropicPath("/v1/messages/count_tokens"));
  EXPECT_FALSE(IsAnthropicPath("/v1/messagesx"));
  EXPECT_FALSE(IsAnthropicPath("/v1/chat/completions"));
}

class AnthropicApiTest : public ::testing::Test {
 protected:
  std::shared_ptr<TestChannel> Call(const std::string& path, const std::string& body,
                                    Headers headers = {}) {
    auto ch = std::make_shared<TestChannel>();
    HttpRequest req;
    req.method = "POST";
    req.path = path;
    req.body = body;
    req.headers = std::move(headers);
    api_.Handle(std::move(req), ch);
    EXPECT_TRUE(ch->Pump());
    return ch;
  }
  FakeBackend backend_;
  OpenAiApi api_{&backend_, ApiOptions{{"tiny"}, "key"}};
};

TEST_F(AnthropicApiTest, StreamEventsAndAuth) {
  const std::string body =
      R"({"max_tokens": 3, "stream": true, "messages": [{"role": "user", "content": "hi"}]})";
  auto denied = Call("/v1/messages", body);
  EXPECT_EQ(denied->response.status, 401);
  EXPECT_EQ(denied->Json()["error"]["type"], "authentication_error");
  auto ch = Call("/v1/messages", body, {{"x-api-key", "key"}});
  ASSERT_TRUE(ch->streaming) << ch->response.body;
  std::vector<std::string> names;
  std::string text;
  for (size_t pos = 0; (pos = ch->stream.find("event: ", pos)) != std::string::npos;) {
    size_t nl = ch->stream.find('\n', pos);
    names.push_back(ch->stream.substr(pos + 7, nl - pos - 7));
    size_t end = ch->stream.find("\n\n", nl);
    json data = json::parse(ch->stream.substr(nl + 7, end - nl - 7));
    EXPECT_EQ(data["type"], names.back());
    if (names.back() == "content_block_delta") text += data["delta"]["text"];
    if (names.back() == "message_delta") {
      EXPECT_EQ(data["delta"]["stop_reason"], "max_tokens");
      EXPECT_EQ(data["usage"]["output_tokens"], 3);
    }
    pos = end;
  }
  const std::vector<std::string> want = {"message_start",       "ping",
                                         "content_block_start", "content_block_delta",
                                         "content_block_delta", "content_block_delta",
                                         "content_block_stop",  "message_delta",
                                         "message_stop"};
  EXPECT_EQ(names, want);
  EXPECT_EQ(text, "Onc");
}

TEST_F(AnthropicApiTest, MessageAndCountTokens) {
  Headers auth = {{"authorization", "Bearer key"}};
  auto ch = Call("/v1/messages",
                 R"({"max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]})", auth);
  ASSERT_EQ(ch->response.status, 200) << ch->response.body;
  json m = ch->Json();
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["content"][0], json({{"type", "text"}, {"text", "On"}}));
  EXPECT_EQ(m["stop_reason"], "max_tokens");
  // "user: hi\nassistant:" is 19 byte tokens.
  EXPECT_EQ(
      m["usage"]["input_tokens"].get<int>() + m["usage"]["cache_read_input_tokens"].get<int>(), 19);
  auto count = Call("/v1/messages/count_tokens",
                    R"({"messages": [{"role": "user", "content": "hi"}]})", auth);
  ASSERT_EQ(count->response.status, 200) << count->response.body;
  EXPECT_EQ(count->Json()["input_tokens"], 19);
  auto bad = Call("/v1/messages", R"({"max_tokens": 0, "messages": [{"role": "user",
                  "content": "hi"}]})",
                  auth);
  EXPECT_EQ(bad->response.status, 400);
  EXPECT_EQ(bad->Json()["type"], "error");
  auto unknown = Call("/v1/messages", R"({"model": "claude", "max_tokens": 1, "messages": [
                      {"role": "user", "content": "hi"}]})",
                      auth);
  EXPECT_EQ(unknown->response.status, 404);
  EXPECT_EQ(unknown->Json()["error"]["type"], "not_found_error");
}

}  // namespace
}  // namespace tachyon::server
