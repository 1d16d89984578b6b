// Run-time CPU feature detection (x86-64 CPUID + XGETBV). Detected once, cached.
// TACHYON_CPU env var caps the level used for dispatch: "scalar", "avx2", "avx512" or "amx".
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
  // Intel AMX: the CPU has the tile unit (int8 and bf16 multiplies) and the OS enabled the
  // tile state (XCR0) and granted this process permission to use it (Linux arch_prctl,
  // requested once at detection).
  bool amx_tile = false;
  bool amx_int8 = false;
  bool amx_bf16 = false;
  bool amx_os = false;

  // Everything the *_avx2.cc files are compiled for.
  bool HasAvx2Set() const { return avx2 && fma && f16c && bmi2; }
  // Everything the *_avx512.cc files are compiled for.
  bool HasAvx512Set() const {
    return HasAvx2Set() && avx512f && avx512bw && avx512vl && avx512dq && avx512vnni && avx512bf16;
  }
  // Everything the *_amx.cc files are compiled for, usable by this process.
  bool HasAmxSet() const { return HasAvx512Set() && amx_tile && amx_int8 && amx_bf16 && amx_os; }
  std::string ToString() const;
};

// The CPU's features, as detected (ignores TACHYON_CPU).
const CpuFeatures& DetectedCpuFeatures();

// kAmx is kAvx512 plus the AMX tile kernels (matmul with several activation rows); code
// without an AMX variant treats it as kAvx512.
enum class SimdLevel { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kAmx = 3 };
// The best level this CPU supports, capped by TACHYON_CPU.
SimdLevel BestSimdLevel();
const char* SimdLevelName(SimdLevel level);

}  // namespace tachyon
