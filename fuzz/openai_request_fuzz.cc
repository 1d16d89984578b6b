// libFuzzer target: the OpenAI request validator on arbitrary bodies, through the same bounded
// parse the endpoints use: ParseJsonBody / ParseOrderedJsonBody, then ParseCompletionRequest
// and ParseChatRequest. Every body must end in a request or a 4xx ApiError with a message, never
// a crash, a throw or unbounded recursion; an accepted request must satisfy the documented
// ranges. The ordered parse must equal nlohmann's own.
//
//   scripts/fuzz.sh 60 openai_request_fuzz
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/json_limits.h"
#include "server/protocol.h"

namespace {

using namespace tachyon::server;

constexpr int kVocab = 300;

void CheckError(const ApiError& e) {
  if (e.http_status < 400 || e.http_status >= 500 || e.message.empty()) __builtin_trap();
  (void)e.Body();
}

void CheckCommon(const CommonParams& c) {
  const auto& s = c.sampling;
  if (c.n < 1 || c.n > kMaxN) __builtin_trap();
  if (!(s.temperature >= 0 && s.temperature <= 2) || !(s.top_p > 0 && s.top_p <= 1)) {
    __builtin_trap();
  }
  if (c.max_tokens_set && s.max_tokens < 1) __builtin_trap();
  for (const auto& [id, bias] : s.logit_bias) {
    if (id < 0 || id >= kVocab || !(bias >= -100 && bias <= 100)) __builtin_trap();
  }
  if (s.stop.size() > static_cast<size_t>(kMaxStopStrings)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  auto plain = ParseJsonBody(body);
  auto ordered = ParseOrderedJsonBody(body);
  if (plain.ok() != ordered.ok()) __builtin_trap();
  if (!plain.ok()) {
    CheckError(plain.error());
    return 0;
  }
  // The ordered parse (a builder of its own) gives nlohmann's ordered parse, member order and
  // repeated keys included.
  if (ordered.value() != nlohmann::ordered_json::parse(body, nullptr, false)) __builtin_trap();
  auto completion = ParseCompletionRequest(plain.value(), kVocab);
  if (completion.ok()) {
    CheckCommon(completion.value().common);
    if (completion.value().prompts.empty()) __builtin_trap();
    for (const PromptInput& p : completion.value().prompts) {
      if (const auto* ids = std::get_if<std::vector<int32_t>>(&p)) {
        if (ids->empty()) __builtin_trap();
        for (int32_t id : *ids) {
          if (id < 0 || id >= kVocab) __builtin_trap();
        }
      }
    }
  } else {
    CheckError(completion.error());
  }
  auto chat = ParseChatRequest(ordered.value(), kVocab);
  if (chat.ok()) {
    CheckCommon(chat.value().common);
    const auto& ctx = chat.value().template_context;
    if (!ctx.contains("messages") || !ctx["messages"].is_array() || ctx["messages"].empty()) {
      __builtin_trap();
    }
    (void)DumpJson(nlohmann::json(ctx));
  } else {
    CheckError(chat.error());
  }
  return 0;
}
