// SafetensorsFile: header parsing and validation.
#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "safetensors/safetensors.h"
#include "util/json_text.h"

namespace tachyon::safetensors {

namespace {

using nlohmann::json;

// Product of `shape` times `elem`, or nullopt on overflow past 2^63.
std::optional<uint64_t> CheckedBytes(const std::vector<int64_t>& shape, size_t elem) {
  uint64_t n = elem;
  for (int64_t d : shape) {
    if (d == 0) return 0;
    if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / static_cast<uint64_t>(d)) {
      return std::nullopt;
    }
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

Status ParseTensor(const std::string& file, const std::string& name, const json& j,
                   uint64_t data_size, TensorInfo* t) {
  const std::string where = file + ": tensor '" + name + "'";
  if (!j.is_object()) return InvalidArgument(where + ": entry is not an object");
  auto dtype_it = j.find("dtype");
  if (dtype_it == j.end() || !dtype_it->is_string()) {
    return InvalidArgument(where + ": missing string field dtype");
  }
  std::optional<Dtype> dtype = ParseDtype(dtype_it->get<std::string>());
  if (!dtype) {
    return Unimplemented(where + ": unsupported dtype '" + dtype_it->get<std::string>() + "'");
  }
  auto shape_it = j.find("shape");
  if (shape_it == j.end() || !shape_it->is_array() || shape_it->size() > kMaxRank) {
    return InvalidArgument(where + ": shape must be an array of at most " +
                           std::to_string(kMaxRank) + " dimensions");
  }
  std::vector<int64_t> shape;
  for (const json& d : *shape_it) {
    if (!d.is_number_unsigned() ||
        d.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return InvalidArgument(where + ": shape entries must be non-negative integers");
    }
    shape.push_back(static_cast<int64_t>(d.get<uint64_t>()));
  }
  auto off_it = j.find("data_offsets");
  if (off_it == j.end() || !off_it->is_array() || off_it->size() != 2 ||
      !(*off_it)[0].is_number_unsigned() || !(*off_it)[1].is_number_unsigned()) {
    return InvalidArgument(where + ": data_offsets must be two non-negative integers");
  }
  const uint64_t begin = (*off_it)[0].get<uint64_t>(), end = (*off_it)[1].get<uint64_t>();
  if (begin > end) {
    return DataLoss(where + ": data_offsets begin " + std::to_string(begin) + " > end " +
                    std::to_string(end));
  }
  if (end > data_size) {
    return DataLoss(where + ": data_offsets end " + std::to_string(end) +
                    " is past the data section (" + std::to_string(data_size) + " bytes)");
  }
  std::optional<uint64_t> want = CheckedBytes(shape, DtypeSize(*dtype));
  if (!want || *want != end - begin) {
    return DataLoss(where + ": holds " + std::to_string(end - begin) +
                    " bytes but its dtype and shape need " +
                    (want ? std::to_string(*want) : std::string("an overflowing count of")));
  }
  t->name = name;
  t->dtype = *dtype;
  t->shape = std::move(shape);
  t->begin = begin;
  t->end = end;
  return OkStatus();
}

Status ParseMetadata(const std::string& file, const json& j,
                     std::map<std::string, std::string>* out) {
  if (!j.is_object()) return InvalidArgument(file + ": __metadata__ must be an object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it->is_string()) {
      return InvalidArgument(file + ": __metadata__ value '" + it.key() + "' is not a string");
    }
    (*out)[it.key()] = it->get<std::string>();
  }
  return OkStatus();
}

}  // namespace

Result<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  ASSIGN_OR_RETURN(MmapFile mm, MmapFile::Open(path));
  auto shared = std::make_shared<MmapFile>(std::move(mm));
  ASSIGN_OR_RETURN(SafetensorsFile f, Parse(shared->data(), shared->size(), path));
  f.file_ = std::move(shared);
  return f;
}

Result<SafetensorsFile> SafetensorsFile::Parse(const uint8_t* data, size_t size,
                                               const std::string& name) {
  if (size < 8) return DataLoss(name + ": file too short for the 8-byte header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | data[i];
  if (header_len > kMaxHeaderBytes) {
    return DataLoss(name + ": header length " + std::to_string(header_len) +
                    " exceeds the limit of " + std::to_string(kMaxHeaderBytes) + " bytes");
  }
  if (header_len > size - 8) {
    return DataLoss(name + ": header length " + std::to_string(header_len) +
                    " is past the end of the file (" + std::to_string(size) + " bytes)");
  }
  SafetensorsFile f;
  f.data_ = data;
  f.size_ = size;
  f.name_ = name;
  f.data_offset_ = 8 + header_len;
  const uint64_t data_size = size - f.data_offset_;
  ASSIGN_OR_RETURN(json header,
                   ParseJsonDocument(std::string_view(reinterpret_cast<const char*>(data) + 8,
                                                      static_cast<size_t>(header_len)),
                                     name + ": header"));
  if (!header.is_object()) return InvalidArgument(name + ": header is not a JSON object");
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      RETURN_IF_ERROR(ParseMetadata(name, *it, &f.metadata_));
      continue;
    }
    TensorInfo t;
    RETURN_IF_ERROR(ParseTensor(name, it.key(), *it, data_size, &t));
    f.tensors_.push_back(std::move(t));
  }
  std::sort(f.tensors_.begin(), f.tensors_.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t i = 0; i + 1 < f.tensors_.size(); ++i) {
    const TensorInfo& a = f.tensors_[i];
    const TensorInfo& b = f.tensors_[i + 1];
    if (a.end > b.begin && a.nbytes() > 0 && b.nbytes() > 0) {
      return DataLoss(name + ": tensors '" + a.name + "' and '" + b.name + "' overlap");
    }
  }
  for (size_t i = 0; i < f.tensors_.size(); ++i) f.index_[f.tensors_[i].name] = i;
  return f;
}

const TensorInfo* SafetensorsFile::Find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace tachyon::safetensors
