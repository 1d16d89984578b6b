#include <cstring>

#include "safetensors/safetensors.h"
#include "tensor/fp16.h"

namespace tachyon::safetensors {

namespace {

struct DtypeEntry {
  Dtype dtype;
  std::string_view name;
  size_t size;
};

constexpr DtypeEntry kDtypes[] = {
    {Dtype::kF32, "F32", 4},         {Dtype::kF16, "F16", 2},   {Dtype::kBF16, "BF16", 2},
    {Dtype::kF64, "F64", 8},         {Dtype::kI8, "I8", 1},     {Dtype::kI16, "I16", 2},
    {Dtype::kI32, "I32", 4},         {Dtype::kI64, "I64", 8},   {Dtype::kU8, "U8", 1},
    {Dtype::kBool, "BOOL", 1},       {Dtype::kF8E4M3, "F8_E4M3", 1},
    {Dtype::kF8E5M2, "F8_E5M2", 1},
};

template <typename T>
void Convert(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, src + i * sizeof(T), sizeof(T));
    dst[i] = static_cast<float>(v);
  }
}

}  // namespace

std::string_view DtypeName(Dtype d) {
  for (const DtypeEntry& e : kDtypes) {
    if (e.dtype == d) return e.name;
  }
  return "?";
}

std::optional<Dtype> ParseDtype(std::string_view name) {
  for (const DtypeEntry& e : kDtypes) {
    if (e.name == name) return e.dtype;
  }
  return std::nullopt;
}

size_t DtypeSize(Dtype d) {
  for (const DtypeEntry& e : kDtypes) {
    if (e.dtype == d) return e.size;
  }
  return 0;
}

int64_t TensorInfo::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Status ToF32(Dtype dtype, const uint8_t* src, float* dst, int64_t n) {
  switch (dtype) {
    case Dtype::kF32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return OkStatus();
    case Dtype::kF64: Convert<double>(src, dst, n); return OkStatus();
    case Dtype::kI8: Convert<int8_t>(src, dst, n); return OkStatus();
    case Dtype::kI16: Convert<int16_t>(src, dst, n); return OkStatus();
    case Dtype::kI32: Convert<int32_t>(src, dst, n); return OkStatus();
    case Dtype::kI64: Convert<int64_t>(src, dst, n); return OkStatus();
    case Dtype::kU8: Convert<uint8_t>(src, dst, n); return OkStatus();
    case Dtype::kF16:
    case Dtype::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + i * 2, 2);
        dst[i] = dtype == Dtype::kF16 ? Fp16ToF32(h) : Bf16ToF32(h);
      }
      return OkStatus();
    default:
      return Unimplemented("conversion of " + std::string(DtypeName(dtype)) +
                           " tensors to F32 is not supported");
  }
}

}  // namespace tachyon::safetensors
