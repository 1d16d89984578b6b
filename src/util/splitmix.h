// SplitMix64 (Steele, Lea and Flood): a 64-bit mix used for seeded, reproducible hashing and
// for counter-based random streams.
#pragma once

#include <cstdint>

namespace tachyon {

inline constexpr uint64_t kSplitMixGamma = 0x9e3779b97f4a7c15ULL;

// The finaliser alone: a bijection of 64-bit values whose output bits all depend on every
// input bit.
constexpr uint64_t SplitMixFinalize(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The generator's output for state `x` (the state advanced by the gamma, then finalised).
constexpr uint64_t SplitMix64(uint64_t x) {
  return SplitMixFinalize(x + kSplitMixGamma);
}

// Advances `state` and returns the next output of the stream.
constexpr uint64_t SplitMix64Next(uint64_t& state) {
  const uint64_t x = state;
  state += kSplitMixGamma;
  return SplitMix64(x);
}

}  // namespace tachyon
