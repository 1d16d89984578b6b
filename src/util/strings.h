// Small string helpers shared by modules.
#pragma once

#include <cstdlib>
#include <string>

namespace tachyon {

// `s` with ASCII letters lowered; other bytes unchanged.
inline std::string AsciiLower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

// The value of environment variable `name`, or "" when it is unset.
inline std::string EnvOrEmpty(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

}  // namespace tachyon
