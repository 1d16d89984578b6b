// safetensors Writer.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "safetensors/safetensors.h"

namespace tachyon::safetensors {

void Writer::SetMetadata(const std::string& key, const std::string& value) {
  metadata_[key] = value;
}

Status Writer::Add(const std::string& name, Dtype dtype, std::vector<int64_t> shape,
                   const void* data, size_t nbytes) {
  if (name.empty() || name == "__metadata__") return InvalidArgument("bad tensor name '" + name + "'");
  for (const Pending& p : tensors_) {
    if (p.name == name) return InvalidArgument("duplicate tensor '" + name + "'");
  }
  uint64_t want = DtypeSize(dtype);
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgument("tensor '" + name + "': negative dimension");
    want *= static_cast<uint64_t>(d);
  }
  if (want != nbytes) {
    return InvalidArgument("tensor '" + name + "': " + std::to_string(nbytes) +
                           " bytes given, shape and dtype need " + std::to_string(want));
  }
  tensors_.push_back({name, dtype, std::move(shape),
                      std::string(static_cast<const char*>(data), nbytes)});
  return OkStatus();
}

std::string Writer::Serialize() const {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  uint64_t offset = 0;
  for (const Pending& p : tensors_) {
    header[p.name] = {{"dtype", std::string(DtypeName(p.dtype))},
                      {"shape", p.shape},
                      {"data_offsets", {offset, offset + p.bytes.size()}}};
    offset += p.bytes.size();
  }
  std::string json = header.dump();
  // Pad with spaces so the data section starts 8-byte aligned.
  while ((8 + json.size()) % 8 != 0) json.push_back(' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((uint64_t{json.size()} >> (8 * i)) & 0xff);
  out += json;
  for (const Pending& p : tensors_) out += p.bytes;
  return out;
}

Status Writer::WriteFile(const std::string& path) const {
  const std::string bytes = Serialize();
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return NotFound(path + ": cannot open for writing");
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f) return Internal(path + ": write failed");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Internal(path + ": rename failed: " + ec.message());
  return OkStatus();
}

}  // namespace tachyon::safetensors
