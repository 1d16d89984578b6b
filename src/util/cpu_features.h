// Run-time CPU feature detection (x86-64 CPUID + XGETBV). Detected once, cached.
// TACHYON_CPU env var caps the level used for dispatch: "scalar", "avx2" or "avx512".
#pragma once

#include <string>

namespace tachyon {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool bmi2 = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;
  bool avxvnni = false;

  // Everything the *_avx2.cc files are compiled for.
  bool HasAvx2Set() const { return avx2 && fma && f16c && bmi2; }
  // Everything the *_avx512.cc files are compiled for.
  bool HasAvx512Set() const {
    return HasAvx2Set() && avx512f && avx512bw && avx512vl && avx512dq && avx512vnni && avx512bf16;
  }
  std::string ToString() const;
};

// The CPU's features, as detected (ignores TACHYON_CPU).
const CpuFeatures& DetectedCpuFeatures();

enum class SimdLevel { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };
// The best level this CPU supports, capped by TACHYON_CPU.
SimdLevel BestSimdLevel();
const char* SimdLevelName(SimdLevel level);

}  // namespace tachyon
