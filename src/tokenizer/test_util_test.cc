// Shared by the tokenizer tests (compiled into tokenizer_test; named *_test.cc for that).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>
#include <memory>
#include <mutex>

#include "tokenizer/test_util.h"
#include "util/testing/testdata.h"

namespace tachyon::tokenizer::testing_util {
namespace {

bool Exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

const Tokenizer* Cached(const std::string& key, const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second.get();
  if (!Exists(path)) return nullptr;
  auto t = Tokenizer::FromFile(path);
  if (!t.ok()) {
    ADD_FAILURE() << "loading " << path << ": " << t.status().ToString();
    return nullptr;
  }
  return (cache[key] = std::move(t).value()).get();
}

}  // namespace

std::string TokenizerDir(const std::string& name) {
  const std::string td = TestdataDir();
  return td.empty() ? "" : td + "/tokenizers/" + name;
}

const Tokenizer* HfTokenizer(const std::string& name) {
  const std::string dir = TokenizerDir(name);
  if (dir.empty()) return nullptr;
  return Cached("hf:" + name, dir);
}

const Tokenizer* GgufTokenizer(const std::string& rel_path) {
  const std::string td = TestdataDir();
  if (td.empty()) return nullptr;
  return Cached("gguf:" + rel_path, td + "/" + rel_path);
}

}  // namespace tachyon::tokenizer::testing_util
