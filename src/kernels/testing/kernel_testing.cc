#include "kernels/testing/kernel_testing.h"

namespace tachyon::kernels {

std::vector<SimdLevel> SimdLevelsUpTo(SimdLevel highest) {
  const CpuFeatures& f = DetectedCpuFeatures();
  std::vector<SimdLevel> levels = {SimdLevel::kScalar};
  if (highest >= SimdLevel::kAvx2 && f.HasAvx2Set()) levels.push_back(SimdLevel::kAvx2);
  if (highest >= SimdLevel::kAvx512 && f.HasAvx512Set()) levels.push_back(SimdLevel::kAvx512);
  if (highest >= SimdLevel::kAmx && f.HasAmxSet()) levels.push_back(SimdLevel::kAmx);
  return levels;
}

std::vector<float> Randn(int64_t n, uint32_t seed, float sd, float mean) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(mean, sd);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<float> Randn(size_t n, std::mt19937* rng, float sd) {
  std::normal_distribution<float> dist(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = dist(*rng);
  return v;
}

}  // namespace tachyon::kernels
