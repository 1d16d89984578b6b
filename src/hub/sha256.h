// SHA-256 (FIPS 180-4), incremental. Used to verify downloaded LFS files against the Hub's
// sha256 (its ETag / X-Linked-Etag / lfs.sha256).
//
//   Sha256 h;
//   h.Update(data, n);           // any number of times
//   std::string hex = h.HexDigest();  // 64 lowercase hex digits; ends the computation
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "util/status.h"

namespace tachyon::hub {

class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t n);
  void Update(std::string_view s) { Update(s.data(), s.size()); }
  // The digest of everything passed to Update. REQUIRES: called once.
  std::array<uint8_t, 32> Digest();
  std::string HexDigest();

 private:
  void Block(const uint8_t* p);

  std::array<uint32_t, 8> h_;
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;  // bytes
};

// Hex SHA-256 of a file's contents (read in chunks). Errors name the file.
Result<std::string> Sha256File(const std::string& path);

}  // namespace tachyon::hub
