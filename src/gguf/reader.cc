// GGUF reader: parses a mapped buffer, validating every count, length and offset against the
// bytes that remain before using it (see docs/gguf.md for the list of checks).
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <string>

#include "gguf/gguf.h"

namespace tachyon::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32

// Smallest encoding of one value of type t (used to bound counts by the remaining bytes).
uint64_t MinValueBytes(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kBool:
      return 1;
    case ValueType::kUint16:
    case ValueType::kInt16:
      return 2;
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kFloat32:
      return 4;
    case ValueType::kUint64:
    case ValueType::kInt64:
    case ValueType::kFloat64:
    case ValueType::kString:
      return 8;  // the length
    case ValueType::kArray:
      return 12;  // element type + length
  }
  return 1;
}

bool KnownValueType(uint32_t t) {
  return t <= static_cast<uint32_t>(ValueType::kFloat64);
}

}  // namespace

class GgufParser {
 public:
  GgufParser(const uint8_t* data, size_t size, const std::string& name)
      : data_(data), size_(size), name_(name) {}

  Status Run(GgufFile& f) {
    RETURN_IF_ERROR(ParseHeader(f));
    RETURN_IF_ERROR(ParseMetadata(f));
    RETURN_IF_ERROR(ParseTensorInfos(f));
    return ParseLayout(f);
  }

 private:
  // ---- error helpers -------------------------------------------------------------------
  // Describes the item being parsed: "tensor info 3 'blk.0.attn_q.weight'", "metadata 5
  // 'tokenizer.ggml.tokens' element 17".
  std::string Where() const {
    std::string w = section_;
    if (!item_.empty()) w += " '" + item_ + "'";
    for (int d = 0; d < depth_; ++d) w += " element " + std::to_string(elem_index_[d]);
    return w;
  }
  Status Corrupt(const std::string& msg) const { return DataLoss(name_ + ": " + msg); }
  Status CorruptHere(const std::string& msg) const { return Corrupt(Where() + ": " + msg); }

  uint64_t Remaining() const { return size_ - pos_; }

  // Checks that n bytes remain at the cursor.
  Status Need(uint64_t n, const char* field) const {
    if (n <= Remaining()) return OkStatus();
    return DataLoss(name_ + ": truncated: " + Where() + " (" + field + ") needs " +
                    std::to_string(n) + " bytes at offset " + std::to_string(pos_) + ", file has " +
                    std::to_string(size_));
  }

  template <typename T>
  Status Read(T* out, const char* field) {
    RETURN_IF_ERROR(Need(sizeof(T), field));
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return OkStatus();
  }

  Status ReadString(std::string* out, const char* field) {
    uint64_t len = 0;
    RETURN_IF_ERROR(Read(&len, field));
    if (len > Remaining()) {
      return DataLoss(name_ + ": truncated: " + Where() + " (" + field + "): string length " +
                      std::to_string(len) + " at offset " + std::to_string(pos_ - 8) +
                      " runs past the end of the file (size " + std::to_string(size_) + ")");
    }
    out->assign(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += len;
    return OkStatus();
  }

  // ---- sections ------------------------------------------------------------------------
  Status ParseHeader(GgufFile& f) {
    section_ = "header";
    uint32_t magic = 0;
    RETURN_IF_ERROR(Read(&magic, "magic"));
    if (magic != kMagic) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "0x%08x", magic);
      return InvalidArgument(name_ + ": not a GGUF file (bad magic " + buf +
                             ", expected \"GGUF\")");
    }
    uint32_t version = 0;
    RETURN_IF_ERROR(Read(&version, "version"));
    if (version == 1) {
      return Unimplemented(name_ + ": GGUF version 1 is not supported (only versions 2 and 3)");
    }
    if (version != 2 && version != 3) {
      std::string hint;
      if (version == 0x02000000u || version == 0x03000000u) hint = "; big-endian file?";
      return Unimplemented(name_ + ": unsupported GGUF version " + std::to_string(version) +
                           " (supported: 2, 3" + hint + ")");
    }
    f.version_ = version;
    RETURN_IF_ERROR(Read(&tensor_count_, "tensor_count"));
    RETURN_IF_ERROR(Read(&kv_count_, "kv_count"));
    // Each metadata pair takes at least 13 bytes (key length, value type, 1-byte value) and
    // each tensor info at least 24 (name length, n_dims, type, offset).
    const uint64_t rest = Remaining();
    if (kv_count_ > rest / 13) {
      return Corrupt("truncated or corrupt header: kv_count " + std::to_string(kv_count_) +
                     " is more than the remaining " + std::to_string(rest) +
                     " bytes can hold (at most " + std::to_string(rest / 13) + ")");
    }
    if (tensor_count_ > rest / 24) {
      return Corrupt("truncated or corrupt header: tensor_count " + std::to_string(tensor_count_) +
                     " is more than the remaining " + std::to_string(rest) +
                     " bytes can hold (at most " + std::to_string(rest / 24) + ")");
    }
    return OkStatus();
  }

  Status ParseMetadata(GgufFile& f) {
    f.kv_.reserve(static_cast<size_t>(kv_count_));
    for (uint64_t k = 0; k < kv_count_; ++k) {
      section_ = "metadata " + std::to_string(k);
      item_.clear();
      std::string key;
      RETURN_IF_ERROR(ReadString(&key, "key"));
      item_ = key;
      if (key.empty()) return CorruptHere("empty key");
      if (f.kv_index_.count(key) != 0) return CorruptHere("duplicate key");
      uint32_t type = 0;
      RETURN_IF_ERROR(Read(&type, "value type"));
      Value v;
      RETURN_IF_ERROR(ReadValue(type, &v));
      f.kv_index_.emplace(key, f.kv_.size());
      f.kv_.emplace_back(std::move(key), std::move(v));
    }
    item_.clear();
    return OkStatus();
  }

  Status ReadValue(uint32_t raw_type, Value* v) {
    if (!KnownValueType(raw_type)) {
      return CorruptHere("unknown value type " + std::to_string(raw_type));
    }
    const auto type = static_cast<ValueType>(raw_type);
    v->type = type;
    switch (type) {
      case ValueType::kUint8:
        return ReadUnsigned<uint8_t>(v);
      case ValueType::kUint16:
        return ReadUnsigned<uint16_t>(v);
      case ValueType::kUint32:
        return ReadUnsigned<uint32_t>(v);
      case ValueType::kUint64:
        return ReadUnsigned<uint64_t>(v);
      case ValueType::kInt8:
        return ReadSigned<int8_t>(v);
      case ValueType::kInt16:
        return ReadSigned<int16_t>(v);
      case ValueType::kInt32:
        return ReadSigned<int32_t>(v);
      case ValueType::kInt64:
        return ReadSigned<int64_t>(v);
      case ValueType::kFloat32: {
        float x = 0;
        RETURN_IF_ERROR(Read(&x, "f32 value"));
        v->f = x;
        return OkStatus();
      }
      case ValueType::kFloat64:
        return Read(&v->f, "f64 value");
      case ValueType::kBool: {
        uint8_t b = 0;
        RETURN_IF_ERROR(Read(&b, "bool value"));
        if (b > 1) return CorruptHere("bad bool value " + std::to_string(b));
        v->u = b;
        return OkStatus();
      }
      case ValueType::kString:
        return ReadString(&v->s, "string value");
      case ValueType::kArray:
        return ReadArray(v);
    }
    return CorruptHere("unknown value type");
  }

  template <typename T>
  Status ReadUnsigned(Value* v) {
    T x = 0;
    RETURN_IF_ERROR(Read(&x, "integer value"));
    v->u = x;
    return OkStatus();
  }
  template <typename T>
  Status ReadSigned(Value* v) {
    T x = 0;
    RETURN_IF_ERROR(Read(&x, "integer value"));
    v->i = x;
    return OkStatus();
  }

  Status ReadArray(Value* v) {
    if (depth_ >= kMaxArrayDepth) {
      return CorruptHere("arrays nested deeper than " + std::to_string(kMaxArrayDepth));
    }
    uint32_t elem_type = 0;
    RETURN_IF_ERROR(Read(&elem_type, "array element type"));
    if (!KnownValueType(elem_type)) {
      return CorruptHere("unknown array element type " + std::to_string(elem_type));
    }
    uint64_t len = 0;
    RETURN_IF_ERROR(Read(&len, "array length"));
    const uint64_t min_bytes = MinValueBytes(static_cast<ValueType>(elem_type));
    if (len > Remaining() / min_bytes) {
      return DataLoss(name_ + ": truncated: " + Where() + ": array length " + std::to_string(len) +
                      " of " + std::string(ValueTypeName(static_cast<ValueType>(elem_type))) +
                      " needs at least " + std::to_string(min_bytes) + " bytes per element, only " +
                      std::to_string(Remaining()) + " bytes remain at offset " +
                      std::to_string(pos_));
    }
    if (len > kMaxMetadataElements - total_elements_) {
      return CorruptHere("too many metadata array elements (limit " +
                         std::to_string(kMaxMetadataElements) + " in all)");
    }
    total_elements_ += len;
    v->elem_type = static_cast<ValueType>(elem_type);
    v->arr.resize(static_cast<size_t>(len));
    ++depth_;
    for (uint64_t k = 0; k < len; ++k) {
      elem_index_[depth_ - 1] = k;
      RETURN_IF_ERROR(ReadValue(elem_type, &v->arr[k]));
    }
    --depth_;
    return OkStatus();
  }

  Status ParseTensorInfos(GgufFile& f) {
    f.tensors_.reserve(static_cast<size_t>(tensor_count_));
    for (uint64_t k = 0; k < tensor_count_; ++k) {
      section_ = "tensor info " + std::to_string(k);
      item_.clear();
      TensorInfo t;
      RETURN_IF_ERROR(ReadString(&t.name, "name"));
      item_ = t.name;
      if (t.name.empty()) return CorruptHere("empty tensor name");
      if (f.tensor_index_.count(t.name) != 0) return CorruptHere("duplicate tensor name");
      uint32_t n_dims = 0;
      RETURN_IF_ERROR(Read(&n_dims, "n_dims"));
      if (n_dims == 0 || n_dims > static_cast<uint32_t>(kMaxDims)) {
        return CorruptHere("n_dims " + std::to_string(n_dims) + " is outside 1.." +
                           std::to_string(kMaxDims));
      }
      uint64_t elements = 1;
      for (uint32_t d = 0; d < n_dims; ++d) {
        uint64_t dim = 0;
        RETURN_IF_ERROR(Read(&dim, "dims"));
        if (dim == 0 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          return CorruptHere("dim " + std::to_string(d) + " is " +
                             std::to_string(static_cast<int64_t>(dim)) + " (must be > 0)");
        }
        if (elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / dim) {
          return CorruptHere("element count overflows int64 at dim " + std::to_string(d));
        }
        elements *= dim;
        t.dims.push_back(static_cast<int64_t>(dim));
      }
      uint32_t type = 0;
      RETURN_IF_ERROR(Read(&type, "type"));
      const auto traits = GetTypeTraits(type);
      if (!traits) return CorruptHere("unknown tensor type " + std::to_string(type));
      t.type = static_cast<GgmlType>(type);
      if (t.dims[0] % traits->block_size != 0) {
        return CorruptHere("dims[0] = " + std::to_string(t.dims[0]) + " is not a multiple of the " +
                           std::string(traits->name) + " block size " +
                           std::to_string(traits->block_size));
      }
      const uint64_t blocks = elements / static_cast<uint64_t>(traits->block_size);
      if (blocks > std::numeric_limits<uint64_t>::max() / traits->type_size) {
        return CorruptHere("byte size overflows");
      }
      t.nbytes = blocks * traits->type_size;
      RETURN_IF_ERROR(Read(&t.offset, "offset"));
      f.tensor_index_.emplace(t.name, f.tensors_.size());
      f.tensors_.push_back(std::move(t));
    }
    item_.clear();
    return OkStatus();
  }

  Status ParseLayout(GgufFile& f) {
    section_ = "layout";
    f.alignment_ = kDefaultAlignment;
    if (const Value* a = f.Find("general.alignment")) {
      const auto v = a->AsInt();
      if (!a->IsInteger() || !v || !std::has_single_bit(static_cast<uint64_t>(*v))) {
        return Corrupt("general.alignment must be a non-zero power-of-two integer, got " +
                       std::string(ValueTypeName(a->type)) + " " + a->ToString());
      }
      f.alignment_ = static_cast<size_t>(*v);
    }
    const uint64_t align = f.alignment_;
    if (pos_ > std::numeric_limits<uint64_t>::max() - (align - 1)) {
      return Corrupt("general.alignment " + std::to_string(align) + " overflows the data offset");
    }
    const uint64_t data_offset = (pos_ + align - 1) / align * align;
    if (f.tensors_.empty()) {
      // Vocab-only files may end without the padding: the (empty) data section is at the end.
      f.data_offset_ = static_cast<size_t>(std::min(data_offset, size_));
      return OkStatus();
    }
    f.data_offset_ = static_cast<size_t>(data_offset);
    if (data_offset > size_) {
      return DataLoss(name_ + ": truncated: data section starts at offset " +
                      std::to_string(data_offset) + " (after padding to " + std::to_string(align) +
                      "), file has " + std::to_string(size_));
    }
    const uint64_t data_size = size_ - data_offset;
    for (size_t k = 0; k < f.tensors_.size(); ++k) {
      const TensorInfo& t = f.tensors_[k];
      const std::string where = "tensor " + std::to_string(k) + " '" + t.name + "'";
      if (t.offset % align != 0) {
        return Corrupt(where + ": offset " + std::to_string(t.offset) +
                       " is not a multiple of the alignment " + std::to_string(align));
      }
      if (t.offset > data_size || t.nbytes > data_size - t.offset) {
        return DataLoss(name_ + ": truncated: " + where + " data [" + std::to_string(t.offset) +
                        ", +" + std::to_string(t.nbytes) + ") relative to the data section at " +
                        std::to_string(data_offset) + " runs past the end of the file (size " +
                        std::to_string(size_) + ")");
      }
    }
    std::vector<size_t> order(f.tensors_.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return f.tensors_[a].offset < f.tensors_[b].offset; });
    for (size_t k = 1; k < order.size(); ++k) {
      const TensorInfo& prev = f.tensors_[order[k - 1]];
      const TensorInfo& cur = f.tensors_[order[k]];
      if (prev.offset + prev.nbytes > cur.offset) {
        return Corrupt("tensors '" + prev.name + "' [" + std::to_string(prev.offset) + ", +" +
                       std::to_string(prev.nbytes) + ") and '" + cur.name + "' [" +
                       std::to_string(cur.offset) + ", +" + std::to_string(cur.nbytes) +
                       ") overlap");
      }
    }
    return OkStatus();
  }

  const uint8_t* data_;
  uint64_t size_;
  const std::string& name_;
  uint64_t pos_ = 0;
  uint64_t tensor_count_ = 0;
  uint64_t kv_count_ = 0;
  uint64_t total_elements_ = 0;
  std::string section_;
  std::string item_;
  int depth_ = 0;
  uint64_t elem_index_[kMaxArrayDepth] = {};
};

Result<GgufFile> GgufFile::Parse(const uint8_t* data, size_t size, const std::string& name) {
  if (data == nullptr && size != 0) return InvalidArgument(name + ": null buffer");
  GgufFile f;
  f.data_ = data;
  f.size_ = size;
  f.name_ = name;
  GgufParser parser(data, size, name);
  RETURN_IF_ERROR(parser.Run(f));
  return f;
}

Result<GgufFile> GgufFile::Open(const std::string& path) {
  ASSIGN_OR_RETURN(MmapFile mapped, MmapFile::Open(path));
  auto file = std::make_shared<MmapFile>(std::move(mapped));
  ASSIGN_OR_RETURN(GgufFile f, Parse(file->data(), file->size(), path));
  f.file_ = std::move(file);
  return f;
}

}  // namespace tachyon::gguf
