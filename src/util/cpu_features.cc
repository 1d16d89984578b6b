#include "util/cpu_features.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace tachyon {
namespace {

uint64_t Xgetbv() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

// Linux: ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA; the grant covers every thread of the
// process. Without it the first tile instruction raises SIGILL.
bool RequestAmxPermission() {
#if defined(__linux__) && defined(SYS_arch_prctl)
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

CpuFeatures Detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27);
  const bool avx = c & (1u << 28);
  f.fma = c & (1u << 12);
  f.f16c = c & (1u << 29);
  if (!osxsave || !avx) return CpuFeatures{};
  const uint64_t xcr0 = Xgetbv();
  const bool ymm_os = (xcr0 & 0x6) == 0x6;
  const bool zmm_os = (xcr0 & 0xe6) == 0xe6;
  if (!ymm_os) return CpuFeatures{};
  unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = b & (1u << 5);
  f.bmi2 = b & (1u << 8);
  if (zmm_os) {
    f.avx512f = b & (1u << 16);
    f.avx512dq = b & (1u << 17);
    f.avx512bw = b & (1u << 30);
    f.avx512vl = b & (1u << 31);
    f.avx512vnni = c & (1u << 11);
    f.amx_bf16 = d & (1u << 22);
    f.amx_tile = d & (1u << 24);
    f.amx_int8 = d & (1u << 25);
    __cpuid_count(7, 1, a, b, c, d);
    f.avx512bf16 = a & (1u << 5);
    f.avxvnni = a & (1u << 4);
    // XCR0 bits 17/18: tile config and tile data state enabled by the OS; Linux additionally
    // requires a per-process request before the first tile instruction.
    const bool tiles_os = (xcr0 & (3ull << 17)) == (3ull << 17);
    if (f.amx_tile && tiles_os) f.amx_os = RequestAmxPermission();
  } else {
    __cpuid_count(7, 1, a, b, c, d);
    f.avxvnni = a & (1u << 4);
  }
  return f;
}

}  // namespace

const CpuFeatures& DetectedCpuFeatures() {
  static const CpuFeatures f = Detect();
  return f;
}

std::string CpuFeatures::ToString() const {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(avx2, "avx2");
  add(fma, "fma");
  add(f16c, "f16c");
  add(bmi2, "bmi2");
  add(avx512f, "avx512f");
  add(avx512bw, "avx512bw");
  add(avx512vl, "avx512vl");
  add(avx512dq, "avx512dq");
  add(avx512vnni, "avx512vnni");
  add(avx512bf16, "avx512bf16");
  add(avxvnni, "avxvnni");
  add(amx_tile && amx_os, "amx-tile");
  add(amx_int8 && amx_os, "amx-int8");
  add(amx_bf16 && amx_os, "amx-bf16");
  return s.empty() ? "none" : s;
}

SimdLevel BestSimdLevel() {
  static const SimdLevel level = [] {
    const CpuFeatures& f = DetectedCpuFeatures();
    SimdLevel l = f.HasAmxSet()      ? SimdLevel::kAmx
                  : f.HasAvx512Set() ? SimdLevel::kAvx512
                  : f.HasAvx2Set() ? SimdLevel::kAvx2
                                   : SimdLevel::kScalar;
    if (const char* cap = std::getenv("TACHYON_CPU")) {
      SimdLevel c = l;
      if (std::strcmp(cap, "scalar") == 0) c = SimdLevel::kScalar;
      else if (std::strcmp(cap, "avx2") == 0) c = SimdLevel::kAvx2;
      else if (std::strcmp(cap, "avx512") == 0) c = SimdLevel::kAvx512;
      else if (std::strcmp(cap, "amx") == 0) c = SimdLevel::kAmx;
      if (c < l) l = c;
    }
    return l;
  }();
  return level;
}

const char* SimdLevelName(SimdLevel level) {
  switch (level) {
    case SimdLevel::kScalar: return "scalar";
    case SimdLevel::kAvx2: return "avx2";
    case SimdLevel::kAvx512: return "avx512";
    case SimdLevel::kAmx: return "amx";
  }
  return "?";
}

}  // namespace tachyon
