// Chat template rendering: a 10-turn conversation with tools, tool calls and tool results,
// rendered with real templates from testdata (Qwen2.5, Llama 3.1, Qwen3, gpt-oss), plus
// parse time. Target: well under 1 ms per render.
//
//   build/chat_template_bench [--benchmark_filter=Render]
#include <benchmark/benchmark.h>

#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "util/mmap_file.h"
#include "util/testing/testdata.h"

namespace {

using nlohmann::ordered_json;
using tachyon::chat::ChatTemplate;

std::string TemplateSource(const std::string& name) {
  std::string dir = tachyon::TestdataDir();
  if (dir.empty()) return "";
  auto s = tachyon::ReadFileToString(dir + "/chat-templates/templates/" + name + ".jinja");
  return s.ok() ? *s : "";
}

ordered_json Tools() {
  return ordered_json::parse(R"([
    {"type": "function", "function": {"name": "get_weather",
      "description": "Get the current weather for a city.",
      "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}},
    {"type": "function", "function": {"name": "search",
      "description": "Search the web.",
      "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["query"]}}}])");
}

// 10 turns: system, then user/assistant pairs; every third assistant turn calls a tool.
ordered_json Conversation() {
  ordered_json m = ordered_json::array();
  m.push_back({{"role", "system"}, {"content", "You are a helpful assistant."}});
  for (int turn = 0; turn < 10; ++turn) {
    m.push_back({{"role", "user"},
                 {"content", "Question number " + std::to_string(turn) +
                                 ": what is the weather like in Paris today, and why?"}});
    if (turn % 3 == 1) {
      ordered_json call = {
          {"type", "function"},
          {"id", "call_" + std::to_string(turn)},
          {"function",
           {{"name", "get_weather"}, {"arguments", {{"city", "Paris"}, {"unit", "celsius"}}}}}};
      m.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", {call}}});
      m.push_back({{"role", "tool"},
                   {"tool_call_id", "call_" + std::to_string(turn)},
                   {"content", "{\"temperature\": 21, \"sky\": \"clear\"}"}});
    }
    m.push_back({{"role", "assistant"},
                 {"content", "It is sunny and 21 degrees in Paris. Answer " + std::to_string(turn) +
                                 " ends here."}});
  }
  return m;
}

void BM_Render(benchmark::State& state, const char* name) {
  std::string src = TemplateSource(name);
  if (src.empty()) {
    state.SkipWithError("testdata chat templates not found");
    return;
  }
  auto tmpl = ChatTemplate::Parse(src);
  if (!tmpl.ok()) {
    state.SkipWithError(tmpl.status().ToString().c_str());
    return;
  }
  ordered_json ctx =
      tachyon::chat::MakeChatContext(Conversation(), Tools(), true, "<|begin_of_text|>", "</s>");
  size_t bytes = 0;
  for (auto _ : state) {
    auto out = tmpl->Render(ctx);
    if (!out.ok()) {
      state.SkipWithError(out.status().ToString().c_str());
      return;
    }
    bytes = out->size();
    benchmark::DoNotOptimize(out);
  }
  state.counters["prompt_bytes"] = double(bytes);
}

void BM_Parse(benchmark::State& state, const char* name) {
  std::string src = TemplateSource(name);
  if (src.empty()) {
    state.SkipWithError("testdata chat templates not found");
    return;
  }
  for (auto _ : state) {
    auto tmpl = ChatTemplate::Parse(src);
    benchmark::DoNotOptimize(tmpl);
  }
}

BENCHMARK_CAPTURE(BM_Render, qwen2_5, "Qwen-Qwen2.5-7B-Instruct")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Render, llama3_1, "meta-llama-Llama-3.1-8B-Instruct")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Render, qwen3, "Qwen-Qwen3-0.6B")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Render, gpt_oss, "openai-gpt-oss-120b")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Parse, qwen2_5, "Qwen-Qwen2.5-7B-Instruct")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Parse, gpt_oss, "openai-gpt-oss-120b")->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
