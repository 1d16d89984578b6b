// Helpers for the chat/ unit tests: render a template source with a JSON context.
#pragma once

#include <string>
#include <string_view>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "chat/chat_template.h"

namespace tachyon::chat::testing {

// Renders `src` with `ctx` (JSON text of an object); returns the text or "ERROR: <message>".
inline std::string Render(std::string_view src, std::string_view ctx = "{}",
                          const RenderOptions& opt = {}) {
  auto t = ChatTemplate::Parse(src);
  if (!t.ok()) return "ERROR: " + t.status().message();
  auto out = t->Render(nlohmann::ordered_json::parse(ctx), opt);
  if (!out.ok()) return "ERROR: " + out.status().message();
  return *out;
}

// The status of parsing + rendering (OK if both succeed).
inline Status RenderStatus(std::string_view src, std::string_view ctx = "{}",
                           const RenderOptions& opt = {}) {
  auto t = ChatTemplate::Parse(src);
  if (!t.ok()) return t.status();
  auto out = t->Render(nlohmann::ordered_json::parse(ctx), opt);
  return out.ok() ? OkStatus() : out.status();
}

}  // namespace tachyon::chat::testing
