#include "server/tool_calls.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "util/testing/testdata.h"

namespace tachyon::server {
namespace {

using Output = ToolCallParser::Output;

// Feeds `text` in pieces of `step` bytes and concatenates what is released.
Output Streamed(ToolCallFormat format, const std::string& text, size_t step, int max_calls = 0) {
  ToolCallParser p(format, max_calls);
  Output all;
  auto add = [&](Output o) {
    all.content += o.content;
    for (auto& c : o.calls) all.calls.push_back(std::move(c));
  };
  for (size_t i = 0; i < text.size(); i += step) add(p.Push(text.substr(i, step)));
  add(p.Finish());
  return all;
}

// Whole-text parsing and every chunking agree.
void ExpectSameEveryChunking(ToolCallFormat format, const std::string& text) {
  Output whole = ParseToolCalls(format, text);
  for (size_t step : {1, 2, 3, 5, 7, 13}) {
    Output s = Streamed(format, text, step);
    EXPECT_EQ(s.content, whole.content) << "step " << step << ": " << text;
    ASSERT_EQ(s.calls.size(), whole.calls.size()) << "step " << step << ": " << text;
    for (size_t i = 0; i < s.calls.size(); ++i) {
      EXPECT_EQ(s.calls[i].name, whole.calls[i].name);
      EXPECT_EQ(s.calls[i].arguments, whole.calls[i].arguments);
    }
  }
}

TEST(ToolCallsTest, FormatNames) {
  for (auto f : {ToolCallFormat::kNone, ToolCallFormat::kHermes, ToolCallFormat::kLlama3,
                 ToolCallFormat::kMistral}) {
    auto parsed = ParseToolCallFormat(ToolCallFormatName(f));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, f);
  }
  auto bad = ParseToolCallFormat("xml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("hermes"), std::string::npos);
}

TEST(ToolCallsTest, DetectsTheFormatOfRealTemplates) {
  const std::string root = TestdataDir();
  if (root.empty()) GTEST_SKIP() << "testdata not found (set TACHYON_TESTDATA)";
  const std::string dir = root + "/chat-templates/templates";
  auto read = [&](const std::string& name) {
    std::ifstream in(dir + "/" + name);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  const std::pair<const char*, ToolCallFormat> cases[] = {
      {"Qwen-Qwen2.5-7B-Instruct.jinja", ToolCallFormat::kHermes},
      {"Qwen-Qwen3-0.6B.jinja", ToolCallFormat::kHermes},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", ToolCallFormat::kHermes},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", ToolCallFormat::kLlama3},
      {"meta-llama-Llama-3.2-3B-Instruct.jinja", ToolCallFormat::kLlama3},
      {"Mistral-Small-3.2-24B-Instruct-2506.jinja", ToolCallFormat::kMistral},
      {"unsloth-mistral-Devstral-Small-2507.jinja", ToolCallFormat::kMistral},
      {"microsoft-Phi-3.5-mini-instruct.jinja", ToolCallFormat::kNone},
  };
  for (const auto& [file, format] : cases) {
    std::string text = read(file);
    ASSERT_FALSE(text.empty()) << file;
    EXPECT_EQ(DetectToolCallFormat(text), format) << file;
  }
}

TEST(ToolCallsTest, HermesContentAndTwoCalls) {
  std::string text =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\", \"days\": 2}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", "
      "\"arguments\": {}}\n</tool_call>\n";
  Output o = ParseToolCalls(ToolCallFormat::kHermes, text);
  EXPECT_EQ(o.content, "Let me check.\n");
  ASSERT_EQ(o.calls.size(), 2u);
  EXPECT_EQ(o.calls[0].name, "get_weather");
  EXPECT_EQ(o.calls[0].arguments, R"({"city":"Paris","days":2})");
  EXPECT_EQ(o.calls[1].name, "get_time");
  EXPECT_EQ(o.calls[1].arguments, "{}");
  EXPECT_EQ(o.calls[0].id.rfind("call_", 0), 0u);
  EXPECT_EQ(o.calls[0].id.size(), 29u);
  EXPECT_NE(o.calls[0].id, o.calls[1].id);
  ExpectSameEveryChunking(ToolCallFormat::kHermes, text);
  // parallel_tool_calls = false keeps the first call only.
  Output one = ParseToolCalls(ToolCallFormat::kHermes, text, /*max_calls=*/1);
  ASSERT_EQ(one.calls.size(), 1u);
  EXPECT_EQ(one.calls[0].name, "get_weather");
  EXPECT_EQ(one.content, "Let me check.\n");
}

TEST(ToolCallsTest, HermesUnterminatedCallAtTheEnd) {
  Output o = ParseToolCalls(ToolCallFormat::kHermes,
                            "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, 2]}}");
  EXPECT_EQ(o.content, "");
  ASSERT_EQ(o.calls.size(), 1u);
  EXPECT_EQ(o.calls[0].arguments, R"({"a":[1,2]})");
}

TEST(ToolCallsTest, MalformedCallsStayText) {
  const std::string cases[] = {
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }\n</tool_call>",
      "<tool_call>{\"arguments\": {}}</tool_call>",  // no name
      "<tool_call>{\"name\": \"f\", \"arguments\": 7}</tool_call>",
      "<tool_call>not json at all",
      "Sure <tool_call>{\"name\": \"f\"",
  };
  for (const std::string& text : cases) {
    Output o = ParseToolCalls(ToolCallFormat::kHermes, text);
    EXPECT_TRUE(o.calls.empty()) << text;
    EXPECT_EQ(o.content, text);
    ExpectSameEveryChunking(ToolCallFormat::kHermes, text);
  }
  // A bad block between good text and a good block: only the good one becomes a call.
  Output o = ParseToolCalls(ToolCallFormat::kHermes,
                            "<tool_call>{oops}</tool_call> and <tool_call>{\"name\": "
                            "\"g\", \"arguments\": {\"x\": 1}}</tool_call>");
  EXPECT_EQ(o.content, "<tool_call>{oops}</tool_call> and ");
  ASSERT_EQ(o.calls.size(), 1u);
  EXPECT_EQ(o.calls[0].name, "g");
}

TEST(ToolCallsTest, PartialMarkersAcrossChunks) {
  ToolCallParser p(ToolCallFormat::kHermes);
  EXPECT_EQ(p.Push("It is <to").content, "It is ");  // "<to" may start <tool_call>
  EXPECT_EQ(p.Push("day").content, "<today");        // it did not
  EXPECT_EQ(p.Push(" <tool_").content, " ");
  Output o = p.Push("call>{\"name\": \"f\", \"argu");
  EXPECT_EQ(o.content, "");
  EXPECT_TRUE(o.calls.empty());
  o = p.Push("ments\": {\"q\": \"<tool_call>\"}}</tool");
  EXPECT_TRUE(o.calls.empty());
  o = p.Push("_call>");
  ASSERT_EQ(o.calls.size(), 1u);
  EXPECT_EQ(o.calls[0].arguments, R"({"q":"<tool_call>"})");
  EXPECT_EQ(p.Push("\n\n").content, "");  // whitespace after a call is held ...
  o = p.Finish();
  EXPECT_EQ(o.content, "");  // ... and dropped at the end
  EXPECT_EQ(p.num_calls(), 1);
}

TEST(ToolCallsTest, PlainTextIsUntouched) {
  const std::string text = "Once upon a time <b>there</b> was {a cat} [1] ;\n";
  for (auto f : {ToolCallFormat::kNone, ToolCallFormat::kHermes, ToolCallFormat::kMistral}) {
    Output o = ParseToolCalls(f, text);
    EXPECT_EQ(o.content, text);
    EXPECT_TRUE(o.calls.empty());
    ExpectSameEveryChunking(f, text);
  }
  Output o = ParseToolCalls(ToolCallFormat::kLlama3, "Hello {there}");
  EXPECT_EQ(o.content, "Hello {there}");
}

TEST(ToolCallsTest, Llama3Json) {
  Output o = ParseToolCalls(ToolCallFormat::kLlama3,
                            " {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}");
  EXPECT_EQ(o.content, "");
  ASSERT_EQ(o.calls.size(), 1u);
  EXPECT_EQ(o.calls[0].name, "get_weather");
  EXPECT_EQ(o.calls[0].arguments, R"({"city":"Oslo"})");
  o = ParseToolCalls(ToolCallFormat::kLlama3,
                     "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", "
                     "\"arguments\": {\"x\": true}}");
  ASSERT_EQ(o.calls.size(), 2u);
  EXPECT_EQ(o.calls[1].name, "b");
  EXPECT_EQ(o.calls[1].arguments, R"({"x":true})");
  // Arguments given as a JSON string are accepted when they hold an object.
  o = ParseToolCalls(ToolCallFormat::kLlama3, R"({"name": "c", "parameters": "{\"y\": 2}"})");
  ASSERT_EQ(o.calls.size(), 1u);
  EXPECT_EQ(o.calls[0].arguments, R"({"y":2})");
  const std::string bad = "{\"name\": \"get_weather\", \"parameters\": {\"city\": ";
  o = ParseToolCalls(ToolCallFormat::kLlama3, bad);
  EXPECT_TRUE(o.calls.empty());
  EXPECT_EQ(o.content, bad);
  ExpectSameEveryChunking(ToolCallFormat::kLlama3, bad);
  ExpectSameEveryChunking(ToolCallFormat::kLlama3,
                          "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"k\": [1]}}");
}

TEST(ToolCallsTest, MistralFormats) {
  const std::string arrays =
      "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}}, {\"name\": \"g\", "
      "\"arguments\": {}}]";
  Output o = ParseToolCalls(ToolCallFormat::kMistral, arrays);
  ASSERT_EQ(o.calls.size(), 2u);
  EXPECT_EQ(o.calls[0].arguments, R"({"a":1})");
  EXPECT_EQ(o.calls[1].name, "g");
  ExpectSameEveryChunking(ToolCallFormat::kMistral, arrays);
  // Newer tokenizers: name[ARGS]{...} per call.
  o = ParseToolCalls(ToolCallFormat::kMistral,
                     "Checking.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\"}[TOOL_CALLS]"
                     "get_time[ARGS]{}");
  EXPECT_EQ(o.content, "Checking.");
  ASSERT_EQ(o.calls.size(), 2u);
  EXPECT_EQ(o.calls[0].name, "get_weather");
  EXPECT_EQ(o.calls[0].arguments, R"({"city":"Rome"})");
  EXPECT_EQ(o.calls[1].name, "get_time");
  // The marker is a special token a detokenizer may drop: a reply that is a JSON array of calls.
  o = ParseToolCalls(ToolCallFormat::kMistral, " [{\"name\": \"f\", \"arguments\": {}}]");
  ASSERT_EQ(o.calls.size(), 1u);
  // ... or name{...} per call once [TOOL_CALLS] and [ARGS] are dropped.
  const std::string bare = "get_weather{\"city\": \"R{o}me\"}get_time{}";
  o = ParseToolCalls(ToolCallFormat::kMistral, bare);
  ASSERT_EQ(o.calls.size(), 2u);
  EXPECT_EQ(o.calls[0].name, "get_weather");
  EXPECT_EQ(o.calls[0].arguments, R"({"city":"R{o}me"})");
  EXPECT_EQ(o.calls[1].name, "get_time");
  ExpectSameEveryChunking(ToolCallFormat::kMistral, bare);
  for (const std::string text : {"Hello world{x}", "Hello{not json", "word", "a{\"b\": 1} tail"}) {
    o = ParseToolCalls(ToolCallFormat::kMistral, text);
    EXPECT_TRUE(o.calls.empty()) << text;
    EXPECT_EQ(o.content, text);
    ExpectSameEveryChunking(ToolCallFormat::kMistral, text);
  }
  const std::string bad = "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {";
  o = ParseToolCalls(ToolCallFormat::kMistral, bad);
  EXPECT_TRUE(o.calls.empty());
  EXPECT_EQ(o.content, bad);
}

TEST(ToolCallsTest, ForcedPrefixStartsACall) {
  for (auto f : {ToolCallFormat::kHermes, ToolCallFormat::kLlama3, ToolCallFormat::kMistral}) {
    std::string prefix = ForcedToolCallPrefix(f, "get_weather");
    std::string tail =
        f == ToolCallFormat::kMistral ? "\"city\": \"Paris\"}}]" : "\"city\": \"Paris\"}}";
    Output o = ParseToolCalls(f, prefix + tail);
    ASSERT_EQ(o.calls.size(), 1u) << ToolCallFormatName(f);
    EXPECT_EQ(o.calls[0].name, "get_weather");
    EXPECT_EQ(o.calls[0].arguments, R"({"city":"Paris"})");
    EXPECT_EQ(o.content, "");
    std::string any = ForcedToolCallPrefix(f, "");
    EXPECT_EQ(ParseToolCalls(
                  f, any + "f\", \"arguments\": {}}" + (f == ToolCallFormat::kMistral ? "]" : ""))
                  .calls.size(),
              1u)
        << ToolCallFormatName(f);
  }
  EXPECT_EQ(ForcedToolCallPrefix(ToolCallFormat::kNone, "f"), "");
  // Names are JSON-escaped.
  EXPECT_NE(ForcedToolCallPrefix(ToolCallFormat::kHermes, "a\"b").find(R"("a\"b")"),
            std::string::npos);
}

TEST(ToolCallsTest, IdsAreUnique) {
  std::set<std::string> ids;
  for (int i = 0; i < 200; ++i) {
    Output o = ParseToolCalls(ToolCallFormat::kHermes, "<tool_call>{\"name\": \"f\"}</tool_call>");
    ASSERT_EQ(o.calls.size(), 1u);
    ids.insert(o.calls[0].id);
  }
  EXPECT_EQ(ids.size(), 200u);
}

}  // namespace
}  // namespace tachyon::server
