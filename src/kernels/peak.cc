#include "kernels/peak.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <vector>

#include "util/cpu_features.h"

namespace tachyon::kernels {

ComputePeak MeasureComputePeak(ThreadPool* pool, int runs, double ms_per_run) {
  ComputePeak peak;
  const CpuFeatures& f = DetectedCpuFeatures();
  int (*loop)(int64_t) = nullptr;
  double ops_per_iter = 0;
  if (BestSimdLevel() >= SimdLevel::kAvx512 && f.avx512vnni) {
    loop = internal::PeakInt8Avx512;
    ops_per_iter = internal::kPeakOpsPerIterAvx512;
    peak.int8_instr = "avx512-vnni vpdpbusd";
  } else if (BestSimdLevel() >= SimdLevel::kAvx2) {
    loop = internal::PeakInt8Avx2;
    ops_per_iter = internal::kPeakOpsPerIterAvx2;
    peak.int8_instr = "avx2 vpmaddubsw";
  } else {
    peak.int8_instr = "none";
    return peak;
  }
  const int threads = pool != nullptr ? pool->num_threads() : 1;
  std::vector<int> sink(static_cast<size_t>(threads));
  using Clock = std::chrono::steady_clock;
  auto timed = [&](int64_t iters) {
    const auto t0 = Clock::now();
    if (pool != nullptr) {
      pool->Run([&](int tid, int) { sink[static_cast<size_t>(tid)] = loop(iters); });
    } else {
      sink[0] = loop(iters);
    }
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  // Calibrate the iteration count to ~ms_per_run, then keep the best run (the least
  // disturbed by other processes).
  const double target_s = 1e-3 * std::max(1.0, ms_per_run);
  int64_t iters = 1 << 12;
  double s = timed(iters);
  while (s < target_s / 8 && iters < (int64_t{1} << 34)) {
    iters *= 8;
    s = timed(iters);
  }
  iters = std::max<int64_t>(iters, static_cast<int64_t>(static_cast<double>(iters) * target_s /
                                                        std::max(s, 1e-9)));
  double best = 0;
  for (int r = 0; r < std::max(1, runs); ++r) {
    s = timed(iters);
    if (s > 0) best = std::max(best, ops_per_iter * static_cast<double>(iters) * threads / s);
  }
  peak.int8_gops = best / 1e9;
  return peak;
}

}  // namespace tachyon::kernels
