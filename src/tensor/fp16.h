// Scalar IEEE half (F16) and bfloat16 (BF16) conversions, portable (no F16C needed).
// F32 -> F16 / BF16 round to nearest even; NaN stays NaN; overflow to F16 gives infinity.
#pragma once

#include <cstdint>
#include <cstring>

namespace tachyon {

inline uint32_t F32Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float BitsToF32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float Fp16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t man = h & 0x3FFu;
  if (exp == 0x1F) return BitsToF32(sign | 0x7F800000u | (man << 13));  // inf / NaN
  if (exp == 0) {
    // Zero or subnormal: man * 2^-24.
    const float v = static_cast<float>(man) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return BitsToF32(sign | ((exp + 112) << 23) | (man << 13));
}

inline uint16_t F32ToFp16(float f) {
  const uint32_t u = F32Bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) {  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7C00u | (abs > 0x7F800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to >= 65520
  if (abs < 0x38800000u) {
    // Result is subnormal (or zero) in F16: round |f| / 2^-24 to nearest even integer.
    if (abs < 0x33000000u) return sign;  // < 2^-25: rounds to zero
    const uint32_t exp = abs >> 23;      // 102..112
    const uint32_t man = (abs & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // 14..24
    uint32_t q = man >> shift;
    const uint32_t rem = man & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  // Normal: rebias exponent (127 -> 15) and round the 13 dropped mantissa bits.
  uint32_t r = abs - (112u << 23);
  const uint32_t rem = r & 0x1FFFu;
  r >>= 13;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;  // may carry into the exponent
  return static_cast<uint16_t>(sign | r);
}

inline float Bf16ToF32(uint16_t b) {
  return BitsToF32(static_cast<uint32_t>(b) << 16);
}

inline uint16_t F32ToBf16(float f) {
  const uint32_t u = F32Bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN
  const uint32_t r = u + 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(r >> 16);
}

}  // namespace tachyon
