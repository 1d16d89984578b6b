// Test helpers: locate testdata tokenizers and load each one once per test binary.
#pragma once

#include <string>

#include "tokenizer/tokenizer.h"

namespace tachyon::tokenizer::testing_util {

// testdata/tokenizers/<name>, or "" when testdata is absent.
std::string TokenizerDir(const std::string& name);
// Loaded once and cached for the process; nullptr when the files are absent. A load error
// fails the calling test.
const Tokenizer* HfTokenizer(const std::string& name);
// A GGUF from testdata (path relative to testdata), cached; nullptr when absent.
const Tokenizer* GgufTokenizer(const std::string& rel_path);

}  // namespace tachyon::tokenizer::testing_util
