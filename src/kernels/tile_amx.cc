// Tile configuration for the AMX kernels (compiled with the AMX flags).
#include <immintrin.h>

#include <cstring>

#include "kernels/amx.h"

namespace tachyon::kernels {
namespace {

struct LoadedConfig {
  bool valid = false;
  TileConfig cfg;
};

LoadedConfig& Loaded() {
  thread_local LoadedConfig loaded;
  return loaded;
}

}  // namespace

void LoadTileConfig(const TileConfig& cfg) {
  LoadedConfig& l = Loaded();
  if (l.valid && std::memcmp(&l.cfg, &cfg, sizeof cfg) == 0) return;
  _tile_loadconfig(&cfg);
  l.cfg = cfg;
  l.valid = true;
}

void ReleaseTiles() {
  _tile_release();
  Loaded().valid = false;
}

}  // namespace tachyon::kernels
