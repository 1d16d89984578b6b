// Base64 (RFC 4648): the standard alphabet with '=' padding when encoding; decoding also takes
// the URL-safe alphabet ('-', '_'). Used where a JSON API carries bytes (etcd's v3 JSON keys and
// values, OpenAI's encoding_format "base64" embeddings). Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tachyon::util {

std::string Base64Encode(std::string_view bytes);
// nullopt for a length that is not a multiple of 4, a character outside the alphabets, or data
// after the padding.
std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace tachyon::util
