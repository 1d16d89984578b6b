// Structured output through the OpenAI API layer: constraints parsed, compiled by the backend's
// grammar cache (FakeBackend: a byte vocabulary) and followed by the fake's generation.
#include <gtest/gtest.h>

#include <regex>
#include <thread>

#include "server/api.h"
#include "server/testing/fake_backend.h"
#include "server/testing/test_channel.h"

namespace tachyon::server {
namespace {

using nlohmann::json;

class StructuredApiTest : public ::testing::Test {
 protected:
  StructuredApiTest() {
    FakeBackendOptions opts;
    opts.text = "[1, 2] yes {\"a\": 7} ";
    backend_ = std::make_unique<FakeBackend>(opts);
    ApiOptions api_opts;
    api_opts.served_model_names = {"tiny"};
    api_ = std::make_unique<OpenAiApi>(backend_.get(), api_opts);
  }
  ~StructuredApiTest() override {
    for (int i = 0; i < 500 && (backend_->Live() > 0 || api_->InFlight() > 0); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  std::shared_ptr<TestChannel> Post(const std::string& path, json body) {
    if (path == "/v1/chat/completions") {
      body["messages"] = json::array({{{"role", "user"}, {"content", "hi"}}});
    } else {
      body["prompt"] = "hi";
    }
    if (!body.contains("max_tokens")) body["max_tokens"] = 40;
    auto ch = std::make_shared<TestChannel>();
    api_->Handle(HttpRequest{"POST", path, body.dump(), {}}, ch);
    EXPECT_TRUE(ch->Pump()) << body.dump();
    return ch;
  }
  json Chat(json body) { return Post("/v1/chat/completions", std::move(body))->Json(); }

  std::unique_ptr<FakeBackend> backend_;
  std::unique_ptr<OpenAiApi> api_;
};

TEST_F(StructuredApiTest, GrammarOnChat) {
  json j = Chat({{"grammar", "root ::= \"{\\\"n\\\": \" [1-9] [0-9]* \"}\""}});
  ASSERT_TRUE(j.contains("choices")) << j.dump();
  const std::string text = j["choices"][0]["message"]["content"];
  const json doc = json::parse(text);
  EXPECT_TRUE(doc["n"].is_number_integer()) << text;
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  ASSERT_NE(backend_->SubmittedRequests().back().grammar, nullptr);
  // Unconstrained requests carry no grammar.
  Chat(json::object());
  EXPECT_EQ(backend_->SubmittedRequests().back().grammar, nullptr);
}

// The fake writes its text's byte where allowed, else the first allowed byte, so "\\d+z" loops
// on digits until max_tokens; with complete_within_max_tokens the last token left is the 'z'
// and the answer is complete.
TEST_F(StructuredApiTest, CompleteWithinMaxTokens) {
  json loose = Chat({{"max_tokens", 10}, {"structured_outputs", {{"regex", "\\d+z"}}}});
  EXPECT_EQ(loose["choices"][0]["message"]["content"], "0100200000");
  EXPECT_EQ(loose["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(backend_->SubmittedRequests().back().grammar_within_max_tokens);
  json within =
      Chat({{"max_tokens", 10},
            {"structured_outputs", {{"regex", "\\d+z"}, {"complete_within_max_tokens", true}}}});
  EXPECT_EQ(within["choices"][0]["message"]["content"], "010020000z");
  EXPECT_EQ(within["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(within["usage"]["completion_tokens"], 10);
  EXPECT_TRUE(backend_->SubmittedRequests().back().grammar_within_max_tokens);
  // The server's default, and a request that turns it off.
  ApiOptions opts;
  opts.complete_within_max_tokens = true;
  api_ = std::make_unique<OpenAiApi>(backend_.get(), opts);
  json by_default =
      Post("/v1/completions",
           {{"max_tokens", 6},
            {"response_format",
             {{"type", "json_schema"}, {"json_schema", {{"schema", {{"type", "array"}}}}}}}})
          ->Json();
  const std::string text = by_default["choices"][0]["text"];
  EXPECT_NO_THROW(json::parse(text)) << text;
  EXPECT_EQ(by_default["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(backend_->SubmittedRequests().back().grammar_within_max_tokens);
  Chat({{"max_tokens", 10},
        {"response_format", {{"type", "json_object"}, {"complete_within_max_tokens", false}}}});
  EXPECT_FALSE(backend_->SubmittedRequests().back().grammar_within_max_tokens);
}

// With complete_within_max_tokens a max_tokens below the grammar's shortest output (9 bytes,
// one token each here) is refused as a prompt that does not fit the context is; without the
// option the answer is cut instead.
TEST_F(StructuredApiTest, MaxTokensBelowTheShortestOutputIsRefusedWhenCompleteWithin) {
  const json so = {{"regex", "\\d{8}z"}, {"complete_within_max_tokens", true}};
  for (const char* path : {"/v1/chat/completions", "/v1/completions"}) {
    auto ch = Post(path, {{"max_tokens", 8}, {"structured_outputs", so}});
    EXPECT_EQ(ch->response.status, 400) << path;
    const json e = ch->Json()["error"];
    EXPECT_EQ(e["param"], "max_tokens") << e.dump();
    EXPECT_NE(e["message"].get<std::string>().find("max_tokens = 8"), std::string::npos)
        << e.dump();
    EXPECT_NE(e["message"].get<std::string>().find("at least 9"), std::string::npos) << e.dump();
  }
  json fits = Chat({{"max_tokens", 9}, {"structured_outputs", so}});
  EXPECT_EQ(fits["choices"][0]["finish_reason"], "stop") << fits.dump();
  json cut = Chat({{"max_tokens", 8}, {"structured_outputs", {{"regex", "\\d{8}z"}}}});
  EXPECT_EQ(cut["choices"][0]["finish_reason"], "length") << cut.dump();
}

TEST_F(StructuredApiTest, ChoiceAndGrammarOnCompletions) {
  json j =
      Post("/v1/completions", {{"structured_outputs", {{"choice", {"red", "green"}}}}, {"n", 2}})
          ->Json();
  ASSERT_EQ(j["choices"].size(), 2u) << j.dump();
  for (const json& c : j["choices"]) {
    EXPECT_TRUE(c["text"] == "red" || c["text"] == "green") << c.dump();
    EXPECT_EQ(c["finish_reason"], "stop");
  }
  j = Post("/v1/completions", {{"structured_outputs", {{"grammar", "root ::= \"x\" [0-9]"}}}})
          ->Json();
  ASSERT_TRUE(j.contains("choices")) << j.dump();
  EXPECT_TRUE(std::regex_match(j["choices"][0]["text"].get<std::string>(), std::regex("x[0-9]")))
      << j.dump();
}

// The same spec twice is compiled once: both requests share one grammar.
TEST_F(StructuredApiTest, CompiledGrammarsAreCached) {
  Chat({{"grammar", "root ::= [a-c]+ \".\""}});
  Chat({{"structured_outputs", {{"grammar", "root ::= [a-c]+ \".\""}}}});
  auto reqs = backend_->SubmittedRequests();
  ASSERT_EQ(reqs.size(), 2u);
  ASSERT_NE(reqs[0].grammar, nullptr);
  EXPECT_EQ(reqs[0].grammar, reqs[1].grammar);
}

TEST_F(StructuredApiTest, CompileErrorsAre400sNamingTheField) {
  auto expect_400 = [&](const std::string& path, const json& body, const std::string& param) {
    auto ch = Post(path, body);
    EXPECT_EQ(ch->response.status, 400) << body.dump();
    const json e = ch->Json()["error"];
    EXPECT_EQ(e["param"], param) << e.dump();
    EXPECT_EQ(e["type"], "invalid_request_error");
    EXPECT_NE(e["message"].get<std::string>().find(param), std::string::npos) << e.dump();
  };
  expect_400("/v1/chat/completions", {{"grammar", "root ::= ("}}, "grammar");
  expect_400("/v1/completions", {{"structured_outputs", {{"regex", "(a"}}}},
             "structured_outputs.regex");
  expect_400("/v1/chat/completions",
             {{"response_format",
               {{"type", "json_schema"},
                {"json_schema", {{"schema", {{"type", "object"}, {"not", json::object()}}}}}}}},
             "response_format.json_schema.schema");
  expect_400("/v1/chat/completions",
             {{"grammar", "root ::= \"a\""}, {"response_format", {{"type", "json_object"}}}},
             "grammar");
  EXPECT_TRUE(backend_->SubmittedRequests().empty());
}

}  // namespace
}  // namespace tachyon::server
