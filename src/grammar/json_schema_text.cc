// GBNF text helpers of the JSON Schema converter: literals, class characters, UTF-8.
#include <cstdio>

#include "grammar/json_schema_internal.h"
#include "tokenizer/unicode.h"

namespace tachyon::grammar::schema_internal {

std::vector<uint32_t> DecodeUtf8(std::string_view s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    i += tokenizer::DecodeUtf8(s, i, &cp);
    out.push_back(cp);
  }
  return out;
}

static std::string Hex(const char* fmt, uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

static std::string EscapeCodePoint(uint32_t cp) {
  if (cp < 0x80) return Hex("\\x%02X", cp);
  if (cp < 0x10000) return Hex("\\u%04X", cp);
  return Hex("\\U%08X", cp);
}

std::string Literal(std::string_view s) {
  std::string out = "\"";
  for (uint32_t cp : DecodeUtf8(s)) {
    if (cp == '"') {
      out += "\\\"";
    } else if (cp == '\\') {
      out += "\\\\";
    } else if (cp >= 0x20 && cp < 0x7F) {
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\r') {
      out += "\\r";
    } else {
      out += EscapeCodePoint(cp);
    }
  }
  out += "\"";
  return out;
}

std::string ClassChar(uint32_t cp) {
  if ((cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) {
    return std::string(1, static_cast<char>(cp));
  }
  return EscapeCodePoint(cp);
}

std::string JsonText(const Json& v) {
  return v.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string RepeatSuffix(int64_t min, int64_t max) {
  if (max < 0) {
    if (min == 0) return "*";
    if (min == 1) return "+";
    return "{" + std::to_string(min) + ",}";
  }
  if (min == 0 && max == 1) return "?";
  if (min == 1 && max == 1) return "";
  if (min == max) return "{" + std::to_string(min) + "}";
  return "{" + std::to_string(min) + "," + std::to_string(max) + "}";
}

std::string PointerToken(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace tachyon::grammar::schema_internal
