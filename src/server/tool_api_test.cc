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

// FakeBackend under a grammar takes '"', '}' or ']' where allowed, else the text's byte, else
// the lowest allowed byte: so strings come out empty and the first allowed name is taken.
TEST_F(ToolApiTest, AutoToolCallIsConstrainedOnceOpened) {
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
  EXPECT_EQ(call["function"]["arguments"], R"({"city":""})");
  // The request's grammar: free until "<tool_call>", then the call.
  ASSERT_NE(backend_->SubmittedRequests().back().grammar, nullptr);
  WaitIdle();
}

TEST_F(ToolApiTest, StreamingSendsContentThenIncrementalToolCallDeltas) {
  Init(kReply);
  json whole = Post({{"messages", Messages()}, {"tools", Tools()}})->Json();
  auto ch = Post({{"messages", Messages()}, {"tools", Tools()}, {"stream", true}});
  bool done = false;
  auto events = ch->Events(&done);
  ASSERT_TRUE(done);
  std::string content, arguments;
  std::vector<json> call_deltas;
  std::string finish;
  for (const json& e : events) {
    const json& c = e["choices"][0];
    if (c["delta"].contains("content")) {
      EXPECT_TRUE(call_deltas.empty()) << "content after a tool call: " << e.dump();
      content += c["delta"]["content"].get<std::string>();
    }
    if (c["delta"].contains("tool_calls")) {
      const json& d = c["delta"]["tool_calls"][0];
      EXPECT_EQ(d["index"], 0);
      EXPECT_EQ(d.contains("id"), call_deltas.empty()) << "id and name come first, once";
      arguments += d["function"]["arguments"].get<std::string>();
      call_deltas.push_back(d);
    }
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
  }
  EXPECT_EQ(content, "Let me look.");
  ASSERT_GT(call_deltas.size(), 2u) << "the arguments arrive as they are generated";
  EXPECT_EQ(call_deltas[0]["type"], "function");
  EXPECT_EQ(call_deltas[0]["function"]["name"], "get_weather");
  EXPECT_EQ(call_deltas[0]["function"]["arguments"], "");
  EXPECT_EQ(arguments, whole["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]);
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

TEST_F(ToolApiTest, AnOpenedCallIsAlwaysWellFormed) {
  // Unconstrained, this reply's call would be malformed; under the grammar the call parses.
  // (Padded: FakeBackend ends the reply after as many tokens as its text has.)
  Init("Hmm <tool_call>{\"name\": \"get_weather\", \"arguments\": {oops}</tool_call>" +
       std::string(40, ' '));
  json j = Post({{"messages", Messages()}, {"tools", Tools()}})->Json();
  const json& m = j["choices"][0]["message"];
  EXPECT_EQ(m["content"], "Hmm ");
  ASSERT_EQ(m["tool_calls"].size(), 1u);
  EXPECT_TRUE(
      json::parse(m["tool_calls"][0]["function"]["arguments"].get<std::string>()).is_object());
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  // With a response_format the calls are parsed from free text: malformed stays content.
  const std::string bad = "<tool_call>{\"name\": \"f\", \"arguments\": {oops}</tool_call>";
  Init(bad);
  j = Post({{"messages", Messages()},
            {"tools", Tools()},
            {"structured_outputs", {{"choice", {bad}}}}})
          ->Json();
  EXPECT_EQ(j["choices"][0]["message"]["content"], bad);
  EXPECT_FALSE(j["choices"][0]["message"].contains("tool_calls"));
  WaitIdle();
}

TEST_F(ToolApiTest, RequiredAndNamedToolChoiceForceACall) {
  Init(std::string(100, 'z'));  // the model would rather talk
  json body = {{"messages", Messages()},
               {"tools", Tools()},
               {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}}};
  json j = Post(body)->Json();
  // The prompt opens a call; the grammar picks the name (only get_time) and the arguments.
  EXPECT_EQ(LastPrompt(), "user: Weather in Paris?\nassistant:" +
                              ForcedToolCallPrefix(ToolCallFormat::kHermes, ""));
  const json& m = j["choices"][0]["message"];
  EXPECT_TRUE(m["content"].is_null());
  ASSERT_EQ(m["tool_calls"].size(), 1u);
  EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_time");
  EXPECT_TRUE(
      json::parse(m["tool_calls"][0]["function"]["arguments"].get<std::string>()).is_object());
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  // "required", one call only: the grammar ends after it.
  j = Post({{"messages", Messages()},
            {"tools", Tools()},
            {"tool_choice", "required"},
            {"parallel_tool_calls", false}})
          ->Json();
  ASSERT_EQ(j["choices"][0]["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "get_time");
  // Cut by max_tokens: the partial call is reported with finish_reason "length".
  body["max_tokens"] = 3;
  j = Post(body)->Json();
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  WaitIdle();
}

TEST_F(ToolApiTest, ReasoningComesFirstThenTheConstraint) {
  const std::string reply = "<think>\nplan: {no json}\n</think>\n\nx";
  FakeBackendOptions opts;
  opts.text = reply;
  backend_ = std::make_unique<FakeBackend>(opts);
  ApiOptions api_opts;
  api_opts.tool_call_format = ToolCallFormat::kHermes;
  api_opts.reasoning_end = "</think>";
  api_ = std::make_unique<OpenAiApi>(backend_.get(), api_opts);
  json j = Post({{"messages", Messages()}, {"response_format", {{"type", "json_object"}}}})->Json();
  const json& m = j["choices"][0]["message"];
  EXPECT_EQ(m["reasoning_content"], "plan: {no json}");
  EXPECT_TRUE(json::parse(m["content"].get<std::string>()).is_object()) << m.dump();
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  // A required tool call after the reasoning: the prompt opens nothing, the grammar does.
  j = Post({{"messages", Messages()}, {"tools", Tools()}, {"tool_choice", "required"}})->Json();
  EXPECT_EQ(LastPrompt(), "user: Weather in Paris?\nassistant:");
  EXPECT_EQ(j["choices"][0]["message"]["reasoning_content"], "plan: {no json}");
  ASSERT_EQ(j["choices"][0]["message"]["tool_calls"].size(), 1u) << j.dump();
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  // Unconstrained requests are left alone.
  j = Post({{"messages", Messages()}, {"max_tokens", 8}})->Json();
  EXPECT_EQ(j["choices"][0]["message"]["content"], reply.substr(0, 8));
  EXPECT_FALSE(j["choices"][0]["message"].contains("reasoning_content"));
  // A prompt that already closed the reasoning (here: the last assistant turn) is constrained
  // from the start.
  json closed = json::array({{{"role", "user"}, {"content", "hi"}},
                             {{"role", "assistant"}, {"content", "<think></think>"}}});
  j = Post({{"messages", closed},
            {"add_generation_prompt", false},
            {"response_format", {{"type", "json_object"}}}})
          ->Json();
  EXPECT_FALSE(j["choices"][0]["message"].contains("reasoning_content"));
  EXPECT_TRUE(json::parse(j["choices"][0]["message"]["content"].get<std::string>()).is_object());
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
  // A parameters schema the converter refuses: a 400 naming the keyword.
  json bad_tools = json::array(
      {{{"type", "function"},
        {"function",
         {{"name", "f"}, {"parameters", {{"type", "object"}, {"not", json::object()}}}}}}});
  auto ch = Post({{"messages", Messages()}, {"tools", bad_tools}});
  EXPECT_EQ(ch->response.status, 400);
  EXPECT_EQ(ch->Json()["error"]["param"], "tools");
  EXPECT_NE(ch->Json()["error"]["message"].get<std::string>().find("'not'"), std::string::npos);
  Init(kReply, ToolCallFormat::kNone);
  EXPECT_EQ(param_of({{"messages", Messages()}, {"tools", Tools()}, {"tool_choice", "required"}}),
            "tool_choice");
  EXPECT_EQ(backend_->SubmittedPrompts().size(), 0u);  // rejected before the backend
  WaitIdle();
}

}  // namespace
}  // namespace tachyon::server
