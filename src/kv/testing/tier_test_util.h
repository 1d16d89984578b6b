// Helpers for the KV tier tests: blocks as byte buffers, keys, a temporary directory.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "kv/block_hash.h"
#include "kv/block_store.h"

namespace tachyon::kv::testing {

// A block of `chunks` chunks of `chunk_bytes`, its bytes a function of `seed`.
struct TestBlock {
  std::vector<std::vector<uint8_t>> data;
  std::vector<std::span<uint8_t>> spans;
  TestBlock(int chunks, size_t chunk_bytes, int seed) : data(chunks) {
    for (int c = 0; c < chunks; ++c) {
      data[c].resize(chunk_bytes);
      for (size_t i = 0; i < chunk_bytes; ++i) data[c][i] = uint8_t(seed * 31 + c * 7 + i);
    }
    for (auto& d : data) spans.emplace_back(d);
  }
  BlockChunks chunks() const { return spans; }
};

inline BlockHash Key(int i) {
  const int32_t t[1] = {i};
  return HashBlock(RootHash("tier-test"), t);
}

// A fresh directory under the system's temporary directory, removed at destruction.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& name)
      : path(std::filesystem::temp_directory_path() /
             ("tachyon-" + name + "-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace tachyon::kv::testing
