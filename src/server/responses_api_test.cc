#include "server/responses_api.h"

#include <gtest/gtest.h>

#include "server/api.h"
#include "server/testing/fake_backend.h"
#include "server/testing/test_channel.h"

namespace tachyon::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

ApiResult<ResponsesRequest> Parse(const char* body, ResponseStore& store) {
  return ParseResponsesRequest(ordered_json::parse(body), store);
}

TEST(ResponsesParseTest, InputItemsBecomeChatMessages) {
  ResponseStore store;
  auto r = Parse(R"({"instructions": "Be brief.", "max_output_tokens": 7, "temperature": 0,
    "top_k": 3, "input": [
      {"role": "user", "content": [{"type": "input_text", "text": "a"},
                                   {"type": "input_text", "text": "b"}]},
      {"type": "message", "role": "assistant", "content": "let me look"},
      {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "c1", "output": "42"}],
    "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
    "tool_choice": {"type": "function", "name": "f"}})",
                 store);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const ordered_json& chat = r.value().chat_body;
  EXPECT_EQ(chat["max_completion_tokens"], 7);
  EXPECT_EQ(chat["temperature"], 0);
  EXPECT_EQ(chat["top_k"], 3);
  const ordered_json& m = chat["messages"];
  ASSERT_EQ(m.size(), 4u) << m.dump();
  EXPECT_EQ(m[0], ordered_json({{"role", "system"}, {"content", "Be brief."}}));
  EXPECT_EQ(m[1]["content"], "a\nb");
  EXPECT_EQ(m[2]["role"], "assistant");
  EXPECT_EQ(m[2]["content"], "let me look");  // the call joins the assistant's turn
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(m[3], ordered_json({{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "42"}}));
  EXPECT_EQ(chat["tools"][0]["function"]["name"], "f");
  EXPECT_EQ(chat["tool_choice"]["function"]["name"], "f");
  // The stored history leaves the instructions out.
  EXPECT_EQ(r.value().history.size(), 3u);
  EXPECT_EQ(r.value().echo["instructions"], "Be brief.");
}

TEST(ResponsesParseTest, PreviousResponseIdPrependsTheStoredTurns) {
  ResponseStore store;
  store.Put("resp-1", ordered_json::array({{{"role", "user"}, {"content", "hi"}},
                                           {{"role", "assistant"}, {"content", "hello"}}}));
  auto r = Parse(R"({"input": "again", "previous_response_id": "resp-1"})", store);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const ordered_json& m = r.value().chat_body["messages"];
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[1]["content"], "hello");
  EXPECT_EQ(m[2]["content"], "again");
  auto missing = Parse(R"({"input": "x", "previous_response_id": "resp-2"})", store);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().param, "previous_response_id");
}

TEST(ResponsesParseTest, TextFormatBecomesTheChatResponseFormat) {
  ResponseStore store;
  auto r = Parse(R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "n",
                 "schema": {"type": "object"}, "strict": true}}})",
                 store);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().chat_body["response_format"],
            nlohmann::ordered_json::parse(R"({"type": "json_schema", "json_schema":
                {"name": "n", "schema": {"type": "object"}, "strict": true}})"));
  auto o = Parse(R"({"input": "x", "text": {"format": {"type": "json_object"}}})", store);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o.value().chat_body["response_format"], nlohmann::ordered_json({{"type", "json_object"}}));
  auto t = Parse(R"({"input": "x", "text": {"format": {"type": "text"}}})", store);
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t.value().chat_body.contains("response_format"));
  ApiError e = InvalidParam("response_format.json_schema.schema",
                            "Invalid value for 'response_format.json_schema.schema': x");
  ToResponsesParam(e);
  EXPECT_EQ(e.param, "text.format.schema");
  EXPECT_EQ(e.message, "Invalid value for 'text.format.schema': x");
}

TEST(ResponsesParseTest, ErrorsNameTheResponsesField) {
  ResponseStore store;
  struct Case {
    const char* body;
    const char* param;
  };
  for (const Case& c : {
           Case{R"({})", "input"},
           Case{R"({"input": []})", "input"},
           Case{R"({"input": [{"role": "robot", "content": "x"}]})", "input[0].role"},
           Case{R"({"input": [{"role": "user", "content": [{"type": "input_image"}]}]})",
                "input[0].content[0]"},
           Case{R"({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]})",
                "input[0].call_id"},
           Case{R"({"input": [{"type": "reasoning"}]})", "input[0].type"},
           Case{R"({"input": "x", "text": {"format": {"type": "xml"}}})", "text.format"},
           Case{R"({"input": "x", "tools": [{"type": "web_search"}]})", "tools[0].type"},
           Case{R"({"input": "x", "tools": [{"type": "function", "name": "f",
                    "description": 3}]})",
                "tools[0].description"},
           Case{R"({"input": "x", "background": true})", "background"},
           Case{R"({"input": "x", "truncation": "auto"})", "truncation"},
           Case{R"({"input": "x", "store": "yes"})", "store"},
           Case{R"({"input": "x", "instructions": 5})", "instructions"},
       }) {
    auto r = Parse(c.body, store);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.error().param, c.param) << c.body << ": " << r.error().message;
    EXPECT_EQ(r.error().http_status, 400);
  }
  ApiError e = InvalidParam("messages[2].content", "Invalid value for 'messages[2].content': x");
  ToResponsesParam(e);
  EXPECT_EQ(e.param, "input[2].content");
  EXPECT_EQ(e.message, "Invalid value for 'input[2].content': x");
}

// The adapter over a real job (FakeBackend): the documented stream and the stored turn.
class ResponsesApiTest : public ::testing::Test {
 protected:
  std::shared_ptr<TestChannel> Post(const json& body) {
    auto ch = std::make_shared<TestChannel>();
    HttpRequest req;
    req.method = "POST";
    req.path = "/v1/responses";
    req.body = body.dump();
    api_.Handle(std::move(req), ch);
    EXPECT_TRUE(ch->Pump());
    return ch;
  }
  FakeBackend backend_;
  OpenAiApi api_{&backend_, ApiOptions{{"tiny"}}};
};

std::vector<json> Events(const std::string& stream) {
  std::vector<json> out;
  size_t pos = 0;
  while ((pos = stream.find("data: ", pos)) != std::string::npos) {
    size_t end = stream.find("\n\n", pos);
    out.push_back(json::parse(stream.substr(pos + 6, end - pos - 6)));
    pos = end;
  }
  return out;
}

TEST_F(ResponsesApiTest, StreamFollowsTheDocumentedSequence) {
  auto ch = Post({{"input", "hi"}, {"max_output_tokens", 4}, {"stream", true}});
  ASSERT_TRUE(ch->streaming);
  std::vector<json> events = Events(ch->stream);
  std::vector<std::string> types;
  std::string text;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i]["sequence_number"], i);
    types.push_back(events[i]["type"]);
    if (types.back() == "response.output_text.delta") text += events[i]["delta"];
  }
  const std::vector<std::string> want = {
      "response.created",           "response.in_progress",
      "response.output_item.added", "response.content_part.added",
      "response.output_text.delta", "response.output_text.delta",
      "response.output_text.delta", "response.output_text.delta",
      "response.output_text.done",  "response.content_part.done",
      "response.output_item.done",  "response.incomplete"};
  EXPECT_EQ(types, want);
  EXPECT_EQ(text, "Once");
  const json& final = events.back()["response"];
  EXPECT_EQ(final["status"], "incomplete");
  EXPECT_EQ(final["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(final["output"][0]["content"][0]["text"], "Once");
  EXPECT_EQ(final["usage"]["output_tokens"], 4);
  EXPECT_NE(ch->stream.find("event: response.created\ndata: "), std::string::npos);
  EXPECT_EQ(ch->stream.find("[DONE]"), std::string::npos);
}

TEST_F(ResponsesApiTest, StoredUnlessStoreFalse) {
  auto first = Post({{"input", "hi"}, {"max_output_tokens", 3}});
  ASSERT_EQ(first->response.status, 200) << first->response.body;
  json r = first->Json();
  EXPECT_EQ(r["output"][0]["content"][0]["text"], "Onc");
  auto second =
      Post({{"input", "more"}, {"previous_response_id", r["id"]}, {"max_output_tokens", 1}});
  ASSERT_EQ(second->response.status, 200) << second->response.body;
  // The prompt carries the first turn: "user: hi\nassistant: Onc\nuser: more\nassistant:".
  const auto prompts = backend_.SubmittedPrompts();
  ASSERT_EQ(prompts.size(), 2u);
  const std::string prompt(prompts[1].begin(), prompts[1].end());
  EXPECT_NE(prompt.find("assistant: Onc\nuser: more\n"), std::string::npos) << prompt;
  auto unstored = Post({{"input", "x"}, {"store", false}, {"max_output_tokens", 1}});
  auto third = Post({{"input", "y"}, {"previous_response_id", unstored->Json()["id"]}});
  EXPECT_EQ(third->response.status, 400);
  EXPECT_EQ(third->Json()["error"]["param"], "previous_response_id");
}

}  // namespace
}  // namespace tachyon::server
