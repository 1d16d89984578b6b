// Element types of tensors, numbered as GGUF / ggml number them, with their block geometry.
//
// A row of `k` elements of a block-quantized type is k / BlockSize(t) blocks of
// TypeSize(t) bytes each (k must be a multiple of the block size). The per-format block
// structs (POD, size static_asserts) live in tensor/quant_blocks.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tachyon {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  // 4, 5: removed Q4_2 / Q4_3
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
};

struct TypeTraits {
  std::string_view name;  // "F32", "Q4_K", ...
  int64_t block_size;     // elements per block (1 for plain types)
  size_t type_size;       // bytes per block
};

// Traits of a known type; nullopt for numbers ggml does not define (bad or future files).
std::optional<TypeTraits> GetTypeTraits(uint32_t type);
std::string_view TypeName(GgmlType type);
// Parses "Q4_K", "q8_0", "F16"... (case-insensitive); nullopt if unknown.
std::optional<GgmlType> ParseTypeName(std::string_view name);

// Bytes of a row of k elements. REQUIRES: k % block_size == 0 and the type is known.
size_t RowBytes(GgmlType type, int64_t k);

}  // namespace tachyon
