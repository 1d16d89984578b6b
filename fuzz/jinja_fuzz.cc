// libFuzzer target: parse arbitrary bytes as a Jinja chat template and render it with a
// small fixed context under tight limits, with and without provenance tracking (the two must
// agree, and the tracked client spans must be well formed). Any crash, sanitizer report, hang or runaway
// allocation is a bug: bad templates must fail with a Status.
//
//   scripts/build.sh asan jinja_fuzz && build-asan/jinja_fuzz -max_total_time=120 -max_len=4096
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"

namespace {

const nlohmann::ordered_json& Context() {
  static const auto* ctx = new nlohmann::ordered_json(tachyon::chat::MakeChatContext(
      nlohmann::ordered_json::parse(R"([
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": [{"type": "text", "text": "Hi é 😀"}]},
        {"role": "assistant", "content": null, "tool_calls": [{"type": "function",
          "function": {"name": "f", "arguments": {"a": 1, "b": [true, null, 2.5]}}}]},
        {"role": "tool", "content": "42"}])"),
      nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "f",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}])"),
      true, "<s>", "</s>", nlohmann::ordered_json{{"enable_thinking", false}}));
  return *ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view src(reinterpret_cast<const char*>(data), size);
  auto tmpl = tachyon::chat::ChatTemplate::Parse(src);
  if (!tmpl.ok()) return 0;
  tachyon::chat::RenderOptions opt;
  opt.limits.max_steps = 20000;
  opt.limits.max_call_depth = 64;
  opt.limits.max_output_bytes = 1 << 20;
  opt.limits.max_list_items = 1 << 16;
  opt.clock = [] { return std::time_t(1768435200); };
  opt.clock_is_utc = true;
  auto plain = tmpl->Render(Context(), opt);
  // Provenance tracking must render the same text, with client spans sorted, disjoint,
  // non-empty and inside it.
  static const std::vector<std::string> kTrusted = {"/bos_token", "/eos_token",
                                                    "/messages/*/role"};
  auto tracked = tmpl->RenderTracked(Context(), kTrusted, opt);
  if (plain.ok() != tracked.ok()) __builtin_trap();
  if (plain.ok()) {
    if (*plain != tracked->text) __builtin_trap();
    size_t prev_end = 0;
    for (const auto& [first, second] : tracked->client_spans) {
      if (first < prev_end || first >= second || second > tracked->text.size()) __builtin_trap();
      prev_end = second;
    }
  }
  return 0;
}
