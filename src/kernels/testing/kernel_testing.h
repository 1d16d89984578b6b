// Helpers shared by the kernel tests: the SIMD levels to run a kernel at, and N(mean, sd)
// test inputs. Test-only (tachyon_kernels_testing).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "util/cpu_features.h"

namespace tachyon::kernels {

// kScalar, then each level above it up to `highest` that this CPU supports (whatever
// TACHYON_CPU says: the tests force each level themselves), in increasing order. A kernel with
// no AMX (or no AVX-512) path passes its best level as `highest`.
std::vector<SimdLevel> SimdLevelsUpTo(SimdLevel highest);

// n values drawn from N(mean, sd) by a std::mt19937 seeded with `seed`.
std::vector<float> Randn(int64_t n, uint32_t seed, float sd = 1.0f, float mean = 0.0f);

// n values drawn from N(0, sd) by *rng (which advances). REQUIRES: rng != nullptr.
std::vector<float> Randn(size_t n, std::mt19937* rng, float sd = 1.0f);

}  // namespace tachyon::kernels
