// GgufFile lookups: metadata getters and tensor search.
#include "gguf/gguf.h"

namespace tachyon::gguf {

int64_t TensorInfo::NumElements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

const Value* GgufFile::Find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

std::optional<std::string> GgufFile::GetString(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr || v->type != ValueType::kString) return std::nullopt;
  return v->s;
}

std::optional<int64_t> GgufFile::GetInt(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr || !v->IsInteger()) return std::nullopt;
  return v->AsInt();
}

std::optional<double> GgufFile::GetFloat(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr || !(v->IsFloat() || v->IsInteger())) return std::nullopt;
  return v->AsDouble();
}

std::optional<bool> GgufFile::GetBool(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr || v->type != ValueType::kBool) return std::nullopt;
  return v->u != 0;
}

std::string GgufFile::Architecture() const {
  return GetString("general.architecture").value_or("");
}

std::optional<size_t> GgufFile::GetArraySize(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr || v->type != ValueType::kArray) return std::nullopt;
  return v->arr.size();
}

const TensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace tachyon::gguf
