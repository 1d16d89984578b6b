// The chat page served at GET / (src/server/chat_page.html): one self-contained HTML file (no
// external scripts, styles or fonts) that chats with the server through /v1/chat/completions
// (streamed), with a system prompt, sampling settings and a stop button. Model output is parsed
// as Markdown into DOM nodes filled with textContent, never inserted as HTML.
// The file is compiled into the binary at build time (cmake/embed_file.cmake).
#pragma once

#include <string_view>

namespace tachyon::server {

// The page's HTML (static storage; thread-safe).
std::string_view ChatPageHtml();

}  // namespace tachyon::server
