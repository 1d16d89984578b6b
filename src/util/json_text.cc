#include "util/json_text.h"

namespace tachyon {

JsonLimit ScanJson(std::string_view text, int max_depth, size_t max_values, JsonShape* shape) {
  // values = 1 (the root) + one per comma + one per non-empty container (its first child);
  // exact for valid JSON.
  int depth = 0, deepest = 0;
  size_t values = 0;
  bool in_string = false, escaped = false, opened = false, root_seen = false;
  JsonLimit crossed = JsonLimit::kNone;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (IsJsonSpace(c)) continue;
    if (!root_seen) {
      root_seen = true;
      ++values;
    }
    if (opened) {
      opened = false;
      if (c != ']' && c != '}') ++values;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > deepest) deepest = depth;
        opened = true;
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      case ',':
        ++values;
        break;
      default:
        break;
    }
    if (depth > max_depth) {
      crossed = JsonLimit::kDepth;
      break;
    }
    if (values > max_values) {
      crossed = JsonLimit::kValues;
      break;
    }
  }
  if (shape != nullptr) *shape = {deepest, values};
  return crossed;
}

Result<nlohmann::json> ParseJsonDocument(std::string_view text, const std::string& what) {
  if (ScanJson(text, kMaxJsonDepth, SIZE_MAX) == JsonLimit::kDepth) {
    return InvalidArgument(what + ": the JSON nests deeper than " + std::to_string(kMaxJsonDepth) +
                           " levels of arrays and objects");
  }
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr,
                                           /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument(what + ": not valid JSON");
  return j;
}

}  // namespace tachyon
