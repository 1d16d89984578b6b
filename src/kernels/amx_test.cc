// The AMX foundation: the level follows detection, and TileConfig has the ldtilecfg layout.
// (The tile multiplies themselves are checked through the AMX matmul kernels' tests.)
#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "kernels/amx.h"
#include "util/cpu_features.h"

namespace tachyon::kernels {
namespace {

TEST(Amx, LevelFollowsFeatures) {
  const CpuFeatures& f = DetectedCpuFeatures();
  if (f.HasAmxSet()) {
    EXPECT_NE(f.ToString().find("amx-int8"), std::string::npos);
  } else {
    EXPECT_LT(BestSimdLevel(), SimdLevel::kAmx);
  }
  EXPECT_STREQ(SimdLevelName(SimdLevel::kAmx), "amx");
}

TEST(Amx, ConfigIsTheHardwareLayout) {
  TileConfig cfg;
  cfg.Set(3, 8, 32);
  const auto* bytes = reinterpret_cast<const uint8_t*>(&cfg);
  EXPECT_EQ(bytes[0], 1);            // palette
  EXPECT_EQ(bytes[16 + 2 * 3], 32);  // colsb[3], little-endian
  EXPECT_EQ(bytes[48 + 3], 8);       // rows[3]
}

}  // namespace
}  // namespace tachyon::kernels
