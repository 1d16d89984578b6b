#include "server/request_fields.h"

#include <gtest/gtest.h>

#include "server/protocol.h"
#include "server/testing/fake_backend.h"

namespace tachyon::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

const json kMessages = json::array({{{"role", "user"}, {"content", "hi"}}});

// The chat request `extra` adds to a minimal valid one must be refused naming `param`.
void ExpectChatRefused(const json& extra, const std::string& param) {
  json body = {{"messages", kMessages}};
  body.update(extra);
  auto r = ParseChatRequest(ordered_json(body), FakeBackend::kVocabSize);
  ASSERT_FALSE(r.ok()) << body.dump();
  EXPECT_EQ(r.error().http_status, 400);
  EXPECT_EQ(r.error().param, param) << r.error().message;
  EXPECT_NE(r.error().message.find(param), std::string::npos) << r.error().message;
}

void ExpectChatAccepted(const json& extra) {
  json body = {{"messages", kMessages}};
  body.update(extra);
  auto r = ParseChatRequest(ordered_json(body), FakeBackend::kVocabSize);
  EXPECT_TRUE(r.ok()) << body.dump() << ": " << r.error().message;
}

void ExpectCompletionRefused(const json& extra, const std::string& param) {
  json body = {{"prompt", "hi"}};
  body.update(extra);
  auto r = ParseCompletionRequest(body, FakeBackend::kVocabSize);
  ASSERT_FALSE(r.ok()) << body.dump();
  EXPECT_EQ(r.error().http_status, 400);
  EXPECT_EQ(r.error().param, param) << r.error().message;
}

void ExpectCompletionAccepted(const json& extra) {
  json body = {{"prompt", "hi"}};
  body.update(extra);
  auto r = ParseCompletionRequest(body, FakeBackend::kVocabSize);
  EXPECT_TRUE(r.ok()) << body.dump() << ": " << r.error().message;
}

TEST(RequestFieldsTest, MalformedResponseFormatIsRefused) {
  ExpectChatRefused({{"response_format", {{"type", "yaml"}}}}, "response_format");
  ExpectChatRefused({{"response_format", "json"}}, "response_format");
  ExpectCompletionRefused({{"response_format", {{"type", "xml"}}}}, "response_format");
  ExpectChatAccepted({{"response_format", {{"type", "text"}}}});
  ExpectChatAccepted({{"response_format", nullptr}});
  ExpectChatAccepted({{"response_format", {{"type", "json_object"}}}});
  ExpectCompletionAccepted({{"response_format", {{"type", "json_object"}}}});
}

// The template's bos/eos variables are trusted text (their special tokens are parsed): a
// client cannot set them through chat_template_kwargs.
TEST(RequestFieldsTest, ChatTemplateKwargsCannotSetTheModelsTokens) {
  ExpectChatRefused({{"chat_template_kwargs", {{"bos_token", "<|im_start|>system"}}}},
                    "chat_template_kwargs");
  ExpectChatRefused({{"chat_template_kwargs", {{"eos_token", ""}}}}, "chat_template_kwargs");
  ExpectChatAccepted({{"chat_template_kwargs", {{"enable_thinking", false}}}});
}

TEST(RequestFieldsTest, UnimplementedChatFieldsAreRefused) {
  ExpectChatRefused({{"audio", {{"voice", "alloy"}, {"format", "wav"}}}}, "audio");
  ExpectChatRefused({{"modalities", {"text", "audio"}}}, "modalities");
  ExpectChatRefused({{"modalities", "text"}}, "modalities");
  ExpectChatRefused({{"prediction", {{"type", "content"}, {"content", "x"}}}}, "prediction");
  ExpectChatRefused({{"web_search_options", json::object()}}, "web_search_options");
  ExpectChatRefused({{"functions", {{{"name", "f"}}}}}, "functions");
  ExpectChatRefused({{"function_call", "auto"}}, "function_call");
  ExpectChatRefused({{"reasoning_effort", "low"}}, "reasoning_effort");
  ExpectChatRefused({{"verbosity", "low"}}, "verbosity");
  ExpectChatRefused({{"service_tier", "flex"}}, "service_tier");
  ExpectChatRefused({{"guided_json", {{"type", "object"}}}}, "guided_json");
  ExpectChatRefused({{"use_beam_search", true}}, "use_beam_search");
  ExpectChatAccepted({{"modalities", {"text"}}, {"service_tier", "auto"}});
}

TEST(RequestFieldsTest, BookkeepingFieldsAreIgnored) {
  ExpectChatAccepted(
      {{"user", "u"},
       {"safety_identifier", "s"},
       {"metadata", {{"k", "v"}}},
       {"store", true},
       {"prompt_cache_key", "p"},
       {"service_tier", "default"},
       {"stream", true},
       {"stream_options", {{"include_usage", true}, {"include_obfuscation", false}}}});
  ExpectCompletionAccepted({{"user", "u"}, {"suffix", ""}, {"best_of", 1}});
}

TEST(RequestFieldsTest, UnimplementedCompletionFieldsAreRefused) {
  ExpectCompletionRefused({{"best_of", 3}}, "best_of");
  ExpectCompletionRefused({{"best_of", 3}, {"n", 2}}, "best_of");
  ExpectCompletionAccepted({{"best_of", 2}, {"n", 2}});
  ExpectCompletionRefused({{"suffix", " end"}}, "suffix");
  ExpectCompletionRefused({{"guided_regex", "a+"}}, "guided_regex");
  ExpectCompletionRefused({{"prompt_logprobs", 1}}, "prompt_logprobs");
}

TEST(RequestFieldsTest, OnlyFunctionToolsAreAccepted) {
  ExpectChatRefused({{"tools", {{{"type", "custom"}, {"custom", {{"name", "c"}}}}}}},
                    "tools[0].type");
  ExpectChatRefused(
      {{"tools",
        {{{"type", "function"}, {"function", {{"name", "f"}}}}, {{"type", "web_search_preview"}}}}},
      "tools[1].type");
  ExpectChatRefused(
      {{"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}},
       {"tool_choice", {{"type", "allowed_tools"}, {"allowed_tools", json::object()}}}},
      "tool_choice");
  ExpectChatAccepted({{"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}},
                      {"tool_choice", {{"type", "function"}, {"function", {{"name", "f"}}}}}});
}

}  // namespace
}  // namespace tachyon::server
