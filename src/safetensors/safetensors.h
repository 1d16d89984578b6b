// safetensors files: reading (memory-mapped, every offset validated), sharded folders
// (model.safetensors.index.json) and a small writer.
//
// Format facts: u64 little-endian header length N, then N bytes of UTF-8 JSON, then the data
// section. The JSON maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}
// (offsets relative to the data section, row-major, little-endian, no padding rules); an
// optional "__metadata__" object maps strings to strings.
//
// The reader checks the header length against the file size, every dtype and shape, that
// [begin, end) lies inside the data section, that end - begin == product(shape) * dtype size
// and that no two tensors overlap; errors name the file and the tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/mmap_file.h"
#include "util/status.h"

namespace tachyon::safetensors {

// Bound on the JSON header (the format's reference implementation uses 100 MB).
inline constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;
inline constexpr int kMaxRank = 8;

enum class Dtype { kF32, kF16, kBF16, kF64, kI8, kI16, kI32, kI64, kU8, kBool, kF8E4M3, kF8E5M2 };

std::string_view DtypeName(Dtype d);  // "F32", "BF16", "F8_E4M3", ...
std::optional<Dtype> ParseDtype(std::string_view name);
size_t DtypeSize(Dtype d);  // bytes per element

struct TensorInfo {
  std::string name;
  Dtype dtype = Dtype::kF32;
  std::vector<int64_t> shape;  // row-major: shape.back() is contiguous
  uint64_t begin = 0;          // [begin, end) relative to the data section
  uint64_t end = 0;
  int64_t NumElements() const;
  uint64_t nbytes() const { return end - begin; }
};

// One parsed file. Immutable after Open/Parse; const methods are thread-safe.
class SafetensorsFile {
 public:
  // Maps and validates `path`. Errors: NotFound, DataLoss (truncated / inconsistent),
  // InvalidArgument (bad JSON, unknown dtype), all naming the file (and tensor).
  static Result<SafetensorsFile> Open(const std::string& path);
  // Parses a buffer the caller keeps alive; `name` is used in messages.
  static Result<SafetensorsFile> Parse(const uint8_t* data, size_t size, const std::string& name);

  const std::string& path() const { return name_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in data order
  const TensorInfo* Find(std::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Start of a tensor's bytes (valid while this object lives).
  const uint8_t* Data(const TensorInfo& t) const { return data_ + data_offset_ + t.begin; }

 private:
  SafetensorsFile() = default;
  std::shared_ptr<MmapFile> file_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t data_offset_ = 0;
  std::string name_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
};

// Converts `n` elements of a float dtype (F32, F16, BF16, F64) or integer dtype to f32.
// Errors (Unimplemented) for F8 and BOOL.
Status ToF32(Dtype dtype, const uint8_t* src, float* dst, int64_t n);

// A model's weights: one file or several shards listed by model.safetensors.index.json.
class SafetensorsModel {
 public:
  // `path` is a .safetensors file or a folder holding model.safetensors.index.json or
  // model.safetensors (or exactly one *.safetensors file). Every shard is opened and each
  // tensor must live in the shard the index names. Errors name the index / shard.
  static Result<SafetensorsModel> Open(const std::string& path);

  struct Entry {
    const SafetensorsFile* file;
    const TensorInfo* info;
    const uint8_t* data() const { return file->Data(*info); }
  };
  // nullopt if absent.
  std::optional<Entry> Find(std::string_view name) const;
  std::vector<std::string> TensorNames() const;  // sorted
  const std::vector<std::unique_ptr<SafetensorsFile>>& shards() const { return shards_; }

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::map<std::string, Entry, std::less<>> tensors_;
};

// Builds a safetensors file; tensors are laid out in the order added. Not thread-safe.
class Writer {
 public:
  void SetMetadata(const std::string& key, const std::string& value);
  // Copies `nbytes` bytes; errors (InvalidArgument) on a duplicate/empty name or nbytes !=
  // product(shape) * DtypeSize(dtype).
  Status Add(const std::string& name, Dtype dtype, std::vector<int64_t> shape, const void* data,
             size_t nbytes);
  std::string Serialize() const;
  Status WriteFile(const std::string& path) const;

 private:
  struct Pending {
    std::string name;
    Dtype dtype;
    std::vector<int64_t> shape;
    std::string bytes;
  };
  std::map<std::string, std::string> metadata_;
  std::vector<Pending> tensors_;
};

}  // namespace tachyon::safetensors
