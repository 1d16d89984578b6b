// A read-only memory-mapped file. Movable, not copyable; unmaps on destruction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "util/status.h"

namespace tachyon {

class MmapFile {
 public:
  MmapFile() = default;
  ~MmapFile();
  MmapFile(MmapFile&& other) noexcept;
  MmapFile& operator=(MmapFile&& other) noexcept;
  MmapFile(const MmapFile&) = delete;
  MmapFile& operator=(const MmapFile&) = delete;

  // Maps `path` read-only. Errors name the path (NotFound, InvalidArgument for a directory).
  // An empty file maps to size() == 0 and data() == nullptr.
  static Result<MmapFile> Open(const std::string& path);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Reads a whole file into a string (for small text files: JSON, templates).
Result<std::string> ReadFileToString(const std::string& path);

}  // namespace tachyon
