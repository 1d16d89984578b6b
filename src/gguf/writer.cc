// GGUF v3 writer: metadata in insertion order, tensors aligned, written atomically.
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include "gguf/gguf.h"
#include "util/logging.h"

namespace tachyon::gguf {
namespace {

constexpr char kMagicBytes[4] = {'G', 'G', 'U', 'F'};
constexpr uint32_t kVersion = 3;

// Appends little-endian encodings to a byte string (x86-64 is little-endian).
class Encoder {
 public:
  explicit Encoder(std::string* out) : out_(out) {}
  template <typename T>
  void Put(T v) {
    out_->append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void PutString(const std::string& s) {
    Put<uint64_t>(s.size());
    out_->append(s);
  }
  void PutValue(ValueType type, const Value& v) {
    switch (type) {
      case ValueType::kUint8:
        Put<uint8_t>(static_cast<uint8_t>(v.u));
        break;
      case ValueType::kInt8:
        Put<int8_t>(static_cast<int8_t>(v.i));
        break;
      case ValueType::kUint16:
        Put<uint16_t>(static_cast<uint16_t>(v.u));
        break;
      case ValueType::kInt16:
        Put<int16_t>(static_cast<int16_t>(v.i));
        break;
      case ValueType::kUint32:
        Put<uint32_t>(static_cast<uint32_t>(v.u));
        break;
      case ValueType::kInt32:
        Put<int32_t>(static_cast<int32_t>(v.i));
        break;
      case ValueType::kUint64:
        Put<uint64_t>(v.u);
        break;
      case ValueType::kInt64:
        Put<int64_t>(v.i);
        break;
      case ValueType::kFloat32:
        Put<float>(static_cast<float>(v.f));
        break;
      case ValueType::kFloat64:
        Put<double>(v.f);
        break;
      case ValueType::kBool:
        Put<uint8_t>(v.u ? 1 : 0);
        break;
      case ValueType::kString:
        PutString(v.s);
        break;
      case ValueType::kArray:
        Put<uint32_t>(static_cast<uint32_t>(v.elem_type));
        Put<uint64_t>(v.arr.size());
        for (const Value& e : v.arr) PutValue(v.elem_type, e);
        break;
    }
  }

 private:
  std::string* out_;
};

size_t AlignUp(size_t v, size_t a) {
  return (v + a - 1) / a * a;
}

}  // namespace

void GgufWriter::SetAlignment(size_t alignment) {
  CHECK(std::has_single_bit(alignment))
      << "GGUF alignment must be a power of two, got " << alignment;
  CHECK(alignment <= std::numeric_limits<uint32_t>::max()) << "alignment too large";
  alignment_ = alignment;
  for (auto it = kv_.begin(); it != kv_.end(); ++it) {
    if (it->first == "general.alignment") {
      if (alignment == kDefaultAlignment) {
        kv_.erase(it);
      } else {
        it->second = Value::Uint32(static_cast<uint32_t>(alignment));
      }
      return;
    }
  }
  if (alignment != kDefaultAlignment) {
    kv_.emplace_back("general.alignment", Value::Uint32(static_cast<uint32_t>(alignment)));
  }
}

void GgufWriter::Set(const std::string& key, Value value) {
  if (key == "general.alignment") {
    const auto a = value.AsInt();
    if (value.IsInteger() && a && std::has_single_bit(static_cast<uint64_t>(*a))) {
      alignment_ = static_cast<size_t>(*a);
    }
  }
  for (auto& [k, v] : kv_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

Status GgufWriter::AddTensor(const std::string& name, GgmlType type, std::vector<int64_t> dims,
                             const void* data, size_t nbytes) {
  return Add(name, type, std::move(dims), data, nbytes, /*copy=*/true);
}

Status GgufWriter::AddTensorRef(const std::string& name, GgmlType type, std::vector<int64_t> dims,
                                const void* data, size_t nbytes) {
  return Add(name, type, std::move(dims), data, nbytes, /*copy=*/false);
}

Status GgufWriter::Add(const std::string& name, GgmlType type, std::vector<int64_t> dims,
                       const void* data, size_t nbytes, bool copy) {
  const std::string where = "gguf writer: tensor '" + name + "'";
  if (name.empty()) return InvalidArgument("gguf writer: empty tensor name");
  if (name.size() > kMaxTensorNameLength) {
    return InvalidArgument(where + ": name longer than " + std::to_string(kMaxTensorNameLength) +
                           " bytes");
  }
  for (const auto& t : tensors_) {
    if (t.name == name) return InvalidArgument(where + ": duplicate tensor name");
  }
  const auto traits = GetTypeTraits(static_cast<uint32_t>(type));
  if (!traits) {
    return InvalidArgument(where + ": unknown type " + std::to_string(static_cast<uint32_t>(type)));
  }
  if (dims.empty() || dims.size() > static_cast<size_t>(kMaxDims)) {
    return InvalidArgument(where + ": " + std::to_string(dims.size()) + " dims (need 1.." +
                           std::to_string(kMaxDims) + ")");
  }
  uint64_t elements = 1;
  for (int64_t d : dims) {
    if (d <= 0) return InvalidArgument(where + ": dim " + std::to_string(d) + " <= 0");
    if (elements >
        static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / static_cast<uint64_t>(d)) {
      return InvalidArgument(where + ": element count overflows");
    }
    elements *= static_cast<uint64_t>(d);
  }
  if (dims[0] % traits->block_size != 0) {
    return InvalidArgument(where + ": dims[0] = " + std::to_string(dims[0]) +
                           " is not a multiple of the " + std::string(traits->name) +
                           " block size " + std::to_string(traits->block_size));
  }
  const uint64_t blocks = elements / static_cast<uint64_t>(traits->block_size);
  if (blocks > std::numeric_limits<uint64_t>::max() / traits->type_size ||
      blocks * traits->type_size != nbytes) {
    return InvalidArgument(where + ": " + std::to_string(nbytes) + " bytes given, " +
                           std::string(traits->name) + " with these dims needs " +
                           std::to_string(blocks * traits->type_size));
  }
  if (data == nullptr && nbytes != 0) return InvalidArgument(where + ": null data");
  PendingTensor t;
  t.name = name;
  t.type = type;
  t.dims = std::move(dims);
  t.nbytes = nbytes;
  if (copy) {
    t.owned.assign(static_cast<const char*>(data), nbytes);
    t.data = nullptr;  // resolved from `owned` when written (the struct may move)
  } else {
    t.data = static_cast<const uint8_t*>(data);
  }
  tensors_.push_back(std::move(t));
  return OkStatus();
}

Status GgufWriter::Emit(const std::function<Status(const void*, size_t)>& sink) const {
  std::string head;
  Encoder enc(&head);
  head.append(kMagicBytes, 4);
  enc.Put<uint32_t>(kVersion);
  enc.Put<uint64_t>(tensors_.size());
  enc.Put<uint64_t>(kv_.size());
  for (const auto& [key, value] : kv_) {
    enc.PutString(key);
    enc.Put<uint32_t>(static_cast<uint32_t>(value.type));
    enc.PutValue(value.type, value);
  }
  size_t offset = 0;
  for (const auto& t : tensors_) {
    enc.PutString(t.name);
    enc.Put<uint32_t>(static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) enc.Put<uint64_t>(static_cast<uint64_t>(d));
    enc.Put<uint32_t>(static_cast<uint32_t>(t.type));
    enc.Put<uint64_t>(offset);
    offset = AlignUp(offset + t.nbytes, alignment_);
  }
  // Vocab-only files (no tensors) end right after the metadata, as llama.cpp's do.
  if (!tensors_.empty()) head.resize(AlignUp(head.size(), alignment_), '\0');
  RETURN_IF_ERROR(sink(head.data(), head.size()));
  const std::string zeros(alignment_, '\0');
  for (const auto& t : tensors_) {
    const void* bytes = t.data != nullptr ? static_cast<const void*>(t.data) : t.owned.data();
    RETURN_IF_ERROR(sink(bytes, t.nbytes));
    const size_t pad = AlignUp(t.nbytes, alignment_) - t.nbytes;
    if (pad > 0) RETURN_IF_ERROR(sink(zeros.data(), pad));
  }
  return OkStatus();
}

std::string GgufWriter::Serialize() const {
  std::string out;
  Status st = Emit([&](const void* p, size_t n) {
    out.append(static_cast<const char*>(p), n);
    return OkStatus();
  });
  CHECK(st.ok()) << st.ToString();  // appending to a string cannot fail
  return out;
}

Status GgufWriter::WriteFile(const std::string& path) const {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    return InvalidArgument(path + ": cannot create " + tmp + ": " + std::strerror(errno));
  }
  Status st = Emit([&](const void* p, size_t n) -> Status {
    if (n > 0 && std::fwrite(p, 1, n, f) != n) {
      return Internal(path + ": write failed: " + std::strerror(errno));
    }
    return OkStatus();
  });
  if (st.ok() && std::fflush(f) != 0)
    st = Internal(path + ": flush failed: " + std::strerror(errno));
  if (st.ok() && ::fsync(::fileno(f)) != 0) {
    st = Internal(path + ": fsync failed: " + std::strerror(errno));
  }
  if (std::fclose(f) != 0 && st.ok()) {
    st = Internal(path + ": close failed: " + std::strerror(errno));
  }
  if (st.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    st = Internal(path + ": rename from " + tmp + " failed: " + std::strerror(errno));
  }
  if (!st.ok()) std::remove(tmp.c_str());
  return st;
}

}  // namespace tachyon::gguf
