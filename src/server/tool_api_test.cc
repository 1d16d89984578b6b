// Tool calling through the OpenAI API layer, with FakeBackend scripting the model's reply.
#include <gtest/gtest.h>

#include <thread>

#include "server/api.h"
#include "server/testing/fake_backend.h"
#include "server/testing/test_channel.h"

namespace tachyon::server {
namespace {

using nlohmann::json;

const std::string kReply =
    "Let me look.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
    "\"Paris\"}}\n</tool_call>";

json Tools() {
  return json::array(
      {{{"type", "function"},
        {"function",
         {{"name", "get_weather"},
          {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}},
       {{"type", "function"}, {"function", {{"name", "get_time"}}}}});
}

json Messages() {
  return json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}});
}

class ToolApiTest : public ::testing::Test {
 protected:
  void Init(const std::string& reply, ToolCallFormat format = ToolCallFormat::kHermes) {
    FakeBackendOptions opts;
    opts.text = reply;
    opts.eos_after = static_cast<int>(reply.size());  // the reply once, then EOS
    backend_ = std::make_unique<FakeBackend>(opts);
    ApiOptions api_opts;
    api_opts.served_model_names = {"tiny"};
    api_opts.tool_call_format = format;
    api_ = std::make_unique<OpenAiApi>(backend_.get(), api_opts);
  }
  std::shared_ptr<TestChannel> Post(const json& body) {
    auto ch = std::make_shared<TestChannel>();
    api_->Handle(HttpRequest{"POST", "/v1/chat/completions", body.dump(), {}}, ch);
    EXPECT_TRUE(ch->Pump()) << body.dump();
    return ch;
  }
  void WaitIdle() {
    for (int i = 0; i < 500 && (backend_->Live() > 0 || api_->InFlight() > 0); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    EXPECT_EQ(backend_->Live(), 0);
    EXPECT_EQ(api_->InFlight(), 0u);
  }
  // The text of the last submitted prompt (FakeBackend: one token per byte).
  std::string LastPrompt() {
    auto prompts = backend_->SubmittedPrompts();
    std::string s;
    for (int32_t id : prompts.back()) s += backend_->TokenBytes(id);
    return s;
  }

  std::unique_ptr<FakeBackend> backend_;
  std::unique_ptr<OpenAiApi> api_;
};

TEST_F(ToolApiTest, NonStreamingAutoToolCall) {
  Init(kReply);
  json j = Post({{"messages", Messages()}, {"tools", Tools()}})->Json();
  const json& choice = j["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["content"], "Let me look.");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  const json& call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(call["function"]["arguments"], R"({"city":"Paris"})");
  EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>())["city"], "Paris");
  // Every generated token is counted, markers included.
  EXPECT_EQ(j["usage"]["completion_tokens"], static_cast<int>(kReply.size()));
  WaitIdle();
}

TEST_F(ToolApiTest, StreamingSendsContentThenToolCallDeltas) {
  Init(kReply);
  auto ch = Post({{"messages", Messages()}, {"tools", Tools()}, {"stream", true}});
  bool done = false;
  auto events = ch->Events(&done);
  ASSERT_TRUE(done);
  std::string content;
  std::vector<json> call_deltas;
  std::string finish;
  for (const json& e : events) {
    const json& c = e["choices"][0];
    if (c["delta"].contains("content")) {
      EXPECT_TRUE(call_deltas.empty()) << "content after a tool call: " << e.dump();
      content += c["delta"]["content"].get<std::string>();
    }
    if (c["delta"].contains("tool_calls")) call_deltas.push_back(c["delta"]["tool_calls"][0]);
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
  }
  EXPECT_EQ(content, "Let me look.");
  ASSERT_EQ(call_deltas.size(), 2u);
  EXPECT_EQ(call_deltas[0]["index"], 0);
  EXPECT_EQ(call_deltas[0]["type"], "function");
  EXPECT_EQ(call_deltas[0]["function"]["name"], "get_weather");
  EXPECT_EQ(call_deltas[0]["function"]["arguments"], "");
  EXPECT_FALSE(call_deltas[1].contains("id"));
  EXPECT_EQ(call_deltas[1]["function"]["arguments"], R"({"city":"Paris"})");
  EXPECT_EQ(finish, "tool_calls");
  WaitIdle();
}

TEST_F(ToolApiTest, NoToolsOrToolChoiceNoneLeaveTheTextAlone) {
  Init(kReply);
  json plain = Post({{"messages", Messages()}})->Json();
  EXPECT_EQ(plain["choices"][0]["message"]["content"], kReply);
  EXPECT_FALSE(plain["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(plain["choices"][0]["finish_reason"], "stop");
  json none = Post({{"messages", Messages()}, {"tools", Tools()}, {"tool_choice", "none"}})->Json();
  EXPECT_EQ(none["choices"][0]["message"]["content"], kReply);
  // A server without a tool-call format never parses.
  Init(kReply, ToolCallFormat::kNone);
  json off = Post({{"messages", Messages()}, {"tools", Tools()}})->Json();
  EXPECT_EQ(off["choices"][0]["message"]["content"], kReply);
  WaitIdle();
}

TEST_F(ToolApiTest, MalformedCallIsContent) {
  const std::string bad =
      "Hmm <tool_call>{\"name\": \"get_weather\", \"arguments\": {oops}</tool_call>";
  Init(bad);
  json j = Post({{"messages", Messages()}, {"tools", Tools()}})->Json();
  EXPECT_EQ(j["choices"][0]["message"]["content"], bad);
  EXPECT_FALSE(j["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  auto ch = Post({{"messages", Messages()}, {"tools", Tools()}, {"stream", true}});
  std::string content;
  for (const json& e : ch->Events()) {
    content += e["choices"][0]["delta"].value("content", "");
    EXPECT_FALSE(e["choices"][0]["delta"].contains("tool_calls"));
  }
  EXPECT_EQ(content, bad);
  WaitIdle();
}

TEST_F(ToolApiTest, NamedToolChoiceStartsTheCall) {
  // The prompt ends with the opening of a get_time call; the model only writes the arguments.
  Init("\"zone\": \"UTC\"}}\n</tool_call>");
  json body = {{"messages", Messages()},
               {"tools", Tools()},
               {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}}};
  json j = Post(body)->Json();
  EXPECT_EQ(LastPrompt(), "user: Weather in Paris?\nassistant:" +
                              ForcedToolCallPrefix(ToolCallFormat::kHermes, "get_time"));
  const json& m = j["choices"][0]["message"];
  EXPECT_TRUE(m["content"].is_null());
  ASSERT_EQ(m["tool_calls"].size(), 1u);
  EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_time");
  EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], R"({"zone":"UTC"})");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  // "required" with several tools opens a call without a name.
  Post({{"messages", Messages()}, {"tools", Tools()}, {"tool_choice", "required"}});
  EXPECT_EQ(LastPrompt(), "user: Weather in Paris?\nassistant:" +
                              ForcedToolCallPrefix(ToolCallFormat::kHermes, ""));
  WaitIdle();
}

TEST_F(ToolApiTest, ParallelToolCallsFalseKeepsOneCall) {
  const std::string two =
      "<tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call>\n"
      "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>";
  Init(two);
  json j = Post({{"messages", Messages()}, {"tools", Tools()}})->Json();
  EXPECT_EQ(j["choices"][0]["message"]["tool_calls"].size(), 2u);
  j = Post({{"messages", Messages()}, {"tools", Tools()}, {"parallel_tool_calls", false}})->Json();
  ASSERT_EQ(j["choices"][0]["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  WaitIdle();
}

TEST_F(ToolApiTest, ToolChoiceErrors) {
  Init(kReply);
  auto param_of = [&](const json& body) {
    auto ch = Post(body);
    EXPECT_EQ(ch->response.status, 400) << body.dump();
    return ch->Json()["error"]["param"];
  };
  json named = {{"type", "function"}, {"function", {{"name", "nope"}}}};
  EXPECT_EQ(param_of({{"messages", Messages()}, {"tools", Tools()}, {"tool_choice", named}}),
            "tool_choice");
  EXPECT_EQ(param_of({{"messages", Messages()}, {"tool_choice", "required"}}), "tool_choice");
  EXPECT_EQ(param_of({{"messages", Messages()}, {"tools", Tools()}, {"parallel_tool_calls", 1}}),
            "parallel_tool_calls");
  Init(kReply, ToolCallFormat::kNone);
  EXPECT_EQ(param_of({{"messages", Messages()}, {"tools", Tools()}, {"tool_choice", "required"}}),
            "tool_choice");
  EXPECT_EQ(backend_->SubmittedPrompts().size(), 0u);  // rejected before the backend
  WaitIdle();
}

}  // namespace
}  // namespace tachyon::server
