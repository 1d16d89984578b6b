// GGUF files: reading (versions 2 and 3, memory-mapped) and writing.
//
// Format facts (little-endian): magic "GGUF", u32 version, u64 tensor_count, u64 kv_count,
// then kv_count metadata pairs (gguf string key, u32 value type, value), then tensor_count
// tensor infos (name, u32 n_dims, u64 dims[n_dims] fastest-varying first, u32 ggml type,
// u64 offset relative to the data section), padding to general.alignment (default 32), the
// data section. A gguf string is a u64 length followed by that many bytes (no NUL).
//
// The reader validates every length, count, offset and dimension against the file size
// before it uses it and never allocates in proportion to an unchecked count; errors name the
// file and the problem.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tensor/dtype.h"
#include "util/mmap_file.h"
#include "util/status.h"

namespace tachyon::gguf {

inline constexpr size_t kDefaultAlignment = 32;
inline constexpr int kMaxDims = 4;                  // GGML_MAX_DIMS
inline constexpr int kMaxArrayDepth = 8;            // nesting of arrays of arrays
inline constexpr size_t kMaxTensorNameLength = 63;  // ggml names are char[64] with NUL
// Bound on the total number of array elements a reader keeps (every array, all depths):
// a file can never make the reader hold more than this many Values.
inline constexpr uint64_t kMaxMetadataElements = uint64_t{1} << 24;

enum class ValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

std::string_view ValueTypeName(ValueType t);
bool IsUnsignedType(ValueType t);  // u8, u16, u32, u64
bool IsSignedType(ValueType t);    // i8, i16, i32, i64

// One metadata value. Scalars use the field of their kind; arrays keep their element type
// and their elements (arrays of arrays nest).
struct Value {
  ValueType type = ValueType::kUint8;
  uint64_t u = 0;                           // unsigned integers, bool (0/1)
  int64_t i = 0;                            // signed integers
  double f = 0;                             // float32 / float64
  std::string s;                            // string
  ValueType elem_type = ValueType::kUint8;  // arrays
  std::vector<Value> arr;                   // arrays

  bool IsInteger() const;
  bool IsFloat() const { return type == ValueType::kFloat32 || type == ValueType::kFloat64; }
  // Numeric value as int64 / double (any integer or float type; bool as 0/1).
  std::optional<int64_t> AsInt() const;
  std::optional<double> AsDouble() const;
  // Short human-readable rendering (arrays abbreviated past `max_items`).
  std::string ToString(size_t max_items = 8) const;

  static Value String(std::string v);
  static Value Uint8(uint8_t v);
  static Value Int8(int8_t v);
  static Value Uint16(uint16_t v);
  static Value Int16(int16_t v);
  static Value Uint32(uint32_t v);
  static Value Int32(int32_t v);
  static Value Uint64(uint64_t v);
  static Value Int64(int64_t v);
  static Value Float32(float v);
  static Value Float64(double v);
  static Value Bool(bool v);
  static Value Array(ValueType elem_type, std::vector<Value> items);
  static Value StringArray(const std::vector<std::string>& items);
  static Value Float32Array(const std::vector<float>& items);
  static Value Int32Array(const std::vector<int32_t>& items);
};

struct TensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // ne[0] (contiguous, fastest-varying) first
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;  // relative to the data section
  uint64_t nbytes = 0;  // computed from dims and type
  int64_t NumElements() const;
};

class GgufParser;

// A parsed GGUF file. Immutable after Open/Parse, so const methods are safe to call from
// many threads. Tensor data points into the mapping (or the caller's buffer for Parse).
class GgufFile {
 public:
  // Maps and parses `path`. Errors: NotFound, or DataLoss/InvalidArgument naming the file
  // and what is wrong ("truncated in tensor info 3", "bad magic", ...).
  static Result<GgufFile> Open(const std::string& path);
  // Parses a buffer that the caller keeps alive (for fuzzing and tests). `name` is used in
  // error messages.
  static Result<GgufFile> Parse(const uint8_t* data, size_t size, const std::string& name);

  GgufFile(GgufFile&&) noexcept = default;
  GgufFile& operator=(GgufFile&&) noexcept = default;

  const std::string& path() const { return name_; }
  uint32_t version() const { return version_; }
  size_t alignment() const { return alignment_; }
  // Start of the data section (aligned; == file_size() for a tensor-less file that ends
  // without padding).
  size_t data_offset() const { return data_offset_; }
  size_t file_size() const { return size_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* Find(std::string_view key) const;
  // Typed lookups: nullopt when the key is missing or has another type.
  std::optional<std::string> GetString(std::string_view key) const;
  std::optional<int64_t> GetInt(std::string_view key) const;   // any integer type
  std::optional<double> GetFloat(std::string_view key) const;  // float or integer
  std::optional<bool> GetBool(std::string_view key) const;
  // "general.architecture", or "" if absent.
  std::string Architecture() const;
  // Element count of an array value (e.g. "tokenizer.ggml.tokens"); nullopt if the key is
  // missing or not an array.
  std::optional<size_t> GetArraySize(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* FindTensor(std::string_view name) const;
  // Start of a tensor's bytes (inside the mapping; valid while this object lives).
  const uint8_t* TensorData(const TensorInfo& t) const { return data_ + data_offset_ + t.offset; }

 private:
  friend class GgufParser;
  GgufFile() = default;
  std::shared_ptr<MmapFile> file_;  // null when parsing a caller's buffer
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string name_;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  size_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> kv_index_;      // key -> index in kv_
  std::map<std::string, size_t, std::less<>> tensor_index_;  // name -> index in tensors_
};

// Builds a GGUF v3 file: metadata in insertion order, tensors laid out in the order added,
// each at an offset aligned to general.alignment (default 32; set it with SetAlignment).
// Not thread-safe; one writer per thread.
class GgufWriter {
 public:
  // REQUIRES: alignment is a non-zero power of two. Also records "general.alignment" (u32)
  // in the metadata unless it is the default 32.
  void SetAlignment(size_t alignment);
  // Adds or replaces a metadata key (a replaced key keeps its position). Setting
  // "general.alignment" to a power-of-two integer also sets the layout alignment.
  void Set(const std::string& key, Value value);
  // Adds a tensor; `data` must hold RowBytes(type, dims[0]) * (product of other dims) bytes
  // and is copied. Errors (InvalidArgument): empty/duplicate/over-long name, unknown type,
  // 0 or more than 4 dims, a dim <= 0, dims[0] not a multiple of the block size, wrong nbytes.
  Status AddTensor(const std::string& name, GgmlType type, std::vector<int64_t> dims,
                   const void* data, size_t nbytes);
  // Like AddTensor, but keeps only the pointer: `data` must stay valid until the last
  // Serialize/WriteFile call (avoids a copy of large weights).
  Status AddTensorRef(const std::string& name, GgmlType type, std::vector<int64_t> dims,
                      const void* data, size_t nbytes);
  // Serialises to bytes / writes the file (atomically: temp file + rename). WriteFile streams
  // tensor data, it does not build the file in memory.
  std::string Serialize() const;
  Status WriteFile(const std::string& path) const;

 private:
  struct PendingTensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> dims;
    std::string owned;              // the copied bytes (AddTensor)
    const uint8_t* data = nullptr;  // points into `owned` or the caller's buffer
    size_t nbytes = 0;
  };
  Status Add(const std::string& name, GgmlType type, std::vector<int64_t> dims, const void* data,
             size_t nbytes, bool copy);
  // Writes the whole file through `sink` (called with consecutive byte ranges).
  Status Emit(const std::function<Status(const void*, size_t)>& sink) const;
  size_t alignment_ = 32;
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace tachyon::gguf
