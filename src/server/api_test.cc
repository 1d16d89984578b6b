#include "server/api.h"
#include "server/routes.h"

#include <gtest/gtest.h>

#include <thread>

#include "server/testing/fake_backend.h"
#include "server/testing/test_channel.h"

namespace tachyon::server {
namespace {

using nlohmann::json;

const std::string kText = "Once upon a time there was a tiny robot. ";

class ApiTest : public ::testing::Test {
 protected:
  void Init(FakeBackendOptions opts = {}, ApiOptions api_opts = {}) {
    backend_ = std::make_unique<FakeBackend>(opts);
    if (api_opts.served_model_names.empty()) api_opts.served_model_names = {"tiny"};
    api_ = std::make_unique<OpenAiApi>(backend_.get(), api_opts);
  }
  void SetUp() override { Init(); }

  std::shared_ptr<TestChannel> Call(const std::string& method, const std::string& path,
                                    const std::string& body, Headers headers = {}) {
    auto ch = std::make_shared<TestChannel>();
    HttpRequest req;
    req.method = method;
    req.path = path;
    req.body = body;
    req.headers = std::move(headers);
    api_->Handle(std::move(req), ch);
    EXPECT_TRUE(ch->Pump()) << path << " " << body;
    return ch;
  }
  std::shared_ptr<TestChannel> Post(const std::string& path, const json& body) {
    return Call("POST", path, body.dump());
  }
  void WaitIdle() {
    for (int i = 0; i < 500 && (backend_->Live() > 0 || api_->InFlight() > 0); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    EXPECT_EQ(backend_->Live(), 0);
    EXPECT_EQ(api_->InFlight(), 0u);
  }

  std::unique_ptr<FakeBackend> backend_;
  std::unique_ptr<OpenAiApi> api_;
};

TEST_F(ApiTest, CompletionNonStreaming) {
  auto ch = Post("/v1/completions", {{"model", "tiny"}, {"prompt", "abc"}, {"max_tokens", 5}});
  ASSERT_EQ(ch->response.status, 200) << ch->response.body;
  json j = ch->Json();
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "tiny");
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(j["choices"][0]["text"], "Once ");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 4);  // BOS + 3 bytes
  EXPECT_EQ(j["usage"]["completion_tokens"], 5);
  EXPECT_EQ(j["usage"]["total_tokens"], 9);
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  // The timings extension.
  const json& t = j["timings"];
  EXPECT_EQ(t["queue_ms"], 0.0);  // FakeBackend reports no queueing
  EXPECT_GE(t["ttft_ms"].get<double>(), 0.0);
  EXPECT_GE(t["e2e_ms"].get<double>(), t["ttft_ms"].get<double>());
  EXPECT_GE(t["generation_ms"].get<double>(), 0.0);
  WaitIdle();
}

TEST_F(ApiTest, StreamedTextEqualsNonStreamed) {
  json body = {{"prompt", "abc"}, {"max_tokens", 30}, {"stop", "there"}};
  auto plain = Post("/v1/completions", body);
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  auto ch = Post("/v1/completions", body);
  EXPECT_TRUE(ch->streaming);
  bool done = false;
  auto events = ch->Events(&done);
  EXPECT_TRUE(done);
  ASSERT_GE(events.size(), 2u);
  std::string text;
  std::string finish;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    EXPECT_EQ(events[i]["object"], "text_completion");
    EXPECT_TRUE(events[i]["usage"].is_null());
    text += events[i]["choices"][0]["text"].get<std::string>();
    if (!events[i]["choices"][0]["finish_reason"].is_null()) {
      finish = events[i]["choices"][0]["finish_reason"];
    }
  }
  EXPECT_EQ(text, plain->Json()["choices"][0]["text"]);
  EXPECT_EQ(text, "Once upon a time ");
  EXPECT_EQ(finish, "stop");
  const json& usage = events.back();
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], plain->Json()["usage"]["completion_tokens"]);
  WaitIdle();
}

TEST_F(ApiTest, ChatStreamStartsWithRoleAndEndsWithFinish) {
  json body = {
      {"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 4}, {"stream", true}};
  auto ch = Post("/v1/chat/completions", body);
  auto events = ch->Events();
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  for (const auto& e : events) text += e["choices"][0]["delta"].value("content", "");
  EXPECT_EQ(text, "Once");
  EXPECT_EQ(events.back()["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(events.back()["choices"][0]["delta"].empty());

  body["stream"] = false;
  auto plain = Post("/v1/chat/completions", body);
  json j = plain->Json();
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Once");
  // "user: hi\nassistant:" rendered by the fake template, no BOS for chat.
  EXPECT_EQ(j["usage"]["prompt_tokens"], 19);
  WaitIdle();
}

TEST_F(ApiTest, MultiplePromptsAndN) {
  auto ch =
      Post("/v1/completions", {{"prompt", {"a", "b"}}, {"n", 2}, {"max_tokens", 3}, {"seed", 5}});
  json j = ch->Json();
  ASSERT_EQ(j["choices"].size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(j["choices"][i]["index"], i);
  // Seed s starts the fake text at offset s: choice k of a prompt uses seed + k.
  EXPECT_EQ(j["choices"][0]["text"], kText.substr(5, 3));
  EXPECT_EQ(j["choices"][1]["text"], kText.substr(6, 3));
  EXPECT_EQ(j["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);
  // One backend request per prompt: its n choices are forked from it (shared prompt KV).
  EXPECT_EQ(backend_->SubmittedPrompts().size(), 2u);
  WaitIdle();
}

TEST_F(ApiTest, StreamingNChoicesAreIndexed) {
  json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
               {"n", 3},
               {"max_tokens", 4},
               {"seed", 2},
               {"stream", true}};
  auto ch = Post("/v1/chat/completions", body);
  std::map<int, std::string> texts;
  std::map<int, std::string> finish;
  std::map<int, int> roles;
  for (const json& e : ch->Events()) {
    for (const json& c : e["choices"]) {
      int i = c["index"].get<int>();
      if (c["delta"].contains("role")) roles[i]++;
      if (c["delta"].contains("content")) texts[i] += c["delta"]["content"].get<std::string>();
      if (!c["finish_reason"].is_null()) finish[i] = c["finish_reason"];
    }
  }
  ASSERT_EQ(texts.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(roles[i], 1) << i;
    EXPECT_EQ(texts[i], kText.substr(2 + i, 4)) << i;
    EXPECT_EQ(finish[i], "length") << i;
  }
  body.erase("stream");
  json plain = Post("/v1/chat/completions", body)->Json();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(plain["choices"][i]["message"]["content"], texts[i]);
  EXPECT_EQ(backend_->SubmittedPrompts().size(), 2u);
  WaitIdle();
}

TEST_F(ApiTest, EchoAndLogprobs) {
  auto ch = Post("/v1/completions",
                 {{"prompt", {66, 67}}, {"echo", true}, {"max_tokens", 3}, {"logprobs", 2}});
  json j = ch->Json();
  EXPECT_EQ(j["choices"][0]["text"], "BCOnc");
  const json& lp = j["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 3u);
  EXPECT_EQ(lp["tokens"][0], "O");
  EXPECT_FLOAT_EQ(lp["token_logprobs"][0].get<float>(), -0.5f);
  EXPECT_EQ(lp["top_logprobs"][0].size(), 2u);
  EXPECT_EQ(lp["text_offset"][0], 2);
  EXPECT_EQ(lp["text_offset"][2], 4);

  auto chat = Post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "x"}}}},
                                            {"max_tokens", 2},
                                            {"logprobs", true},
                                            {"top_logprobs", 3}});
  const json chat_json = chat->Json();
  const json& content = chat_json["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0]["token"], "O");
  EXPECT_EQ(content[0]["bytes"], json::array({79}));
  EXPECT_EQ(content[0]["top_logprobs"].size(), 3u);
  WaitIdle();
}

// A response that is not streamed is held whole: one whose logprobs could pass the bound
// (64 prompts x 16 choices x 64 tokens x 21 entries) is refused before anything runs.
TEST_F(ApiTest, HeldLogprobsAreBounded) {
  json prompts = json::array();
  for (int i = 0; i < 64; ++i) prompts.push_back("x");
  json body = {{"prompt", prompts}, {"n", 16}, {"max_tokens", 64}, {"logprobs", 20}};
  auto refused = Post("/v1/completions", body);
  EXPECT_EQ(refused->response.status, 400);
  EXPECT_EQ(refused->Json()["error"]["param"], "logprobs");
  EXPECT_TRUE(backend_->SubmittedPrompts().empty());
  body["prompt"] = json::array({"x", "y"});  // 2 x 16 x 64 x 21: within the bound
  EXPECT_EQ(Post("/v1/completions", body)->response.status, 200);
  WaitIdle();
}

// min_tokens, cache_salt, priority and stop_token_ids reach the backend as the engine's own
// request fields; a min_tokens the context cannot hold is a 400 naming it.
TEST_F(ApiTest, EngineFieldsReachTheBackend) {
  FakeBackendOptions opts;
  opts.eos_after = 2;
  Init(opts);
  auto ch = Post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                          {"min_tokens", 6},
                                          {"max_tokens", 8},
                                          {"cache_salt", "tenant-a"},
                                          {"priority", 3},
                                          {"stop_token_ids", {7}}});
  ASSERT_EQ(ch->response.status, 200) << ch->response.body;
  EXPECT_EQ(ch->Json()["usage"]["completion_tokens"], 6);  // no EOS before min_tokens
  ch = Post("/v1/completions", {{"prompt", "abc"}, {"cache_salt", "tenant-b"}, {"max_tokens", 1}});
  ASSERT_EQ(ch->response.status, 200) << ch->response.body;
  WaitIdle();
  const std::vector<engine::EngineRequest> sent = backend_->SubmittedRequests();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].params.min_tokens, 6);
  EXPECT_EQ(sent[0].params.max_tokens, 8);
  EXPECT_EQ(sent[0].cache_salt, "tenant-a");
  EXPECT_EQ(sent[0].priority, 3);
  EXPECT_EQ(sent[0].params.stop_token_ids, std::vector<int32_t>{7});
  EXPECT_EQ(sent[1].cache_salt, "tenant-b");
  EXPECT_EQ(sent[1].params.min_tokens, 0);

  // Without max_tokens the rest of the context (256 - 4 prompt tokens) bounds min_tokens.
  ch = Post("/v1/completions", {{"prompt", "abc"}, {"min_tokens", 253}});
  EXPECT_EQ(ch->response.status, 400) << ch->response.body;
  EXPECT_EQ(ch->Json()["error"]["param"], "min_tokens");
  ch = Post("/v1/completions", {{"prompt", "abc"}, {"min_tokens", 252}, {"stream", true}});
  EXPECT_EQ(ch->response.status, 200) << ch->response.body;
  WaitIdle();
}

// A continuation (resume_token_ids) counts the tokens it resumes against the default max_tokens
// (a generation_config's), as against a request's own, so the whole choice ends where the
// original would have; resuming all of it is a 400.
TEST_F(ApiTest, ContinuationCountsItsTokensAgainstTheDefaultMaxTokens) {
  ApiOptions api;
  api.sampling_defaults.max_tokens = 10;
  Init({}, api);
  auto ch = Post("/v1/completions", {{"prompt", "abc"}, {"resume_token_ids", {100, 101, 102}}});
  ASSERT_EQ(ch->response.status, 200) << ch->response.body;
  EXPECT_EQ(ch->Json()["usage"]["completion_tokens"], 7);
  WaitIdle();
  const std::vector<engine::EngineRequest> sent = backend_->SubmittedRequests();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].params.max_tokens, 7);
  EXPECT_EQ(sent[0].params.output_offset, 3);
  ch =
      Post("/v1/completions", {{"prompt", "abc"}, {"resume_token_ids", std::vector<int>(10, 100)}});
  EXPECT_EQ(ch->response.status, 400) << ch->response.body;
  EXPECT_EQ(ch->Json()["error"]["param"], "resume_token_ids");
}

// A continuation of a constrained output: the constraint takes the resumed tokens first (the
// fake backend makes matchers as the engine does), and refuses tokens outside it with a 400.
TEST_F(ApiTest, ContinuationReplaysTheConstraint) {
  const json regex = {{"regex", "abc[0-9]+"}};
  auto ch = Post("/v1/completions", {{"prompt", "x"},
                                     {"max_tokens", 4},
                                     {"structured_outputs", regex},
                                     {"resume_token_ids", {'a', 'b'}}});
  ASSERT_EQ(ch->response.status, 200) << ch->response.body;
  const std::string text = ch->Json()["choices"][0]["text"];
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text[0], 'c') << text;  // "ab" was accepted: only "c" may follow
  ch = Post("/v1/completions", {{"prompt", "x"},
                                {"max_tokens", 4},
                                {"structured_outputs", regex},
                                {"resume_token_ids", {'a', 'x'}}});
  EXPECT_EQ(ch->response.status, 400) << ch->response.body;
  EXPECT_NE(ch->Json()["error"]["message"].get<std::string>().find("output constraint"),
            std::string::npos)
      << ch->response.body;
  WaitIdle();
}

TEST_F(ApiTest, Errors) {
  auto bad_json = Call("POST", "/v1/completions", "{\"prompt\": ");
  EXPECT_EQ(bad_json->response.status, 400);
  EXPECT_TRUE(bad_json->Json()["error"].contains("message"));

  auto bad_param = Post("/v1/completions", {{"prompt", "x"}, {"temperature", 9}});
  EXPECT_EQ(bad_param->response.status, 400);
  EXPECT_EQ(bad_param->Json()["error"]["param"], "temperature");

  auto bad_model = Post("/v1/completions", {{"model", "gpt-9"}, {"prompt", "x"}});
  EXPECT_EQ(bad_model->response.status, 404);
  EXPECT_EQ(bad_model->Json()["error"]["code"], "model_not_found");

  auto too_long = Post("/v1/completions", {{"prompt", std::string(200, 'a')}, {"max_tokens", 100}});
  EXPECT_EQ(too_long->response.status, 400);
  EXPECT_EQ(too_long->Json()["error"]["code"], "context_length_exceeded");

  auto too_long_chat =
      Post("/v1/chat/completions",
           {{"messages", {{{"role", "user"}, {"content", std::string(300, 'a')}}}}});
  EXPECT_EQ(too_long_chat->response.status, 400);

  EXPECT_EQ(Call("GET", "/nope", "")->response.status, 404);
  EXPECT_EQ(Call("GET", "/v1/completions", "")->response.status, 405);
  EXPECT_EQ(backend_->Live(), 0);
  EXPECT_EQ(api_->InFlight(), 0u);
}

TEST_F(ApiTest, ApiKey) {
  ApiOptions api_options;
  api_options.served_model_names = {"tiny"};
  api_options.api_key = "sekret";
  Init({}, api_options);
  json body = {{"prompt", "x"}, {"max_tokens", 1}};
  auto missing = Post("/v1/completions", body);
  EXPECT_EQ(missing->response.status, 401);
  EXPECT_EQ(missing->Json()["error"]["type"], "authentication_error");
  auto wrong = Call("POST", "/v1/completions", body.dump(), {{"authorization", "Bearer nope"}});
  EXPECT_EQ(wrong->response.status, 401);
  auto right = Call("POST", "/v1/completions", body.dump(), {{"authorization", "Bearer sekret"}});
  EXPECT_EQ(right->response.status, 200);
  EXPECT_EQ(Call("GET", "/health", "")->response.status, 200);  // no key needed
  // Refused requests are counted under their route, never under the path the client sent (a
  // series per path would grow without bound, and a quote in it would break the page).
  EXPECT_EQ(Call("GET", "/v1/a\"b-" + std::string(1000, 'x'), "")->response.status, 401);
  EXPECT_EQ(Call("GET", "/v1/models/some\"model", "")->response.status, 401);
  const std::string metrics = Call("GET", "/metrics", "")->response.body;
  EXPECT_EQ(metrics.find("xxxx"), std::string::npos) << metrics;
  EXPECT_EQ(metrics.find("some"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("{endpoint=\"/v1/completions\",status=\"401\"} 2"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("{endpoint=\"/v1/models/{model}\",status=\"401\"} 1"), std::string::npos)
      << metrics;
  WaitIdle();
}

TEST_F(ApiTest, QueueFullIs429WithRetryAfter) {
  FakeBackendOptions opts;
  opts.max_running = 0;
  opts.max_waiting = 1;
  opts.step_interval = std::chrono::microseconds(1000);
  Init(opts);
  auto first = std::make_shared<TestChannel>();
  HttpRequest req{"POST", "/v1/completions", json{{"prompt", "x"}, {"max_tokens", 1}}.dump(), {}};
  api_->Handle(req, first);  // waits forever: nothing may run
  auto second = Call("POST", "/v1/completions", req.body);
  EXPECT_EQ(second->response.status, 429);
  bool retry_after = false;
  for (auto& [k, v] : second->response.headers) retry_after |= (k == "Retry-After");
  EXPECT_TRUE(retry_after);
  first->Disconnect();
  first->PumpFor(std::chrono::milliseconds(50));
  WaitIdle();
}

TEST_F(ApiTest, DisconnectAbortsTheRequest) {
  FakeBackendOptions opts;
  opts.step_interval = std::chrono::microseconds(2000);
  Init(opts);
  auto ch = std::make_shared<TestChannel>();
  HttpRequest req{"POST",
                  "/v1/completions",
                  json{{"prompt", "x"}, {"max_tokens", 100}, {"stream", true}}.dump(),
                  {}};
  api_->Handle(req, ch);
  ch->PumpFor(std::chrono::milliseconds(20));
  EXPECT_FALSE(ch->done());
  EXPECT_EQ(backend_->Live(), 1);
  ch->Disconnect();
  ch->PumpFor(std::chrono::milliseconds(30));
  WaitIdle();
  std::string metrics = Call("GET", "/metrics", "")->response.body;
  EXPECT_NE(
      metrics.find("tachyon_http_requests_total{endpoint=\"/v1/completions\",status=\"499\"} 1"),
      std::string::npos)
      << metrics;
}

TEST_F(ApiTest, DrainingRejectsNewWork) {
  api_->SetDraining(true);
  EXPECT_EQ(Post("/v1/completions", {{"prompt", "x"}})->response.status, 503);
  EXPECT_EQ(Call("GET", "/health/ready", "")->response.status, 503);
  EXPECT_EQ(Call("GET", "/health", "")->response.status, 200);
}

TEST_F(ApiTest, ModelsTokenizeDetokenize) {
  json models = Call("GET", "/v1/models", "")->Json();
  EXPECT_EQ(models["object"], "list");
  EXPECT_EQ(models["data"][0]["id"], "tiny");
  EXPECT_EQ(Call("GET", "/v1/models/tiny", "")->response.status, 200);
  EXPECT_EQ(Call("GET", "/v1/models/other", "")->response.status, 404);

  json tok = Post("/tokenize", {{"prompt", "AB"}})->Json();
  EXPECT_EQ(tok["tokens"], json::array({FakeBackend::kBos, 65, 66}));
  EXPECT_EQ(tok["count"], 3);
  json tok2 = Post("/tokenize", {{"prompt", "AB"}, {"add_special_tokens", false}})->Json();
  EXPECT_EQ(tok2["tokens"], json::array({65, 66}));
  EXPECT_EQ(Post("/detokenize", {{"tokens", {72, 105}}})->Json()["prompt"], "Hi");
  EXPECT_EQ(Post("/detokenize", {{"tokens", {72, 9999}}})->response.status, 400);
  EXPECT_EQ(Post("/tokenize", {{"nothing", 1}})->response.status, 400);
  // Found by schemathesis: a prompt of the wrong type was ignored when messages came too.
  auto both = Post("/tokenize", {{"prompt", json::object()},
                                 {"messages", {{{"role", "user"}, {"content", "a"}}}}});
  EXPECT_EQ(both->response.status, 400);
  EXPECT_EQ(both->Json()["error"]["param"], "prompt");
}

TEST_F(ApiTest, MetricsText) {
  Post("/v1/completions", {{"prompt", "abc"}, {"max_tokens", 3}});
  WaitIdle();
  auto ch = Call("GET", "/metrics", "");
  EXPECT_EQ(ch->response.content_type.rfind("text/plain", 0), 0u);
  const std::string& m = ch->response.body;
  for (const char* name :
       {"# TYPE tachyon_num_requests_running gauge", "tachyon_num_requests_waiting 0",
        "tachyon_kv_cache_usage_ratio", "tachyon_prefix_cache_hit_rate",
        "tachyon_prompt_tokens_total 4", "tachyon_generation_tokens_total 3",
        "tachyon_http_requests_total{endpoint=\"/v1/completions\",status=\"200\"} 1",
        "# TYPE tachyon_time_to_first_token_seconds histogram",
        "tachyon_time_to_first_token_seconds_count 1",
        "tachyon_e2e_request_latency_seconds_count 1",
        "tachyon_time_per_output_token_seconds_count 1",
        "tachyon_request_queue_time_seconds_count 1",
        "tachyon_e2e_request_latency_seconds_bucket{le=\"+Inf\"} 1"}) {
    EXPECT_NE(m.find(name), std::string::npos) << name << "\n" << m;
  }
}

// Every route of the table reaches its handler (no 404 / 405); another method on its path is 405
// naming the allowed one in Allow.
TEST_F(ApiTest, EveryRouteIsDispatched) {
  for (const Route& r : kRoutes) {
    std::string path(r.path);
    if (size_t brace = path.find('{'); brace != std::string::npos) {
      path = path.substr(0, brace) + "tiny";
    }
    std::string body = r.id == RouteId::kCompletions ? R"({"prompt": "a", "max_tokens": 1})"
                       : r.id == RouteId::kChatCompletions
                           ? R"({"messages": [{"role": "user", "content": "a"}], "max_tokens": 1})"
                       : r.id == RouteId::kTokenize   ? R"({"prompt": "a"})"
                       : r.id == RouteId::kDetokenize ? R"({"tokens": [1]})"
                       : r.id == RouteId::kResponses  ? R"({"input": "a", "max_output_tokens": 1})"
                       : r.id == RouteId::kMessages
                           ? R"({"messages": [{"role": "user", "content": "a"}], "max_tokens": 1})"
                       : r.id == RouteId::kCountTokens
                           ? R"({"messages": [{"role": "user", "content": "a"}]})"
                           : "";
    auto ch = Call(std::string(r.method), path, body);
    // The fake serves a generation model: the pooling endpoints answer that it cannot.
    const bool pooling =
        r.id == RouteId::kEmbeddings || r.id == RouteId::kRerank || r.id == RouteId::kScore;
    // This fixture's API has no KV event publisher (tachyon serve always installs one).
    const int want = pooling ? 400 : r.id == RouteId::kKvEvents ? 404 : 200;
    EXPECT_EQ(ch->response.status, want) << r.method << " " << path << ": " << ch->response.body;
    if (pooling) {
      EXPECT_NE(ch->response.body.find("model_does_not_support_endpoint"), std::string::npos);
    }
    WaitIdle();
    const char* other = r.method == "GET" ? "POST" : "GET";
    auto wrong = Call(other, path, "");
    EXPECT_EQ(wrong->response.status, 405) << other << " " << path;
    bool has_allow = false;
    for (const auto& [k, v] : wrong->response.headers) {
      if (k == "Allow") has_allow = v == r.method;
    }
    EXPECT_TRUE(has_allow) << path;
  }
}

TEST(HistogramTest, CumulativeBuckets) {
  Histogram h({0.1, 1.0});
  h.Observe(0.05);
  h.Observe(0.5);
  h.Observe(5);
  std::string out;
  h.Render("x", out);
  EXPECT_NE(out.find("x_bucket{le=\"0.1\"} 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_bucket{le=\"1\"} 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_bucket{le=\"+Inf\"} 3\n"), std::string::npos);
  EXPECT_NE(out.find("x_count 3\n"), std::string::npos);
}

}  // namespace
}  // namespace tachyon::server

namespace tachyon::server {
namespace {

TEST_F(ApiTest, EveryEndpointBoundsJsonDepth) {
  std::string deep_object, deep_array = "{\"messages\": ";
  for (int i = 0; i < 100000; ++i) deep_object += "{\"a\":";
  deep_object += "1" + std::string(100000, '}');
  deep_array += std::string(100000, '[') + std::string(100000, ']') + "}";
  for (const char* path : {"/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"}) {
    for (const std::string* body : {&deep_object, &deep_array}) {
      auto ch = Call("POST", path, *body);
      ASSERT_EQ(ch->response.status, 400) << path;
      json e = ch->Json()["error"];
      EXPECT_EQ(e["code"], "json_too_deep") << path;
      EXPECT_NE(e["message"].get<std::string>().find("64"), std::string::npos) << path;
    }
  }
  // The server goes on answering.
  auto ch = Post("/v1/chat/completions",
                 {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 2}});
  EXPECT_EQ(ch->response.status, 200) << ch->response.body;
  WaitIdle();
}

}  // namespace
}  // namespace tachyon::server

namespace tachyon::server {
namespace {

// A backend with bugs: Tokenize throws on the prompt "throw", TokenBytes always throws.
class ThrowingBackend : public FakeBackend {
 public:
  Result<std::vector<int32_t>> Tokenize(std::string_view text, bool add_special) const override {
    if (text == "throw") throw std::runtime_error("tokenize bug");
    return FakeBackend::Tokenize(text, add_special);
  }
  std::string TokenBytes(int32_t id) const override { throw std::runtime_error("bytes bug"); }
};

TEST_F(ApiTest, AThrowingBugIsA500AndTheServerGoesOn) {
  backend_ = std::make_unique<ThrowingBackend>();
  ApiOptions options;
  options.served_model_names = {"tiny"};
  api_ = std::make_unique<OpenAiApi>(backend_.get(), options);
  auto ch = Post("/v1/completions", {{"prompt", "throw"}, {"max_tokens", 2}});
  ASSERT_EQ(ch->response.status, 500) << ch->response.body;
  EXPECT_EQ(ch->Json()["error"]["type"], "server_error");
  // The bug is hit on the io thread while streaming logprobs.
  ch = Post("/v1/completions", {{"prompt", "abc"}, {"max_tokens", 3}, {"logprobs", 1}});
  ASSERT_EQ(ch->response.status, 500) << ch->response.body;
  EXPECT_EQ(ch->Json()["error"]["type"], "server_error");
  // The cancelled request's last chunks still arrive on the channel's executor.
  for (int i = 0; i < 500 && api_->InFlight() > 0; ++i) ch->PumpFor(std::chrono::milliseconds(2));
  WaitIdle();
  ch = Post("/v1/completions", {{"prompt", "abc"}, {"max_tokens", 3}});
  EXPECT_EQ(ch->response.status, 200) << ch->response.body;
  WaitIdle();
}

}  // namespace
}  // namespace tachyon::server
